"""The sharded way of z-filtering one large JSONL file (:func:`filter_sharded`): several
processes, each reading part of it.

The file is cut into byte ranges at line starts, one per process
(:mod:`zdebias.stats.execution.plan`). Each worker (:class:`~zdebias.stats.execution.shard.Shard`),
forked before anything is read, reads its own range (the records never cross a pipe: sending them
costs as much as parsing them), extracts the feature groups that depend on one record at a time,
chunk by chunk, and streams compact blocks back with each record's label, id and hypothesis. The
parent merges the blocks exactly as :mod:`zdebias.features.parallel` does
(:mod:`zdebias.stats.execution.merge`), fits the hypothesis-only feature, runs Algorithm 1, and
tells each worker which of its rows were kept and which features rejected the others. Meanwhile the
workers, with nothing else to do, have encoded their records as JSON lines (at a lower priority than
the parent); they write their share of ``kept.jsonl`` / ``rejected.jsonl`` while the parent computes
the statistics of the kept rows from the matrix (the summary's ``stats_of_kept``), and the parent
joins the parts (:mod:`zdebias.stats.execution.part_files`).

The output is byte for byte what one process writes (tests compare them). It applies to a
plain (not gzipped) local JSONL file, without a seed dataset, ``--limit`` or a trained
hypothesis-only model, with the built-in feature groups;
:func:`~zdebias.stats.execution.plan.plan_shards` says when.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from zdebias.data.process import mmap_large_allocations
from zdebias.stats.execution.kept import kept_summary
from zdebias.stats.execution.merge import combine_read, merged_report, merged_rows, merged_warnings
from zdebias.stats.execution.part_files import join_parts, write_in_workers
from zdebias.stats.execution.plan import Filtered
from zdebias.stats.execution.shard import Shard
from zdebias.stats.execution.source import FileInput
from zdebias.stats.execution.workers import Workers
from zdebias.stats.settings import ZFilterSettings


@contextlib.contextmanager
def filter_sharded(
    source: FileInput,
    ranges: Sequence[tuple[int, int]],
    settings: ZFilterSettings,
    *,
    progress: bool,
) -> Iterator[Callable[[Path], Filtered]]:
    """z-filter ``source`` with one process per byte range of ``ranges``; entered once the
    filter has run, it gives the function that writes ``kept.jsonl`` and ``rejected.jsonl``
    into a folder (the workers write their parts meanwhile)."""
    from zdebias.data.options import no_records_error
    from zdebias.stats.zfilter import filter_options, filter_summary, z_filter_matrix

    feature_names = settings.features
    kwargs = {k: v for k, v in settings.feature_kwargs().items() if k != "num_proc"}
    import scipy.sparse  # noqa: F401 - imported once here, not once per worker after the fork

    import zdebias.features.catalogue  # noqa: F401 - the feature groups' modules, likewise

    mmap_large_allocations()  # the chunks' blocks given back as merged, in parent and workers
    workers = Workers([Shard(source, start, end, kwargs) for start, end in ranges])
    try:
        status = _status(progress, f"reading and extracting features ({len(ranges)} processes)")
        try:
            results = [
                combine_read(final, parts)
                for final, parts in workers.call(
                    "read_and_extract", [(feature_names,)] * len(ranges)
                )
            ]
        finally:
            if status is not None:
                status.stop()
        # while this process merges and filters, the workers encode the records they keep
        workers.send("encode", [()] * len(ranges))
        report = merged_report(source.path, results)
        if not report.n_records:
            raise no_records_error(report, source.what or "input")
        source.teller.skipped(report)
        labels = report.labels
        assert labels is not None
        pair = next(r["pair"] for r in results if len(r["y"]))
        min_records = source.min_records
        for line in merged_warnings(results, labels, source.shown, min_records=min_records):
            source.teller.warn(line)
        rows = merged_rows(results, feature_names, kwargs, labels, pair)
        sizes = [len(r["y"]) for r in results]
        del results
        arrays = z_filter_matrix(
            rows.fm.matrix,
            rows.y,
            len(labels),
            rows=np.arange(len(rows.y)),
            seed_rows=np.arange(0),
            progress=progress,
            **filter_options(settings, rows.fm.names),
        )

        def write(work: Path) -> Filtered:
            workers.gather()  # the encoding
            n_parts = write_in_workers(workers, work, arrays, sizes, rows.fm)
            # meanwhile: the summary and `zdebias stats` of the kept records
            summary = filter_summary(rows.fm, rows.y, labels, arrays, settings)
            of_kept = kept_summary(rows, arrays.accepted, settings)
            workers.gather()
            join_parts(work, n_parts)
            return Filtered(summary, of_kept, report)

        yield write
    finally:
        workers.close()


def _status(show: bool, text: str) -> Any:
    if not show:
        return None
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:  # nothing to animate; a bare newline would be all it leaves
        return None
    status = console.status(text)
    status.start()
    return status


__all__ = ["filter_sharded"]
