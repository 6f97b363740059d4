"""Confidence filtering (GD-NLI §2.2.2, SPEC §7): keep a sample only if a classifier trained on
the original data gives its label a probability above τ.

:func:`confidence_mask` is the pure part (arrays in, mask out); :func:`confidence_filter` runs a
classifier over records and partitions them: kept + rejected = input, in input order, with
``meta["confidence"]`` = p(label) on every record.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from zdebias.classify.settings import ConfidenceSettings
from zdebias.data.schema import Record
from zdebias.data.writers import write_files
from zdebias.errors import ConfigError, DataError

#: τ of Table 8 (the default ``threshold`` of :class:`ConfidenceSettings`).
DEFAULT_TAU = 0.95
CONFIDENCE_KEY = "confidence"


def confidence_mask(probs: np.ndarray, gold: np.ndarray, tau: float) -> np.ndarray:
    """``probs[i, gold[i]] > tau`` for each row: ``[N, L]`` floats, ``[N]`` ints → ``[N]`` bools."""
    if not 0.0 <= tau <= 1.0:
        raise ConfigError(f"tau must lie in [0, 1], got {tau}")
    probs = np.asarray(probs)
    gold = np.asarray(gold, dtype=np.int64)
    if probs.ndim != 2 or gold.shape != (probs.shape[0],):
        raise ValueError(f"probabilities {probs.shape} and labels {gold.shape} do not match")
    return probs[np.arange(len(gold)), gold] > tau


#: τ values whose kept counts every summary reports, to pick τ without rerunning the model.
PROFILE_TAUS = (0.5, 0.8, 0.9, 0.95, 0.99)


def confidence_profile(p_gold: np.ndarray) -> dict[str, Any]:
    """Quartiles of p(label) and how many samples each τ in :data:`PROFILE_TAUS` would keep."""
    if len(p_gold) == 0:
        return {"p_label_quartiles": None, "kept_at_tau": {str(t): 0 for t in PROFILE_TAUS}}
    q = np.quantile(p_gold, [0.25, 0.5, 0.75])
    return {
        "p_label_quartiles": [round(float(v), 4) for v in q],
        "kept_at_tau": {str(t): int((p_gold > t).sum()) for t in PROFILE_TAUS},
    }


def confidence_filter(
    records: Sequence[Record],
    model: Any,
    settings: ConfidenceSettings | None = None,
    *,
    progress: bool = True,
    **overrides: Any,
) -> tuple[list[Record], list[Record], dict[str, Any]]:
    """Split ``records`` into (kept, rejected, summary) by the classifier ``model``'s p(label).

    ``model`` is a classifier folder / reference or a loaded classifier. ``settings``: a
    :class:`~zdebias.classify.settings.ConfidenceSettings` (``threshold`` τ, ``batch_size``,
    ``device``, ``ray``: score on Ray actors); ``overrides``: any of its fields by keyword.
    Every record's label must be one the classifier predicts.
    """
    from zdebias.classify.on_ray import classifier_for
    from zdebias.classify.predict import LoadedClassifier

    s = ConfidenceSettings.of(settings, **overrides)
    tau = s.threshold
    clf = (
        model
        if isinstance(model, LoadedClassifier)
        else classifier_for(model, s, progress=progress)
    )
    index = {name: i for i, name in enumerate(clf.labels)}
    gold = np.empty(len(records), dtype=np.int64)
    for i, r in enumerate(records):
        if r.label not in index:
            raise DataError(
                f"record {r.id!r} has label {r.label!r}, which the classifier does "
                f"not predict ({', '.join(clf.labels)})",
                field="label",
            )
        gold[i] = index[r.label]
    (probs,) = clf.predict_each([records], batch_size=s.batch_size, progress=progress)
    keep = confidence_mask(probs, gold, tau)
    kept: list[Record] = []
    rejected: list[Record] = []
    for i, r in enumerate(records):
        p = float(probs[i, gold[i]])
        (kept if keep[i] else rejected).append(r.replace(meta={**r.meta, CONFIDENCE_KEY: p}))
    n_label = Counter(r.label for r in records)
    n_kept = Counter(r.label for r in kept)
    summary = {
        "model": str(model) if not isinstance(model, LoadedClassifier) else None,
        "tau": tau,
        "n_input": len(records),
        "n_kept": len(kept),
        "n_rejected": len(rejected),
        "kept_share": len(kept) / len(records) if records else 0.0,
        "per_label": {
            name: {
                "n": n_label[name],
                "kept": n_kept[name],
                "rejected": n_label[name] - n_kept[name],
            }
            for name in clf.labels
            if n_label[name]
        },
        **confidence_profile(probs[np.arange(len(records)), gold]),
    }
    return kept, rejected, summary


def write_partition(
    kept: Sequence[Record],
    rejected: Sequence[Record],
    summary: dict[str, Any],
    out_dir: str | Path,
) -> dict[str, Path]:
    """Write ``kept.jsonl``, ``rejected.jsonl`` and ``summary.json`` (each atomically)."""
    files = {"kept.jsonl": kept, "rejected.jsonl": rejected, "summary.json": summary}
    return {Path(name).stem: path for name, path in write_files(out_dir, files).items()}
