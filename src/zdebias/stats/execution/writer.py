"""The writer way of z-filtering a JSONL file (:func:`filter_records`): this process reads and
filters it while a second one, forked before reading, reads it too, encodes it and writes the
output: the overlap of the sharded way (:mod:`zdebias.stats.execution.sharded`) without
merging blocks from several processes. :func:`~zdebias.stats.execution.plan.writer_size` says
when it applies.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from zdebias.stats.execution.kept import input_rows, kept_summary
from zdebias.stats.execution.part_files import join_parts, write_in_workers
from zdebias.stats.execution.plan import Filtered
from zdebias.stats.execution.shard import Shard
from zdebias.stats.execution.source import FileInput, read_source
from zdebias.stats.execution.workers import Workers
from zdebias.stats.settings import ZFilterSettings


@contextlib.contextmanager
def filter_records(
    source: FileInput, size: int, settings: ZFilterSettings, *, progress: bool
) -> Iterator[Callable[[Path], Filtered]]:
    """z-filter ``source`` (``size`` bytes) in this process with a second one to write the
    output; entered once the filter has run, it gives the function that writes
    ``kept.jsonl`` and ``rejected.jsonl`` into a folder.

    The second process reads the file while this one does, then waits; it writes the output
    while this one computes the statistics of the kept rows. The same bytes as
    :func:`~zdebias.stats.zfilter.z_filter` and :func:`~zdebias.data.writers.write_files`
    write (and as the sharded way).
    """
    from zdebias.data.options import no_records_error
    from zdebias.stats.zfilter import filter_summary, z_filter_arrays

    workers = Workers([Shard(source, 0, size, {})])
    done = False
    try:
        workers.send("keep_records", [()])
        records, report = read_source(source, settings, progress=progress)
        if not records:  # (an input of a recipe stage, read without the error)
            raise no_records_error(report, source.what or "input")
        fm, y, arrays, labels = z_filter_arrays(
            records, settings, labels=report.labels, progress=progress
        )

        def write(work: Path) -> Filtered:
            workers.gather()  # its reading, long done
            n_parts = write_in_workers(workers, work, arrays, [len(records)], fm)
            # meanwhile: the summary and `zdebias stats` of the kept records
            summary = filter_summary(fm, y, labels, arrays, settings)
            of_kept = kept_summary(input_rows(fm, records, labels), arrays.accepted, settings)
            workers.gather()
            join_parts(work, n_parts)
            return Filtered(summary, of_kept, report)

        yield write
        done = True
    finally:
        workers.close(kill=not done)


__all__ = ["filter_records"]
