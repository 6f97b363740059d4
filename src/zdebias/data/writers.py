"""Atomic writers: a temp file beside the target, renamed into place when complete."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from zdebias.data.schema import Record


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temp file beside ``path``; rename it to ``path`` only if the block succeeds.

    No reader ever sees half a file, and a failed write leaves no file behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(obj: Any, path: str | Path) -> Path:
    """Write one JSON document atomically (indented, UTF-8)."""
    with atomic_open(path) as fh:
        json.dump(obj, fh, indent=2, ensure_ascii=False, default=_json_default)
        fh.write("\n")
    return Path(path)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_jsonl(records: Iterable[Record], path: str | Path) -> int:
    """Write records as JSONL atomically; returns how many were written."""
    n = 0
    with atomic_open(path) as fh:
        for record in records:
            fh.write(json.dumps(record.to_dict(), ensure_ascii=False, default=_json_default))
            fh.write("\n")
            n += 1
    return n


def write_parquet(records: Iterable[Record], path: str | Path) -> int:
    """Write records as parquet atomically (``meta`` as a JSON string column)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [r.to_dict() for r in records]
    for row in rows:
        row["meta"] = json.dumps(row["meta"], ensure_ascii=False, default=_json_default)
    columns = list(rows[0]) if rows else ["id", "premise", "hypothesis", "label", "meta"]
    table = pa.table({c: [row.get(c) for row in rows] for c in columns})
    with atomic_open(path, "wb") as fh:
        pq.write_table(table, fh)
    return len(rows)


def write_records(records: Iterable[Record], path: str | Path) -> int:
    """Write records in the format the file name asks for (``.parquet`` or JSONL)."""
    if str(path).endswith(".parquet"):
        return write_parquet(records, path)
    return write_jsonl(records, path)


def write_files(folder: str | Path, files: Mapping[str, Any]) -> dict[str, Path]:
    """Write records lists (``.jsonl`` / ``.parquet`` names) and JSON documents (any other name)
    into ``folder`` by file name, each atomically; returns their paths."""
    folder = Path(folder)
    for name, content in files.items():
        if name.endswith((".jsonl", ".parquet")):
            write_records(content, folder / name)
        else:
            write_json(content, folder / name)
    return {name: folder / name for name in files}


#: written last into every output folder zdebias publishes; ``--overwrite`` trusts only these
OUTPUT_MARKER = ".zdebias-output.json"


def _check_replaceable(out: Path, overwrite: bool) -> None:
    from zdebias.errors import ConfigError

    if out.is_symlink():
        raise ConfigError(f"{out}: is a symbolic link; give the real folder")
    if not out.exists():
        return
    if not out.is_dir():
        raise ConfigError(f"{out} exists and is not a folder")
    if not any(out.iterdir()):
        return
    if not overwrite:
        raise ConfigError(f"{out} exists and is not empty; pass --overwrite to replace it")
    here = Path.cwd().resolve()
    if out.resolve() == here or out.resolve() in here.parents:
        raise ConfigError(f"{out}: refusing to replace the current folder or one above it")
    if not (out / OUTPUT_MARKER).is_file():
        raise ConfigError(
            f"{out}: not a folder zdebias wrote (no {OUTPUT_MARKER}); remove it yourself or "
            "choose another --out"
        )


def publish_files(
    out: str | Path, files: dict[str, Any], *, overwrite: bool = False
) -> dict[str, Path]:
    """Publish an output folder as a whole: records lists / JSON documents by file name.

    Everything is written into a temporary sibling folder, which is renamed into place once
    complete, so no reader ever sees new files next to an older run's. An existing non-empty
    ``out`` is refused unless ``overwrite`` (and then only a folder zdebias wrote).
    """
    import shutil

    out = Path(out)
    _check_replaceable(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        write_files(work, files)
        write_json({"files": sorted(files)}, work / OUTPUT_MARKER)
        os.chmod(work, 0o777 & ~_umask())
        old = None
        if out.exists():
            old = out.with_name(f".{out.name}.{os.getpid()}.old")
            os.replace(out, old)
        try:
            os.replace(work, out)
        except BaseException:
            if old is not None:  # put the previous output back: never lose both
                os.replace(old, out)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return {name: out / name for name in files}
