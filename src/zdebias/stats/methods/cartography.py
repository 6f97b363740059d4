"""The ``cartography`` filter method: the rows in a region of a classifier's data map
(:mod:`zdebias.stats.cartography_filter`); the API's columns ``keep``, ``confidence``,
``variability`` and ``correctness``."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zdebias.errors import ConfigError
from zdebias.stats.methods import FileJob, FilterInputs, FilterMethod, FilterOutcome
from zdebias.stats.settings import CartographySettings

if TYPE_CHECKING:
    from zdebias.data.schema import Record
    from zdebias.stats.execution.plan import Filtered


class Cartography(FilterMethod):
    """Dataset cartography: keep ``fraction`` of the rows in ``region`` of ``dynamics``."""

    name = "cartography"
    settings = CartographySettings
    columns = ("keep", "confidence", "variability", "correctness")
    text = "zdebias.report.text:cartography_text"
    size_setting = "fraction"

    def sized(self, size: int, total: int) -> dict[str, Any]:
        """The share of the region that keeps ``size`` of ``total`` rows."""
        return {"fraction": size / total}

    def run(self, records: list[Record], settings: Any, inputs: FilterInputs) -> FilterOutcome:
        from zdebias.stats.cartography_filter import cartography_split, match_dynamics
        from zdebias.stats.dynamics import read_dynamics

        if settings.dynamics is None:
            raise ConfigError("cartography_filter needs dynamics= (a classifier folder)")
        dynamics = read_dynamics(settings.dynamics)
        kept, rejected, summary, keep = cartography_split(
            records, dynamics, settings, inputs.source
        )
        rows = match_dynamics(records, dynamics, inputs.source).tolist()
        columns: dict[str, list[Any]] = {"keep": [bool(k) for k in keep.tolist()]}
        for name in self.columns[1:]:
            values = getattr(dynamics, name)
            columns[name] = [float(values[row]) for row in rows]
        return FilterOutcome(kept, rejected, summary, columns)

    def open(self, job: FileJob) -> AbstractContextManager[Callable[[Path], Filtered]]:
        """Read, match, select (:func:`~zdebias.stats.cartography_filter.filter_by_dynamics`)."""
        from zdebias.stats.cartography_filter import filter_by_dynamics

        return filter_by_dynamics(job.source, job.settings, job.hypo_only, job.progress)


CARTOGRAPHY = Cartography()
