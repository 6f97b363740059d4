"""The ``z`` filter method: z-filtering, GD-NLI Algorithm 1 (:mod:`zdebias.stats.zfilter`),
on a file the way :func:`~zdebias.stats.execution.plan.plan_filter` chooses (sharded, through the
writer, or in this process), conditionally on a seed dataset when given."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zdebias.stats.methods import FileJob, FilterInputs, FilterMethod, FilterOutcome
from zdebias.stats.settings import ZFilterSettings

if TYPE_CHECKING:
    from zdebias.data.schema import Record
    from zdebias.stats.execution.plan import Filtered, FilterPlan
    from zdebias.stats.execution.source import FileInput, HypoOnly
    from zdebias.stats.zfilter import ZFilterResult


class ZFilter(FilterMethod):
    """z-filtering: rows with the biased features of their label are rejected, batch by
    batch; the API's columns ``keep``, ``rejected_by`` (the features, strongest first) and
    ``rejected_by_z`` (their z for the row's label)."""

    name = "z"
    settings = ZFilterSettings
    columns = ("keep", "rejected_by", "rejected_by_z")
    text = "zdebias.report.text:z_filter_text"
    uses_features = True
    takes_seed = True

    def run(self, records: list[Record], settings: Any, inputs: FilterInputs) -> FilterOutcome:
        from zdebias.stats.zfilter import z_filter

        return self.outcome(
            z_filter(
                records,
                settings,
                seed_records=inputs.seed_records,
                labels=inputs.labels,
                progress=inputs.progress,
            ),
            len(records),
            len(inputs.seed_records),
        )

    def outcome(self, result: ZFilterResult, n: int, n_seed: int) -> FilterOutcome:
        """The outcome of a z-filter ``result`` on ``n`` records after ``n_seed`` seed ones."""
        keep: list[bool] = [False] * n
        rejected_by: list[list[str] | None] = [None] * n
        rejected_z: list[list[float] | None] = [None] * n
        arrays = result.arrays
        if arrays is not None:
            for i in arrays.accepted.tolist():
                keep[i - n_seed], rejected_by[i - n_seed], rejected_z[i - n_seed] = True, [], []
            names = result.features.names if result.features is not None else []
            zs = arrays.rejected_by_z
            rows, cols = arrays.rejected_by_rows.tolist(), arrays.rejected_by_features.tolist()
            for k, (i, f) in enumerate(zip(rows, cols, strict=True)):
                by, by_z = rejected_by[i - n_seed], rejected_z[i - n_seed]
                if by is None or by_z is None:
                    by, by_z = rejected_by[i - n_seed], rejected_z[i - n_seed] = [], []
                by.append(names[f])
                by_z.append(round(float(zs[k]), 4) if zs is not None else float("nan"))
        columns: dict[str, list[Any]] = {
            "keep": keep,
            "rejected_by": rejected_by,
            "rejected_by_z": rejected_z,
        }
        return FilterOutcome(result.kept, result.rejected, result.summary, columns, result)

    def open(self, job: FileJob) -> contextlib.AbstractContextManager[Callable[[Path], Filtered]]:
        """Run as :func:`~zdebias.stats.execution.plan.plan_filter` chooses."""
        from zdebias.stats.execution import plan as plans  # by module: tests watch plan_filter

        source, settings, seed, progress = job.source, job.settings, job.seed, job.progress
        seed_data = seed.path if seed is not None else None
        plan = plans.plan_filter(source.path, source.read, settings, seed_data=seed_data)
        if plan.way == "sharded":
            from zdebias.stats.execution.sharded import filter_sharded

            return filter_sharded(source, plan.ranges, settings, progress=progress)
        if plan.way == "writer":
            from zdebias.stats.execution.writer import filter_records

            assert plan.size is not None
            return filter_records(source, plan.size, settings, progress=progress)
        return _filter_one(source, seed, plan, settings, job.hypo_only, progress)


@contextlib.contextmanager
def _filter_one(
    source: FileInput,
    seed: FileInput | None,
    plan: FilterPlan,
    settings: ZFilterSettings,
    hypo_only: HypoOnly | None,
    progress: bool,
) -> Iterator[Callable[[Path], Filtered]]:
    """The one-process way: read, filter, and the kept rows' statistics, in this process."""
    from zdebias.stats.execution.kept import kept_summary_of
    from zdebias.stats.execution.plan import Filtered
    from zdebias.stats.execution.source import read_source
    from zdebias.stats.measure import stats_of_kept
    from zdebias.stats.zfilter import z_filter

    records, report = read_source(source, settings, hypo_only=hypo_only, progress=progress)
    seed_records: list[Any] = []
    seed_report = None
    if seed is not None:
        if seed.task is None:  # the input's label set, unless told otherwise
            seed = dataclasses.replace(seed, task=report.task)
        seed_records, seed_report = read_source(
            seed, settings, hypo_only=hypo_only, progress=progress
        )
    labels = report.labels
    result = z_filter(
        records, settings, seed_records=seed_records, labels=labels, progress=progress
    )
    if plan.kept_from_matrix and result.arrays is not None:  # from the matrix it has
        of_kept = kept_summary_of(result, records, settings)
    else:  # features extracted again on the kept records
        of_kept = stats_of_kept(result.kept, settings, labels=labels)

    def write(folder: Path) -> Filtered:
        from zdebias.data.writers import write_files

        files = {"kept.jsonl": result.kept, "rejected.jsonl": result.rejected}
        write_files(folder, files, num_proc=plan.num_proc)
        return Filtered(result.summary, of_kept, report, seed_report)

    yield write


Z_FILTER = ZFilter()
