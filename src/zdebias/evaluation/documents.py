"""The evaluation results document (``zdebias evaluate --out FILE``, the ``evaluate`` stage's
``results.json`` inputs) as TypedDicts: its keys are a contract between
:func:`~zdebias.evaluation.suites.evaluate_models` and
:func:`~zdebias.evaluation.reliance.add_reliance`, which build it, and ``compare``, the
tables and the reports, which read it; mypy checks it (``make lint``).

At run time they are plain dicts: the JSON is written exactly as before. ``total=False``: a
key is there when its run, its classifier folder or a shortcut split put it there; each
class says which. :func:`~zdebias.evaluation.suites.read_results` checks a file's fields
with pydantic before it is read as one.
"""

from __future__ import annotations

from typing import Any, TypedDict


class EvaluationRun(TypedDict, total=False):
    """One classifier's run: the model, what its folder records of its training, its labels,
    each suite's ``results`` and the flat ``metrics``; with a shortcut split, its
    ``reliance``, ``groups`` and ``shortcuts``."""

    model: str
    # recorded by the classifier folder (zdebias_classifier.json, metrics.json)
    seed: int
    loss: str
    input: str
    base_model: str
    #: why the training did not learn (the run stays in the means)
    did_not_learn: str
    #: the training's best dev accuracy (an outlier among the seeds is flagged)
    best_dev_accuracy: float
    bias_expert: dict[str, Any]
    train_filter: dict[str, Any]
    # scored
    labels: list[str]
    results: dict[str, dict[str, Any]]
    metrics: dict[str, float]
    # a shortcut split's (add_reliance)
    reliance: dict[str, Any]
    groups: dict[str, Any]
    shortcuts: list[dict[str, Any]]


class GradedSplit(TypedDict, total=False):
    """The document's ``shortcut_split``: what was split, by what, its counts and bias model,
    the warnings and what the slices mean."""

    folder: str
    by: str | None
    test: str | None
    suite: str | None
    test_digest: str | None
    counts: dict[str, int]
    bias_model: dict[str, Any] | None
    warnings: list[str]
    meaning: str


class EvaluationDocument(TypedDict, total=False):
    """A method's results document: its ``name``, the ``suites``, one run per classifier
    (seed), the ``summary`` over runs (flat metric → mean ± std), the user's
    ``extra_metrics`` and, with a shortcut split, ``shortcut_split``."""

    kind: str
    version: int
    name: str
    suites: list[dict[str, Any]]
    runs: list[EvaluationRun]
    summary: dict[str, dict[str, Any]]
    extra_metrics: list[str]
    shortcut_split: GradedSplit


__all__ = ["EvaluationDocument", "EvaluationRun", "GradedSplit"]
