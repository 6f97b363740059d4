"""Atomic writers: a temp file (or folder) beside the target, renamed into place when complete.

Output and model folders are built in a hidden sibling (:func:`work_dir_for`) and published
with :func:`publish_dir`: an existing non-empty folder is refused unless ``overwrite``; a
symlink, the current directory or one of its parents is always refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from zdebias.data.schema import Record
from zdebias.errors import ConfigError


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


def _absolute(out: str | Path) -> Path:
    """``out`` made absolute and normalised (``..`` folded) without following symlinks."""
    return Path(os.path.abspath(out))


def check_out_dir(out: str | Path, *, overwrite: bool) -> None:
    """Fail with :class:`ConfigError` when :func:`publish_dir` would refuse ``out``."""
    path = _absolute(out)
    if path.is_symlink():
        raise ConfigError(f"{out} is a symbolic link; choose a real folder for --out")
    cwd = Path.cwd().resolve()
    if path.exists() and (path.resolve() == cwd or path.resolve() in cwd.parents):
        raise ConfigError(f"{out} is the current directory or a parent of it; choose another --out")
    if path.exists() and (not path.is_dir() or any(path.iterdir())) and not overwrite:
        raise ConfigError(f"{out} exists and is not empty; pass --overwrite to replace it")


def work_dir_for(out: str | Path) -> Path:
    """A new empty hidden folder next to ``out`` (same filesystem, so the final rename is atomic).

    Creates ``out``'s parent if needed. The caller removes the folder if the work fails.
    """
    path = _absolute(out)
    if not path.name:
        raise ConfigError(f"{out} is not a folder name; choose another --out")
    path.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))


def publish_dir(tmp: str | Path, out: str | Path, *, overwrite: bool) -> Path:
    """Rename the finished folder ``tmp`` to ``out``; returns ``out``.

    ``tmp`` must be on ``out``'s filesystem (see :func:`work_dir_for`). An existing ``out``
    (refused unless ``overwrite``) is first moved aside and removed only once ``tmp`` is in
    place; if that rename fails the old ``out`` is put back, so ``out`` is always either the
    old or the new folder, never a mix.
    """
    check_out_dir(out, overwrite=overwrite)
    path, tmp = _absolute(out), Path(tmp)
    if not tmp.is_dir():
        raise ValueError(f"{tmp} is not a folder")
    if not path.exists():
        os.replace(tmp, path)
        return Path(out)
    old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent)) / "old"
    try:
        os.replace(path, old)
        try:
            os.replace(tmp, path)
        except BaseException:
            os.replace(old, path)
            raise
    finally:
        with contextlib.suppress(OSError):
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old.parent)
            else:
                old.unlink(missing_ok=True)
                old.parent.rmdir()
    return Path(out)


def check_output_folder(out: str | Path, *, overwrite: bool) -> None:
    """:func:`check_out_dir`, and with ``overwrite`` only a folder zdebias wrote (marker)."""
    out = Path(out)
    check_out_dir(out, overwrite=overwrite)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / OUTPUT_MARKER).is_file():
        raise ConfigError(
            f"{out}: not a folder zdebias wrote (no {OUTPUT_MARKER}); remove it yourself or "
            "choose another --out"
        )


def publish_files(
    out: str | Path, files: dict[str, Any], *, overwrite: bool = False
) -> dict[str, Path]:
    """Publish an output folder as a whole: records lists / JSON documents by file name.

    Everything is written into a temporary sibling folder, which :func:`publish_dir` renames
    into place once complete, so no reader ever sees new files next to an older run's. An
    existing non-empty ``out`` is refused unless ``overwrite`` (and then only a folder zdebias
    wrote).
    """
    out = Path(out)
    check_output_folder(out, overwrite=overwrite)
    work = work_dir_for(out)
    try:
        write_files(work, files)
        write_json({"files": sorted(files)}, work / OUTPUT_MARKER)
        os.chmod(work, 0o777 & ~_umask())
        publish_dir(work, out, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return {name: out / name for name in files}
