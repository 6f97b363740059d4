"""A trained hypothesis-only classifier as the source of the ``hypo-only`` feature.

The feature (``zdebias.features.hypothesis_only``) reads ``meta["hypo_only_pred"]`` first;
this module fills it from a classifier folder, so the feature layer never loads a model.
Commands and stages call :func:`apply_hypo_only_model` when ``hypo_only_model`` is set.

A folder trained with ``cross_fit`` K (``train-classifier --input-kind hypothesis-only
--cross-fit 5``, GD-NLI's BERT-base hypothesis-only feature) also holds the out-of-fold
predictions for its training records (``cross_fit_predictions.jsonl``): a record found there
(same id and hypothesis) gets its out-of-fold prediction, so no training record is labelled by
a model that saw it; every other record (generated data, other splits) gets the full model's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

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


#: the out-of-fold predictions file of a cross-fitted classifier folder (``train_classifier``
#: with ``cross_fit`` writes it)
CROSS_FIT_FILE = "cross_fit_predictions.jsonl"
log = logging.getLogger("zdebias")


def out_of_fold_predictions(model_dir: str) -> dict[tuple[str, str | None], str]:
    """``(id, hypothesis) → label`` from the folder's cross-fit file (empty when none)."""
    path = Path(model_dir) / CROSS_FIT_FILE
    if not path.is_file():
        return {}
    from zdebias.data.readers import read_records

    return {
        (r.id, r.hypothesis): str(r.meta["hypo_only_pred"])
        for r in read_records(path, format="jsonl")
        if r.meta.get("hypo_only_pred") is not None
    }


def with_hypothesis_only_predictions(
    records: Sequence[Record], model_dir: str, labels: Sequence[str], *, progress: bool = False
) -> list[Record]:
    """Copies of ``records`` with ``meta["hypo_only_pred"]`` from the classifier in
    ``model_dir``: its out-of-fold prediction for a record it was cross-fitted on, else the
    model's own; a record that already has a prediction keeps it."""
    todo = [i for i, r in enumerate(records) if (r.meta or {}).get("hypo_only_pred") is None]
    oof = out_of_fold_predictions(model_dir)
    from_folds = {
        i: oof[key]
        for i in todo
        if (key := (records[i].id, records[i].hypothesis)) in oof and oof[key] in labels
    }
    rest = [i for i in todo if i not in from_folds]
    predicted = hypothesis_only_labels(
        [records[i] for i in rest], model_dir, labels, progress=progress
    )
    if oof:
        log.info(
            "hypothesis-only feature: %d records from out-of-fold predictions, %d from %s",
            len(from_folds),
            len(rest),
            model_dir,
        )
    out = list(records)
    for i, label in [*from_folds.items(), *zip(rest, predicted, strict=True)]:
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


__all__ = [
    "CROSS_FIT_FILE",
    "apply_hypo_only_model",
    "hypothesis_only_labels",
    "out_of_fold_predictions",
    "with_hypothesis_only_predictions",
]
