"""How a z-filter of a file runs (:func:`plan_filter`, a :class:`FilterPlan`), and what each
way of running hands back (:class:`Filtered`).

Three ways, all writing the same bytes (tests compare them):

- ``sharded``: one large plain JSONL file, cut into byte ranges at line starts, one worker
  process each (:mod:`zdebias.stats.execution.sharded`);
- ``writer``: a smaller one, read and filtered in this process while a second one reads it
  too and writes the output (:mod:`zdebias.stats.execution.writer`);
- ``one``: everything in this process (a seed dataset, ``--limit``, ``--where``, a trained
  hypothesis-only model, plugin settings, a gzipped or non-JSONL input, ``num_proc`` 1, one
  core, or a small file).
"""

from __future__ import annotations

import multiprocessing
import sys
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from zdebias.data.mapping import ReadReport
from zdebias.data.options import ReadOptions
from zdebias.errors import ConfigError, DataError
from zdebias.stats.execution.kept import matrix_describes_kept
from zdebias.stats.settings import ZFilterSettings

if TYPE_CHECKING:
    from zdebias.stats.summaries import FilterSummary

#: Below this size one process is as fast (forking and merging cost more than they save).
SHARD_MIN_BYTES = 64 << 20
#: From this size (about 12k SNLI rows) a file below :data:`SHARD_MIN_BYTES` is z-filtered
#: with a second process to write the output; below, forking costs about what it saves.
WRITER_MIN_BYTES = 2 << 20


@dataclass(frozen=True)
class FilterPlan:
    """How a z-filter of a file runs.

    ``way``: ``sharded`` (a worker process per byte range of ``ranges``), ``writer`` (a
    second process reads the file's ``size`` bytes too and writes the output) or ``one``.
    ``num_proc``: the processes that encode the output (the workers; the writer; in one
    process, those :func:`~zdebias.data.writers.write_jsonl` may use). ``kept_from_matrix``:
    the summary's ``stats_of_kept`` taken from the input's matrix
    (:func:`~zdebias.stats.execution.kept.kept_summary`), else from extracting the kept records'
    features again.
    """

    way: Literal["sharded", "writer", "one"]
    ranges: tuple[tuple[int, int], ...] = ()
    size: int | None = None
    num_proc: int = 1
    kept_from_matrix: bool = True


class Filtered(NamedTuple):
    """What a way of running hands back once it wrote ``kept.jsonl`` and ``rejected.jsonl``:
    the filter summary (:func:`~zdebias.stats.zfilter.filter_summary`), its
    ``stats_of_kept``, and the read reports of the input and of the seed (if any)."""

    summary: FilterSummary
    stats_of_kept: dict[str, Any] | None
    report: ReadReport
    seed_report: ReadReport | None = None


def plan_filter(
    path: str, read: ReadOptions, settings: ZFilterSettings, *, seed_data: str | None = None
) -> FilterPlan:
    """The way ``path`` (read with ``read``; ``seed_data``: the seed file, if any) is
    z-filtered with ``settings``: :func:`plan_shards`, else :func:`writer_size`, else one
    process."""
    from zdebias.features.parallel import resolve_num_proc

    ranges = plan_shards(path, read, settings, seed_data=seed_data)
    if ranges is not None:
        return FilterPlan("sharded", ranges=tuple(ranges), num_proc=len(ranges))
    size = writer_size(path, read, settings, seed_data=seed_data)
    if size is not None:
        return FilterPlan("writer", size=size)
    # at most one process per record; the records are not counted yet (none is below 50k)
    num_proc = resolve_num_proc(settings.num_proc, sys.maxsize)
    kept_from_matrix = not seed_data and matrix_describes_kept(settings)
    return FilterPlan("one", num_proc=num_proc, kept_from_matrix=kept_from_matrix)


def plan_shards(
    path: str, read: ReadOptions, settings: ZFilterSettings, *, seed_data: str | None = None
) -> list[tuple[int, int]] | None:
    """Byte ranges, one per process, when ``path`` can be z-filtered sharded; else None.

    ``settings.num_proc`` unset: every core for a file of at least :data:`SHARD_MIN_BYTES`;
    1: never; N: N processes whatever the size.
    """
    from zdebias.features.parallel import available_cores

    size = _plain_jsonl_size(path, read, settings, seed_data)
    if size is None:
        return None
    file = Path(path)
    n_proc = settings.num_proc
    if n_proc is None:
        n_proc = available_cores() if size >= SHARD_MIN_BYTES else 1
    elif n_proc == 0:
        n_proc = available_cores()
    if n_proc < 2 or size < n_proc:
        return None
    return _ranges(file, size, n_proc)


def writer_size(
    path: str, read: ReadOptions, settings: ZFilterSettings, *, seed_data: str | None = None
) -> int | None:
    """The size of ``path`` when the writer way applies to it, else None: a file
    :func:`plan_shards` could cut (a plain local JSONL file, no seed, ``--limit``, ``--where``
    or trained hypothesis-only model) of at least :data:`WRITER_MIN_BYTES`, on more than one
    core, ``num_proc`` not 1."""
    from zdebias.features.parallel import available_cores

    if settings.num_proc == 1 or available_cores() < 2:
        return None
    size = _plain_jsonl_size(path, read, settings, seed_data)
    return size if size is not None and size >= WRITER_MIN_BYTES else None


def _plain_jsonl_size(
    path: str, read: ReadOptions, settings: ZFilterSettings, seed_data: str | None
) -> int | None:
    """The size of ``path`` if it is a plain (not gzipped) local JSONL file that a process
    can read part of and z-filter without a seed, ``--limit`` or ``--where``, with
    :func:`~zdebias.stats.execution.kept.matrix_describes_kept`; else None."""
    from zdebias.data.files import detect_format

    if seed_data or read.limit is not None or read.where or not matrix_describes_kept(settings):
        return None
    if "fork" not in multiprocessing.get_all_start_methods() or "::" in path:
        return None
    file = Path(path)
    if path.startswith("hf:") or not file.is_file():
        return None
    try:
        if (read.format or detect_format(path)) != "jsonl":
            return None
        with file.open("rb") as fh:
            if fh.read(2) == b"\x1f\x8b":  # gzipped: no seeking into it
                return None
        return file.stat().st_size
    except (OSError, DataError, ConfigError):
        return None


def _ranges(file: Path, size: int, n: int) -> list[tuple[int, int]]:
    """``n`` byte ranges covering the file, each starting at a line start (some may be
    empty when lines are long)."""
    cuts = [0]
    with file.open("rb") as fh:
        for i in range(1, n):
            at = max(size * i // n, cuts[-1])
            fh.seek(at)
            if at > 0:
                fh.seek(at - 1)
                fh.readline()  # to the start of the next line
            cuts.append(min(fh.tell(), size))
    cuts.append(size)
    return list(pairwise(cuts))


__all__ = [
    "SHARD_MIN_BYTES",
    "WRITER_MIN_BYTES",
    "FilterPlan",
    "Filtered",
    "plan_filter",
    "plan_shards",
    "writer_size",
]
