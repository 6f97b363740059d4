"""Content digests, stage hashes and done-markers: how a run knows a stage is done and unchanged.

A stage's hash (:func:`stage_hash`) covers its kind and version, its settings, the recipe's
task, its seed, and the content digests of everything it reads (:meth:`Digests.of_input`:
declared data files; ``hf:`` datasets by the loaded dataset's fingerprint, which follows the
resolved revision; external model folders by their files' names, sizes and mtimes; earlier
stages' outputs as recorded in their markers). A finished stage's done-marker holds that hash
and each output's digest and file stats; the stage counts as done while the marker holds the
same hash and its outputs are untouched (:func:`is_done`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from zdebias.data.writers import write_json
from zdebias.errors import ConfigError
from zdebias.executor import ExecutorSettings
from zdebias.models.trainer_settings import CHECKPOINT_POLICY
from zdebias.pipeline.config import Recipe, StageConfig, field_refs
from zdebias.pipeline.registry import DataInput, ExternalInput, OutputInput
from zdebias.pipeline.run_folder import ATTEMPT, MARKER

#: settings that change how a stage runs but not its output (kept out of the stage hash)
EXECUTION_SETTINGS = (*CHECKPOINT_POLICY, "workers", "threads", *ExecutorSettings.model_fields)


class InputPending(Exception):
    """An input comes from a stage that has not produced it yet (planning only)."""

    def __init__(self, stage: str) -> None:
        super().__init__(stage)
        self.stage = stage


class Digests:
    """Content digests of files and folders, cached by (path, size, mtime) in the run folder."""

    def __init__(self, cache_file: Path | None) -> None:
        self.cache_file = cache_file
        self.cache: dict[str, str] = {}
        if cache_file is not None and cache_file.exists():
            with contextlib.suppress(ValueError, OSError):
                self.cache = json.loads(cache_file.read_text())
        self._dirty = False
        self._hf_fingerprints: dict[str, dict[str, Any]] = {}

    def file(self, path: Path) -> str:
        st = path.stat()
        key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
        if key not in self.cache:
            h = hashlib.sha256()
            with path.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            self.cache[key] = h.hexdigest()
            self._dirty = True
        return self.cache[key]

    def path(self, path: Path) -> str:
        """Digest of a file, or of a folder's files (names and contents, markers excluded)."""
        if path.is_file():
            return self.file(path)
        h = hashlib.sha256()
        for rel, sub in _tree(path):
            h.update(rel.encode())
            h.update(self.file(sub).encode())
        return h.hexdigest()

    def of_input(self, value: Any, outputs: Mapping[str, Mapping[str, Any]]) -> Any:
        """The digest of a stage's resolved input (or of a list / dict of them); ``outputs``
        holds the finished stages' outputs (stage → output → marker entry)."""
        if isinstance(value, DataInput):
            spec = value.spec
            options = spec.model_dump(mode="json", exclude={"path"})
            if spec.path.startswith("hf:"):
                # the loaded dataset's fingerprint: a changed revision or hub dataset reruns
                if spec.path not in self._hf_fingerprints:
                    from zdebias.data.hf import fingerprint

                    self._hf_fingerprints[spec.path] = fingerprint(spec.path)
                return {**self._hf_fingerprints[spec.path], **options}
            path = Path(spec.path.split("::")[0])
            if not path.exists():
                raise ConfigError(f"data {value.name!r}: {spec.path}: no such file or folder")
            return {"digest": self.path(path), "split": spec.path, **options}
        if isinstance(value, ExternalInput):
            path = Path(value.value)
            if path.exists():
                return {"local": _fingerprint(path)}
            return {"name": value.value}
        if isinstance(value, OutputInput):
            info = outputs.get(value.stage, {}).get(value.output)
            if info is None:
                raise InputPending(value.stage)
            return {"stage": info["stage_hash"], "output": info["digest"]}
        if isinstance(value, dict):
            return {k: self.of_input(v, outputs) for k, v in value.items()}
        if isinstance(value, list):
            return [self.of_input(v, outputs) for v in value]
        return None

    def save(self) -> None:
        if self._dirty and self.cache_file is not None:
            write_json(self.cache, self.cache_file)
            self._dirty = False


def _tree(path: Path) -> Iterator[tuple[str, Path]]:
    for sub in sorted(path.rglob("*")):
        if sub.is_file() and sub.name not in (MARKER, ATTEMPT):
            yield sub.relative_to(path).as_posix(), sub


def _fingerprint(path: Path) -> str:
    """A cheap identity of an external model folder: file names, sizes and mtimes."""
    h = hashlib.sha256()
    items = _tree(path) if path.is_dir() else [(path.name, path)]
    for rel, sub in items:
        st = sub.stat()
        h.update(f"{rel}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def file_stats(path: Path) -> dict[str, list[int]]:
    """Size and mtime of an output's files (relative path → [size, mtime_ns]) for its marker."""
    if path.is_file():
        st = path.stat()
        return {"": [st.st_size, st.st_mtime_ns]}
    out = {}
    for rel, sub in _tree(path):
        st = sub.stat()
        out[rel] = [st.st_size, st.st_mtime_ns]
    return out


def _intact(folder: Path, marker: dict[str, Any]) -> bool:
    """Every output file the marker lists is still there, same size and mtime."""
    for out in marker.get("outputs", {}).values():
        base = folder / out["path"]
        for rel, (size, mtime) in out.get("files", {}).items():
            p = base / rel if rel else base
            try:
                st = p.stat()
            except OSError:
                return False
            if st.st_size != size or st.st_mtime_ns != mtime:
                return False
    return True


def is_done(folder: Path, marker: dict[str, Any] | None, stage_hash: str) -> bool:
    """The stage folder's done-marker holds this hash and its outputs are untouched."""
    return marker is not None and marker.get("hash") == stage_hash and _intact(folder, marker)


def stage_hash(
    recipe: Recipe,
    name: str,
    cfg: StageConfig,
    input_digests: dict[str, Any],
    *,
    leave_out: frozenset[str] = frozenset(),
) -> str:
    """The hash a stage's marker must hold for the stage to count as done.

    Settings that decide how a stage runs, not what it writes (:data:`EXECUTION_SETTINGS`:
    how often a training stage saves checkpoints, how many processes or CPU threads sample,
    whether it runs on Ray) and ``cfg.hash_excluded()`` (a method's settings in a stage that
    runs another, e.g. AFLite's in a z-filtering stage) are left out, as is a setting added
    later while unset (its field's ``exclude_if``): changing them neither redoes a finished
    stage nor throws away an interrupted one's work. ``cfg.hashed`` may write a setting as
    what it resolves to (a classifier's schedule). ``leave_out``: more settings to leave out
    (the hash without a training stage's seeds, :meth:`StageConfig.extension_settings`).
    """
    refs = field_refs(type(cfg))
    unused = cfg.hash_excluded() | leave_out
    exclude = {"seed", *refs, *EXECUTION_SETTINGS, *unused}
    settings = cfg.hashed(cfg.model_dump(mode="json", exclude=exclude))
    # an unset reference among them (e.g. a z-filter stage's `dynamics`) is left out too
    inputs = {k: v for k, v in input_digests.items() if not (k in unused and v is None)}
    payload = {
        "kind": cfg.stage,
        "version": type(cfg).version,
        "settings": settings,
        "inputs": inputs,
        "task": recipe.task,
        "seed": recipe.stage_seed(name),
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()
