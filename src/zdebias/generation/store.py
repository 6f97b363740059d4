"""The sampling folder on disk (docs/design.md §6): ``state.json``, the shard files, resume,
reading back.

A sampling run's folder holds ``shard-NNNNN.jsonl`` (records with ``meta.type =
"generated"``), ``dropped-NNNNN.jsonl`` (each dropped output with its reason), for prompted
runs ``requests-NNNNN.jsonl`` (each request's tokens, attempts and time), ``state.json`` (the
shards written, the next round, the counts) and, once complete, ``samples.jsonl`` (all shards
in order) and ``summary.json``. Every file is written atomically and a shard before the state
that lists it, so a killed run leaves at most files the state does not list:
:func:`open_run` removes them and reads the samples written so far back as the de-duplication
set. Changing a setting that decides the samples in a folder that holds a run is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zdebias.data.ownership import check_ours
from zdebias.data.schema import Record
from zdebias.data.writers import atomic_open, claim
from zdebias.errors import ConfigError, DataError
from zdebias.generation.format import MALFORMED_REASONS, sample_key
from zdebias.generation.settings import SampleSettings

STATE = "state.json"
SUMMARY = "summary.json"
MERGED = "samples.jsonl"


def key_hash(key: tuple[str, str, str]) -> int:
    """The 64-bit hash a run de-duplicates by, of a sample's
    :func:`~zdebias.generation.format.sample_key`."""
    digest = hashlib.blake2b("\x1f".join(key).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def read_state(path: Path) -> dict[str, Any] | None:
    """The ``state.json`` at ``path``, or None where there is none."""
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(f"invalid JSON ({err.msg})", path=str(path), line=err.lineno) from err


def _new_state(
    run: dict[str, Any], fingerprint: str, generator: str, reasons: Sequence[str]
) -> dict[str, Any]:
    return {
        "version": 1,
        "generator": generator,
        "generator_fingerprint": fingerprint,
        "settings": run,
        "next_round": 0,
        "shards": [],
        "n_written": 0,
        "n_generated": 0,
        "n_duplicates": 0,
        "n_surplus": 0,
        "malformed": dict.fromkeys(reasons, 0),
        "seconds": 0.0,
    }


def _load_state(
    out: Path, run: dict[str, Any], fingerprint: str, generator: str, reasons: Sequence[str]
) -> dict[str, Any]:
    """The run in ``out`` (a new one if none), refused if its settings or generator differ."""
    state = read_state(out / STATE)
    if state is None:
        return _new_state(run, fingerprint, generator, reasons)
    diff = {
        k: (v, state["settings"].get(k)) for k, v in run.items() if state["settings"].get(k) != v
    }
    if diff:
        shown = ", ".join(f"{k}={new!r} (run has {old!r})" for k, (new, old) in diff.items())
        raise ConfigError(
            f"{out}: holds a sampling run with other settings: {shown}; "
            "use another --out or the same settings to resume"
        )
    if state["generator_fingerprint"] != fingerprint:
        raise ConfigError(
            f"{out}: was sampled from another (or a changed) generator "
            f"({state['generator']}); use another --out"
        )
    return state


def _read_shard(path: Path) -> Iterator[Record]:
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"invalid JSON ({err.msg})", path=str(path), line=line_no) from err
            yield Record(
                id=row["id"],
                label=row["label"],
                premise=row.get("premise"),
                hypothesis=row.get("hypothesis"),
                text=row.get("text"),
                meta=row.get("meta", {}),
            )


def read_samples(out_dir: str | Path) -> list[Record]:
    """All samples of a sampling folder, in order (the shards listed in its state file)."""
    out = Path(out_dir)
    path = out / STATE
    if not path.exists() and (out / MERGED).exists() and any(out.glob("worker-*-of-*")):
        return list(_read_shard(out / MERGED))  # a merged run of --worker I/N
    if not path.exists():
        raise ConfigError(f"{out}: not a sampling folder (no {STATE})")
    state = json.loads(path.read_text(encoding="utf-8"))
    return [r for shard in state["shards"] for r in _read_shard(out / shard["file"])]


def _seen_from_shards(out: Path, state: dict[str, Any]) -> set[int]:
    seen: set[int] = set()
    for shard in state["shards"]:
        path = out / shard["file"]
        if not path.exists():
            raise DataError(
                f"shard listed in {STATE} is missing; remove the folder to start over",
                path=str(path),
            )
        n = 0
        for record in _read_shard(path):
            seen.add(key_hash(sample_key(record)))
            n += 1
        if n != shard["n"]:
            raise DataError(f"shard has {n} samples, {STATE} says {shard['n']}", path=str(path))
    return seen


def _clean_leftovers(out: Path, state: dict[str, Any]) -> None:
    """Remove temp files and shards a killed run wrote after its last state update."""
    from zdebias.data.writers import is_temp_name

    for tmp in out.glob(".*.tmp"):
        if is_temp_name(tmp.name) and not tmp.is_dir():  # zdebias's temp files only
            tmp.unlink(missing_ok=True)
    listed = {s[k] for s in state["shards"] for k in ("file", "dropped", "requests") if k in s}
    for pattern in ("shard-*.jsonl", "dropped-*.jsonl", "requests-*.jsonl"):
        for path in out.glob(pattern):
            if path.name not in listed:
                path.unlink()


@dataclass
class RunFolder:
    """A sampling run opened in its folder: ``state`` as ``state.json`` last recorded it (the
    round loop updates it), ``seen`` the key hashes (:func:`key_hash`) of its samples."""

    out: Path
    state: dict[str, Any]
    seen: set[int]


def open_run(
    out: Path,
    settings: SampleSettings,
    fingerprint: str,
    generator: str,
    *,
    run: dict[str, Any] | None = None,
    reasons: Sequence[str] = MALFORMED_REASONS,
    most: int | None = None,
) -> RunFolder:
    """The run in ``out`` (a new one if none) ready to go on: refused if its settings or
    generator differ, or when it holds more than ``most`` samples; files written after its
    last state update removed.

    ``run``: the settings that decide the samples (default ``settings.run_settings()``);
    ``reasons``: the drop reasons counted from zero in a new run."""
    run = settings.run_settings() if run is None else run
    check_ours(out)  # a user's folder is never read as a run, nor written into
    state = _load_state(out, run, fingerprint, generator, reasons)
    claim(out, "samples")
    if most is not None and state["n_written"] > most:
        raise ConfigError(
            f"{out}: already holds {state['n_written']} samples, more than "
            f"--n {most}; use another --out"
        )
    _clean_leftovers(out, state)
    return RunFolder(out, state, _seen_from_shards(out, state))


def write_shard(
    out: Path,
    index: int,
    records: Sequence[Record],
    dropped: Sequence[dict[str, Any]],
    requests: Sequence[dict[str, Any]],
    next_round: int,
) -> dict[str, Any]:
    """Write shard ``index``: its records, its dropped outputs and, when there are any, its
    request log; returns its ``state.json`` entry (``next_round``: the round after it)."""
    name, dropped_name = f"shard-{index:05d}.jsonl", f"dropped-{index:05d}.jsonl"
    with atomic_open(out / name) as fh:
        for record in records:
            fh.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
    with atomic_open(out / dropped_name) as fh:
        for row in dropped:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    entry: dict[str, Any] = {
        "file": name,
        "dropped": dropped_name,
        "n": len(records),
        "next_round": next_round,
    }
    if requests:
        entry["requests"] = f"requests-{index:05d}.jsonl"
        with atomic_open(out / entry["requests"]) as fh:
            for row in requests:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return entry


def write_merged(out: Path, state: dict[str, Any]) -> None:
    """``samples.jsonl``: the shards the state lists, in order."""
    with atomic_open(out / MERGED) as fh:
        for shard in state["shards"]:
            with open(out / shard["file"], encoding="utf-8") as src:
                for line in src:
                    fh.write(line)


def start_over(out_dir: str | Path) -> None:
    """Remove ``out_dir`` (a folder zdebias wrote, or a file), so that sampling there starts
    afresh instead of resuming the run it holds; a folder zdebias did not write is refused."""
    import shutil

    path = Path(out_dir)
    check_ours(path)
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


__all__ = [
    "MERGED",
    "STATE",
    "SUMMARY",
    "RunFolder",
    "key_hash",
    "open_run",
    "read_samples",
    "read_state",
    "start_over",
    "write_merged",
    "write_shard",
]
