"""One z-statistics measurement of a dataset: what ``zdebias stats`` and the stats stage report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.data.labels import infer_task
from zdebias.data.schema import Record
from zdebias.features.short_fields import short_fields_warning
from zdebias.stats.keep import kept_features, mark_kept
from zdebias.stats.settings import StatsSettings
from zdebias.stats.zstats import describe, label_ids, z_statistics

if TYPE_CHECKING:
    from zdebias.features.matrix import FeatureMatrix


@dataclass
class Measurement:
    """The report (JSON-ready) and the full arrays behind it (features × labels); ``features``:
    the presence matrix of the records measured."""

    report: dict[str, Any]
    names: list[str]
    labels: list[str]
    z: np.ndarray
    n: np.ndarray
    p_hat: np.ndarray
    features: FeatureMatrix | None = field(default=None, repr=False)
    #: ``[F]`` bool, the features ``keep_features`` names (the task's own); None: none
    kept: np.ndarray | None = field(default=None, repr=False)

    def gardner_points(self, min_n: int) -> dict[str, Any]:
        """The Gardner-plot data: every feature with n > min_n, its n, p̂ and z per label
        (and ``kept``: those of them that ``keep_features`` names, when it names some)."""
        keep = np.flatnonzero(np.asarray(self.n) > min_n)
        marked = {}
        if self.kept is not None:
            marked["kept"] = [self.names[j] for j in keep.tolist() if self.kept[j]]
        return {
            "min_n": min_n,
            "features": [self.names[j] for j in keep.tolist()],
            "n": [int(v) for v in np.asarray(self.n)[keep]],
            "p": {
                lab: [round(float(v), 5) for v in self.p_hat[keep, i]]
                for i, lab in enumerate(self.labels)
            },
            "z": {
                lab: [round(float(v), 3) for v in self.z[keep, i]]
                for i, lab in enumerate(self.labels)
            },
            **marked,
        }

    def tracked(self, track: Sequence[str]) -> dict[str, Any]:
        """Per tracked feature and label: z, n, p̂ and its rank by z among present features."""
        index = {name: j for j, name in enumerate(self.names)}
        present = np.asarray(self.n) > 0
        out: dict[str, Any] = {}
        for feature in track:
            j = index.get(feature)
            if j is None:
                out[feature] = None
                continue
            out[feature] = {
                lab: {
                    "z": float(self.z[j, i]),
                    "n": int(self.n[j]),
                    "p": float(self.p_hat[j, i]),
                    "rank": int((self.z[present, i] > self.z[j, i]).sum()) + 1,
                }
                for i, lab in enumerate(self.labels)
            }
        return out


def measure(
    records: Sequence[Record],
    settings: StatsSettings | None = None,
    *,
    labels: Sequence[str] | None = None,
    progress: bool = False,
    **overrides: Any,
) -> Measurement:
    """z-statistics of every feature and label of ``records`` (docs/design.md §3).

    ``settings``: a :class:`StatsSettings` (features, table size, α, tracked features);
    ``overrides``: fields of it as keywords. The report holds :func:`describe`'s keys plus
    ``features_used`` and ``tracked``.
    """
    from zdebias.features.extract import extract_features

    cfg = StatsSettings.of(settings, **overrides)
    labels = tuple(labels) if labels is not None else infer_task(records).labels
    fm = extract_features(
        records, cfg.features, labels=labels, progress=progress, **cfg.feature_kwargs()
    )
    report = describe(
        records,
        labels=labels,
        top=cfg.top,
        alpha=cfg.alpha,
        feature_matrix=fm,
        label_prior=cfg.label_prior,
    )
    z, n, p_hat = z_statistics(
        fm.matrix, label_ids(records, labels), len(labels), label_prior=cfg.label_prior
    )
    m = Measurement(report, list(fm.names), list(labels), z, n, p_hat, fm)
    report["features_used"] = cfg.features or "default"
    report["tracked"] = m.tracked(cfg.track)
    if cfg.artifact_model:  # a model of another family than the filter's (stats/artifacts.py)
        from zdebias.features.tokenize import Tokenizer
        from zdebias.stats.artifacts import artifact_accuracy

        tokenize = Tokenizer.from_settings(cfg.token_kwargs())
        found = artifact_accuracy(records, labels=labels, seed=cfg.seed, tokenize=tokenize)
        report["artifact_model"] = found.report()
    short = short_fields_warning(records, cfg.feature_kwargs())  # Chinese read with \w+, ...
    if short:
        report["warnings"] = [*report.get("warnings", []), short]
    kept = kept_features(m.names, cfg.keep_features)
    if kept is not None:  # the task's own features: reported as any other, marked as kept
        m.kept = kept.mask
        mark_kept(kept, report["top"])
        report["keep_features"] = cfg.keep_features
        report["kept_features"] = kept.block((z > report["z_critical"]).any(axis=1))
        report["warnings"] = [*report.get("warnings", []), *kept.warnings()]
    return m


#: what the ``stats_of_kept`` block of a filter summary means (also in docs/stats.md)
KEPT_STATS_DEFINITION = (
    "zdebias stats on kept.jsonl: features recomputed on the kept records alone (the default "
    "hypothesis-only model refitted on them; predictions in meta.hypo_only_pred kept), "
    "Bonferroni over the features present in them"
)


def stats_of_kept(
    kept: Sequence[Record],
    settings: Any,
    *,
    labels: Sequence[str] | None = None,
    progress: bool = False,
) -> dict[str, Any] | None:
    """What ``zdebias stats`` reports for a z-filter's ``kept.jsonl`` with the same feature
    settings (``settings``: any settings object with the feature fields, e.g. the filter's):
    ``n_features``, ``z_critical``, ``n_significant`` and the top feature per label.

    The filter summary's own ``top_z_after`` / ``n_significant_after`` measure the kept rows
    with the features *the filter used* (the hypothesis-only model fitted on the whole input)
    against the input's Bonferroni count; this is the other view, labelled, so the two
    numbers a user sees are both explained. ``None`` for an empty ``kept``.
    """
    if not kept:
        return None
    report = measure(kept, StatsSettings.take(settings, top=1), labels=labels, progress=progress)
    return kept_stats(report.report)


def kept_stats(rep: dict[str, Any]) -> dict[str, Any]:
    """The ``stats_of_kept`` block from a :func:`~zdebias.stats.zstats.describe` report of
    the kept records (``top`` 1)."""
    return {
        "definition": KEPT_STATS_DEFINITION,
        "n_features": rep["n_features"],
        "z_critical": rep["z_critical"],
        "n_significant": rep["n_significant"],
        "top_z": {name: (rows[0] if rows else None) for name, rows in rep["top"].items()},
    }


__all__ = ["KEPT_STATS_DEFINITION", "Measurement", "kept_stats", "measure", "stats_of_kept"]
