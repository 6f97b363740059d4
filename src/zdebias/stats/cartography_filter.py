"""The filter's ``cartography`` method on a file: keep the input rows in a region of a
classifier's data map (:mod:`zdebias.stats.cartography`), as ``zdebias filter --method
cartography`` and the ``filter`` stage run it through
:func:`zdebias.stats.execution.operations.run_filter`.

Rows are matched to the training dynamics by id, or by position when the input's ids are the
dynamics' ids in the same order (the classifier's own training rows: the one way repeated ids
can be matched); repeated ids otherwise, and an input row without dynamics, are errors (never
kept, dropped or matched to another row silently). Every output row carries ``meta.cartography``
(its confidence, variability and correctness); a rejected row also ``meta.rejected_by`` (why).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.stats.cartography import REGION_ORDER, check_epochs, region_size, select_region
from zdebias.stats.dynamics import Dynamics, read_dynamics
from zdebias.stats.execution.plan import Filtered
from zdebias.stats.execution.source import FileInput, HypoOnly, read_source
from zdebias.stats.settings import CartographySettings, FilterSettings

if TYPE_CHECKING:
    from zdebias.stats.summaries import CartographySummary


def region_reason(region: str, fraction: float) -> str:
    """The ``rejected_by`` reason of a row outside the region."""
    return f"not in the {fraction:.0%} {region} ({REGION_ORDER[region]})"


def _first_repeat(ids: list[str]) -> tuple[str, int] | None:
    counts = Counter(ids)
    return next(((key, n) for key, n in counts.items() if n > 1), None)


def match_dynamics(records: list[Record], dynamics: Dynamics, source: str) -> np.ndarray:
    """The dynamics row of each record: by position when the ids are the dynamics' ids in
    their order, else by id. Missing ids fail with the first and the count; a repeated id
    (which id matching cannot place) fails too."""
    ids = [r.id for r in records]
    if ids == dynamics.ids:
        return np.arange(len(ids), dtype=np.int64)
    for where, keys in ((source, ids), (dynamics.path, dynamics.ids)):
        repeat = _first_repeat(keys)
        if repeat is not None:
            raise ConfigError(
                f"{where}: id {repeat[0]!r} is on {repeat[1]} rows, so rows cannot be matched "
                f"to training dynamics by id; rows with repeated ids are matched by position, "
                f"which needs the input to be the classifier's training rows in their order "
                f"({len(ids):,} input rows, {len(dynamics.ids):,} in {dynamics.path})"
            )
    index = dynamics.index()
    rows = np.array([index.get(r.id, -1) for r in records], dtype=np.int64)
    missing = np.flatnonzero(rows < 0)
    if len(missing):
        first = records[int(missing[0])].id
        raise ConfigError(
            f"{source}: {len(missing):,} of {len(records):,} rows have no training dynamics in "
            f"{dynamics.path} (first: id {first!r}); the classifier must be trained on these "
            "rows, with the same ids"
        )
    return rows


def cartography_split(
    records: list[Record], dynamics: Dynamics, settings: CartographySettings, source: str
) -> tuple[list[Record], list[Record], CartographySummary, np.ndarray]:
    """``(kept, rejected, summary, keep)`` of ``records`` for the region: kept and rejected in
    input order, ``keep`` the boolean mask over ``records``."""
    check_epochs(settings.region, dynamics.n_epochs, dynamics.path)
    rows = match_dynamics(records, dynamics, source)
    conf = dynamics.confidence[rows]
    var = dynamics.variability[rows]
    corr = dynamics.correctness[rows]
    keep = select_region(
        conf, var, region=settings.region, fraction=settings.fraction, seed=settings.seed
    )
    warnings = []
    one_epoch = int((np.sum(~np.isnan(dynamics.gold_probs[rows]), axis=1) < 2).sum())
    if one_epoch and settings.region == "ambiguous":
        warnings.append(
            f"{one_epoch:,} {'row was' if one_epoch == 1 else 'rows were'} trained on in one "
            "epoch only (variability 0)"
        )
    reason = region_reason(settings.region, settings.fraction)
    kept: list[Record] = []
    rejected: list[Record] = []
    for i, r in enumerate(records):
        values = {
            "confidence": float(conf[i]),
            "variability": float(var[i]),
            "correctness": float(corr[i]),
        }
        if keep[i]:
            kept.append(r.replace(meta={**r.meta, "cartography": values}))
        else:
            meta = {**r.meta, "rejected_by": [reason], "cartography": values}
            rejected.append(r.replace(meta=meta))
    n = len(records)
    summary: CartographySummary = {
        "method": "cartography",
        "dynamics": dynamics.path,
        "region": settings.region,
        "region_order": REGION_ORDER[settings.region],
        "fraction": settings.fraction,
        "n_input": n,
        "n_seed": 0,
        "n_accepted": len(kept),
        "n_kept": len(kept),
        "n_rejected": len(rejected),
        "kept_share_of_input": round(len(kept) / n, 6) if n else 0.0,
        "region_size_rule": "round_half_up(n_input * fraction)",
        "ties": f"in a random order drawn from seed {settings.seed}",
        "seed": settings.seed,
        "matched_by": "position" if [r.id for r in records] == dynamics.ids else "id",
        "epochs": dynamics.n_epochs,
        "n_dynamics": len(dynamics.ids),
        "n_dynamics_not_in_input": len(dynamics.ids) - len(set(rows.tolist())),
        "label_counts_before": dict(Counter(r.label for r in records)),
        "label_counts_after": dict(Counter(r.label for r in kept)),
        "kept_ranges": _ranges(conf[keep], var[keep], corr[keep]),
        "input_means": _means(conf, var, corr),
        "kept_means": _means(conf[keep], var[keep], corr[keep]),
        "rejections_by_feature": {reason: len(rejected)} if rejected else {},
        "warnings": warnings,
    }
    assert region_size(n, settings.fraction) == len(kept)
    return kept, rejected, summary, keep


def _ranges(conf: np.ndarray, var: np.ndarray, corr: np.ndarray) -> dict[str, Any]:
    if not len(conf):
        return {}
    return {
        name: [round(float(a.min()), 6), round(float(a.max()), 6)]
        for name, a in (("confidence", conf), ("variability", var), ("correctness", corr))
    }


def _means(conf: np.ndarray, var: np.ndarray, corr: np.ndarray) -> dict[str, Any]:
    if not len(conf):
        return {}
    return {
        name: round(float(a.mean()), 6)
        for name, a in (("confidence", conf), ("variability", var), ("correctness", corr))
    }


@contextlib.contextmanager
def filter_by_dynamics(
    source: FileInput,
    settings: FilterSettings,
    hypo_only: HypoOnly | None,
    progress: bool,
) -> Iterator[Callable[[Path], Filtered]]:
    """The cartography way of :func:`~zdebias.stats.execution.operations.run_filter`: read, match,
    select, and the kept rows' z-statistics (as ``zdebias stats`` of ``kept.jsonl``)."""
    from zdebias.stats.measure import stats_of_kept

    if settings.dynamics is None:
        raise ConfigError(
            "--method cartography needs --dynamics MODEL_DIR (a classifier zdebias trained)"
        )
    dynamics = read_dynamics(settings.dynamics)
    records, report = read_source(source, settings, hypo_only=hypo_only, progress=progress)
    kept, rejected, summary, _ = cartography_split(records, dynamics, settings, source.shown)
    assert report.labels is not None  # read_source refuses a file without labelled records
    summary["labels"] = list(report.labels)
    of_kept = stats_of_kept(kept, settings, labels=report.labels) if kept else None

    def write(folder: Path) -> Filtered:
        from zdebias.data.writers import write_files

        write_files(folder, {"kept.jsonl": kept, "rejected.jsonl": rejected})
        return Filtered(summary, of_kept, report, None)

    yield write


__all__ = ["cartography_split", "filter_by_dynamics", "match_dynamics"]
