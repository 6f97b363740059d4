"""A filter method of a user's, for tests: keep every other row (the first, third, ...)."""

from __future__ import annotations

from typing import Any

from zdebias.settings import Settings
from zdebias.stats.methods import FilterInputs, FilterMethod, FilterOutcome


class EveryOther(FilterMethod):
    """Keep rows 0, 2, 4, ...; reject the others, each ``rejected_by`` ``["every-other"]``."""

    name = "every-other"
    settings = Settings
    columns = ("keep", "position")

    def run(self, records: list[Any], settings: Any, inputs: FilterInputs) -> FilterOutcome:
        keep = [i % 2 == 0 for i in range(len(records))]
        kept = [r for r, k in zip(records, keep, strict=True) if k]
        rejected = [
            r.replace(meta={**r.meta, "rejected_by": ["every-other"]})
            for r, k in zip(records, keep, strict=True)
            if not k
        ]
        summary = {"n_input": len(records), "n_kept": len(kept), "n_rejected": len(rejected)}
        return FilterOutcome(
            kept, rejected, summary, {"keep": keep, "position": [*range(len(keep))]}
        )
