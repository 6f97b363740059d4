"""A trained hypothesis-only classifier as the source of the ``hypo-only`` feature.

The feature (``zdebias.features.hypothesis_only``) reads ``meta["hypo_only_pred"]`` first;
this module fills it from a classifier folder, so the feature layer never loads a model.
Commands and stages call :func:`apply_hypo_only_model` when ``hypo_only_model`` is set.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.features.settings import FeatureSettings


def hypothesis_only_labels(
    records: Sequence[Record],
    model_dir: str,
    labels: Sequence[str],
    *,
    batch_size: int = 64,
    progress: bool = False,
) -> list[str]:
    """The label a trained hypothesis-only classifier predicts for each record."""
    from zdebias.classify.predict import load_classifier, predict_proba

    clf = load_classifier(model_dir)
    if clf.input not in (None, "hypothesis-only", "text"):
        raise ConfigError(
            f"hypo_only_model {model_dir!r} was trained on {clf.input!r} input; a "
            "hypothesis-only classifier is needed"
        )
    if clf.input is None and records and records[0].is_pair:
        clf.input = "hypothesis-only"
    missing = [name for name in clf.labels if name not in labels]
    if missing:
        raise ConfigError(
            f"hypo_only_model {model_dir!r} predicts labels {clf.labels}, not the task's "
            f"{list(labels)}"
        )
    if not records:
        return []
    proba = predict_proba(clf, list(records), batch_size=batch_size, progress=progress)
    return [clf.labels[i] for i in np.asarray(proba).argmax(axis=1).tolist()]


def with_hypothesis_only_predictions(
    records: Sequence[Record], model_dir: str, labels: Sequence[str], *, progress: bool = False
) -> list[Record]:
    """Copies of ``records`` with ``meta["hypo_only_pred"]`` from the classifier in
    ``model_dir``; a record that already has a prediction keeps it."""
    todo = [i for i, r in enumerate(records) if (r.meta or {}).get("hypo_only_pred") is None]
    predicted = hypothesis_only_labels(
        [records[i] for i in todo], model_dir, labels, progress=progress
    )
    out = list(records)
    for i, label in zip(todo, predicted, strict=True):
        r = records[i]
        meta = {**(r.meta or {}), "hypo_only_pred": label}
        out[i] = Record(r.id, r.label, r.premise, r.hypothesis, r.text, meta)
    return out


def apply_hypo_only_model(
    records: Sequence[Record],
    settings: FeatureSettings,
    labels: Sequence[str] | None,
    *,
    progress: bool = False,
) -> list[Record]:
    """``records`` with the model's predictions when ``settings.hypo_only_model`` is set and
    the ``hypo-only`` feature is in use; else ``records`` unchanged."""
    used = settings.features is None or "hypo-only" in settings.features
    if not settings.hypo_only_model or not used or not records:
        return list(records)
    if labels is None:
        from zdebias.data.labels import infer_task

        labels = infer_task(records).labels
    return with_hypothesis_only_predictions(
        records, settings.hypo_only_model, labels, progress=progress
    )


__all__ = ["apply_hypo_only_model", "hypothesis_only_labels", "with_hypothesis_only_predictions"]
