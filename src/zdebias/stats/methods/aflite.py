"""The ``aflite`` filter method: AFLite on frozen embeddings (:mod:`zdebias.stats.aflite`);
the API's columns ``keep``, ``rejected_by`` (``["aflite"]`` or ``[]``), ``aflite_round``
(the round that removed the row) and ``aflite_score`` (its predictability)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.errors import ConfigError
from zdebias.stats.methods import FileJob, FilterInputs, FilterMethod, FilterOutcome
from zdebias.stats.settings import AfliteSettings

if TYPE_CHECKING:
    from zdebias.data.schema import Record
    from zdebias.stats.execution.plan import Filtered


class Aflite(FilterMethod):
    """AFLite: the rows n linear models on embeddings predict, removed round by round."""

    name = "aflite"
    settings = AfliteSettings
    columns = ("keep", "rejected_by", "aflite_round", "aflite_score")
    text = "zdebias.report.text:aflite_text"
    size_setting = "aflite_target"

    def sized(self, size: int, total: int) -> dict[str, Any]:
        """AFLite's target: ``size`` rows."""
        return {"aflite_target": size}

    def run(self, records: list[Record], settings: Any, inputs: FilterInputs) -> FilterOutcome:
        from zdebias.stats import aflite

        if inputs.embeddings is not None:
            x, info = inputs.embeddings, {"encoder": "given"}
        else:
            if inputs.embed is None:
                raise ConfigError("AFLite needs embed= (zdebias.classify.embed.embed_records)")
            aflite.checked_sizes(len(records), settings)  # before the embedding
            x, info = inputs.embed(records, settings, progress=inputs.progress)
        result = aflite.aflite_filter(
            records,
            settings,
            embeddings=x,
            labels=inputs.labels,
            embedding_info=info,
            progress=inputs.progress,
        )
        n = len(records)
        removed = [int(r) for r in result.arrays.removed_in.tolist()]
        scores = [float(s) for s in result.arrays.score.tolist()]
        columns: dict[str, list[Any]] = {
            "keep": [r == 0 for r in removed],
            "rejected_by": [[aflite.REASON] if r else [] for r in removed],
            "aflite_round": [r or None for r in removed],
            "aflite_score": [None if np.isnan(s) else round(s, 4) for s in scores],
        }
        assert all(len(v) == n for v in columns.values())
        return FilterOutcome(result.kept, result.rejected, result.summary, columns, result)

    @contextlib.contextmanager
    def open(self, job: FileJob) -> Iterator[Callable[[Path], Filtered]]:
        """AFLite in this process: read, embed (``job.embed``), filter, the kept rows'
        statistics."""
        from zdebias.stats.aflite import checked_sizes
        from zdebias.stats.execution.plan import Filtered
        from zdebias.stats.execution.source import read_source
        from zdebias.stats.measure import stats_of_kept

        settings, embed, progress = job.settings, job.embed, job.progress
        if embed is None:
            raise ConfigError("AFLite needs embed= (zdebias.classify.embed.embed_records)")
        cfg = AfliteSettings.take(settings)
        records, report = read_source(
            job.source, settings, hypo_only=job.hypo_only, progress=progress
        )
        checked_sizes(len(records), cfg)  # before the embedding, which takes the time
        inputs = FilterInputs(labels=report.labels, embed=embed, progress=progress)
        outcome = self.run(records, cfg, inputs)
        of_kept = stats_of_kept(outcome.kept, settings, labels=report.labels)

        def write(folder: Path) -> Filtered:
            from zdebias.data.writers import write_files

            files = {"kept.jsonl": outcome.kept, "rejected.jsonl": outcome.rejected}
            write_files(folder, files, num_proc=1)
            return Filtered(outcome.summary, of_kept, report)

        yield write


AFLITE = Aflite()
