"""The z-filter's output written by worker processes: each writes its rows' kept and rejected
lines as part files (:func:`write_in_workers`), joined in order into ``kept.jsonl`` and
``rejected.jsonl`` (:func:`join_parts`; in the kernel where it can).
"""

from __future__ import annotations

import os
import shutil
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from zdebias.stats.execution.shard import ShardRows
from zdebias.stats.execution.workers import Workers


def write_in_workers(workers: Workers, work: Path, arrays: Any, sizes: list[int], fm: Any) -> int:
    """Start each worker writing its rows' kept and rejected lines (``sizes``: each worker's
    row count, in order) as part files in ``work``; how many parts."""
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    args = []
    rows, cols = arrays.rejected_by_rows, arrays.rejected_by_features
    for i, (a, b) in enumerate(pairwise(offsets)):
        acc = arrays.accepted[(arrays.accepted >= a) & (arrays.accepted < b)] - a
        rej = arrays.rejected[(arrays.rejected >= a) & (arrays.rejected < b)] - a
        sel = (rows >= a) & (rows < b)
        shard_cols = cols[sel]
        used = np.unique(shard_cols).tolist()
        names = {j: fm.names[j] for j in used}
        keys = {j: fm.keys[j].to_dict() for j in used}
        args.append((str(work), i, ShardRows(acc, rej, rows[sel] - a, shard_cols, names, keys)))
    workers.send("write", args)
    return len(args)


def join_parts(work: Path, n_parts: int) -> None:
    """Join the ``n_parts`` part files of each output in ``work`` into ``kept.jsonl`` and
    ``rejected.jsonl``."""
    for name in ("kept", "rejected"):
        _join([work / f"{name}.part-{i}" for i in range(n_parts)], work / f"{name}.jsonl")


def _join(parts: list[Path], path: Path) -> None:
    """Append the other parts to the first (in the kernel where it can) and give it ``path``,
    with the permissions :func:`~zdebias.data.writers.atomic_open` gives a file."""
    from zdebias.data.writers import current_umask

    # unbuffered, so that a copy through user space goes on where the kernel's stopped; not
    # "ab": copy_file_range refuses a file opened to append
    with parts[0].open("r+b", buffering=0) as out:
        out.seek(0, os.SEEK_END)
        for part in parts[1:]:
            with part.open("rb", buffering=0) as src:
                size = os.fstat(src.fileno()).st_size
                try:
                    while size > 0:
                        copied = os.copy_file_range(src.fileno(), out.fileno(), size)
                        if copied == 0:
                            break
                        size -= copied
                except OSError:  # no copy_file_range here: through user space
                    shutil.copyfileobj(src, out, 1 << 24)
                    size = 0
                if size:  # pragma: no cover - the file shrank while copied
                    raise RuntimeError(f"{part} could not be copied whole")
            part.unlink()
        os.fsync(out.fileno())
    os.chmod(parts[0], 0o666 & ~current_umask())
    os.replace(parts[0], path)


__all__ = ["join_parts", "write_in_workers"]
