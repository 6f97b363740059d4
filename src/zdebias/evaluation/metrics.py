"""Metrics for imbalanced evaluation sets: per-label accuracy (recall), precision and F1,
macro-F1 and balanced accuracy, from gold and predicted label names (numpy only).

They are computed on the set's own label space: the gold labels present in it (HANS:
``entailment`` / ``non-entailment``, after the two-way mapping of
:func:`~zdebias.evaluation.suites.map_predictions`). A prediction outside that space (a
three-way model's ``neutral`` on a two-way set read directly) is wrong for its gold label and
counts in no label's precision. A label never predicted has precision 0 and F1 0 (as
scikit-learn's ``zero_division=0``).

- per-label accuracy of ``L`` = recall = correct among the rows whose gold label is ``L``;
- balanced accuracy = the mean of the per-label recalls;
- macro-F1 = the mean of the per-label F1 (2·P·R / (P + R)).

>>> m = label_metrics(["a", "a", "a", "b"], ["a", "a", "b", "b"], ["a", "b"])
>>> round(m["balanced_accuracy"], 4), round(m["macro_f1"], 4)
(0.8333, 0.7333)

Flat keys (:func:`flat_label_metrics`) put them beside each suite's accuracy in a results
document's ``runs[].metrics`` and ``summary`` (mean ± std over runs): ``SUITE macro-F1``,
``SUITE balanced accuracy``, ``SUITE accuracy on LABEL`` and ``SUITE F1 on LABEL``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from zdebias.evaluation.cells import format_cell
from zdebias.evaluation.registry import Metric, Scored

MACRO_F1 = "macro-F1"
BALANCED = "balanced accuracy"
#: the built-in per-run numbers compare tests by default, beside each suite's accuracy (the
#: registry decides: each metric's ``tested``, :func:`~zdebias.evaluation.catalogue.tested_keys`)
TESTED = (MACRO_F1, BALANCED)
#: the per-label columns of :func:`per_label_markdown`
KEYS = ("recall", "precision", "f1")


def metric_key(suite: str, metric: str, label: str | None = None) -> str:
    """The flat key of a suite's metric: ``snli macro-F1``, ``snli accuracy on neutral``."""
    return f"{suite} {metric}" if label is None else f"{suite} {metric} on {label}"


def label_metrics(
    gold: Sequence[str], preds: Sequence[str], labels: Sequence[str]
) -> dict[str, Any]:
    """``macro_f1``, ``balanced_accuracy`` and ``per_label_f1`` (label → ``n``,
    ``n_predicted``, ``recall``, ``precision``, ``f1``) over ``labels`` (module doc)."""
    g = np.asarray(list(gold), dtype=object)
    p = np.asarray(list(preds), dtype=object)
    if g.shape != p.shape:
        raise ValueError(f"{len(p)} predictions for {len(g)} gold labels")
    per_label: dict[str, dict[str, Any]] = {}
    for lab in labels:
        n = int((g == lab).sum())
        n_pred = int((p == lab).sum())
        tp = int(((g == lab) & (p == lab)).sum())
        recall = tp / n if n else float("nan")
        precision = tp / n_pred if n_pred else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
        per_label[lab] = {
            "n": n,
            "n_predicted": n_pred,
            "recall": recall,
            "precision": precision,
            "f1": f1,
        }
    present = [cell for cell in per_label.values() if cell["n"]]
    return {
        "macro_f1": float(np.mean([c["f1"] for c in present])) if present else float("nan"),
        "balanced_accuracy": float(np.mean([c["recall"] for c in present]))
        if present
        else float("nan"),
        "per_label_f1": per_label,
    }


def flat_label_metrics(suite: str, result: dict[str, Any]) -> dict[str, float]:
    """A suite result's macro-F1, balanced accuracy and per-label accuracy and F1 under their
    flat keys (:func:`metric_key`); empty for a result scored before they existed."""
    scored = Scored(suite, (), (), (), result)
    out: dict[str, float] = {}
    for metric in (MacroF1(), BalancedAccuracy(), PerLabel()):
        out.update(metric.compute(scored))
    return out


class Accuracy(Metric):
    """Accuracy: the share of rows predicted right (the suite's own key)."""

    name = "accuracy"
    tested = True

    def compute(self, scored: Scored) -> dict[str, float]:
        return {scored.suite: float(scored.result["accuracy"])}


class HeuristicCells(Metric):
    """Accuracy per group of a grouped suite (HANS: per heuristic, and heuristic × gold)."""

    name = "heuristics"

    def compute(self, scored: Scored) -> dict[str, float]:
        out = {}
        for heuristic, cells in scored.result.get("groups", {}).items():
            for key, cell in cells.items():
                name = f"{scored.suite}/{heuristic}"
                out[name if key == "all" else f"{name}/{key}"] = float(cell["accuracy"])
        return out


class MacroF1(Metric):
    """Macro-F1 over the suite's gold labels (:func:`label_metrics`)."""

    name = "macro-f1"
    primary = MACRO_F1
    tested = True

    def compute(self, scored: Scored) -> dict[str, float]:
        if "macro_f1" not in scored.result:
            return {}
        return {self.key(scored.suite): float(scored.result["macro_f1"])}


class BalancedAccuracy(Metric):
    """Balanced accuracy: the mean of the per-label recalls (:func:`label_metrics`)."""

    name = "balanced-accuracy"
    primary = BALANCED
    tested = True

    def compute(self, scored: Scored) -> dict[str, float]:
        if "balanced_accuracy" not in scored.result:
            return {}
        return {self.key(scored.suite): float(scored.result["balanced_accuracy"])}


class PerLabel(Metric):
    """Per gold label: accuracy (recall) and F1 (:func:`label_metrics`)."""

    name = "per-label"

    def compute(self, scored: Scored) -> dict[str, float]:
        out = {}
        for lab, cell in scored.result.get("per_label_f1", {}).items():
            if cell["n"]:
                out[metric_key(scored.suite, "accuracy", lab)] = float(cell["recall"])
                out[metric_key(scored.suite, "F1", lab)] = float(cell["f1"])
        return out


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """Mean and sample standard deviation (ddof 1; 0 for a single run) of per-run values."""
    arr = np.asarray(values, dtype=np.float64)
    std = float(arr.std(ddof=1)) if len(arr) > 1 else 0.0
    return {
        "mean": float(arr.mean()),
        "std": std,
        "n_runs": len(arr),
        "values": [float(v) for v in arr],
    }


def _summary(doc: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    values = [run.get("metrics", {}).get(key) for run in doc.get("runs", [])]
    if not values or any(v is None for v in values):
        return None
    return summarize([float(v) for v in values])


def label_table(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """Per suite of ``doc``: accuracy, macro-F1 and balanced accuracy, and per gold label its
    accuracy (recall), precision and F1, each mean ± std over the runs (cells as
    :func:`summarize`); None when the runs carry no label metrics
    (a results file of an older zdebias)."""
    runs = doc.get("runs", [])
    suites = []
    for suite in [s["name"] for s in doc.get("suites", [])]:
        results = [run.get("results", {}).get(suite) or {} for run in runs]
        if not runs or any("per_label_f1" not in r for r in results):
            continue
        labels = []
        for lab, cell in results[0]["per_label_f1"].items():
            if not cell["n"]:
                continue
            per_run = [r["per_label_f1"].get(lab) for r in results]
            if any(c is None for c in per_run):
                continue
            labels.append(
                {
                    "label": lab,
                    "n": cell["n"],
                    **{
                        name: summarize([float(c[name]) for c in per_run])
                        for name in ("recall", "precision", "f1")
                    },
                }
            )
        suites.append(
            {
                "suite": suite,
                "accuracy": _summary(doc, suite),
                "macro_f1": _summary(doc, metric_key(suite, MACRO_F1)),
                "balanced_accuracy": _summary(doc, metric_key(suite, BALANCED)),
                "labels": labels,
            }
        )
    if not suites:
        return None
    return {"method": doc.get("name"), "suites": suites}


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown pipe table: the first column left-aligned, the others right-aligned."""
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def overall_markdown(table: dict[str, Any]) -> str:
    """Accuracy, macro-F1 and balanced accuracy per suite, as a Markdown table."""
    rows = [
        [s["suite"], *(format_cell(s[k]) for k in ("accuracy", "macro_f1", "balanced_accuracy"))]
        for s in table["suites"]
    ]
    return markdown_table(["suite", "accuracy", MACRO_F1, BALANCED], rows)


def per_label_markdown(table: dict[str, Any]) -> str:
    """Per suite and gold label: n, accuracy (recall), precision and F1, as Markdown."""
    rows = [
        [s["suite"], lab["label"], f"{lab['n']:,}", *(format_cell(lab[k]) for k in KEYS)]
        for s in table["suites"]
        for lab in s["labels"]
    ]
    return markdown_table(
        ["suite", "gold label", "n", "accuracy (recall)", "precision", "F1"], rows
    )


__all__ = [
    "BALANCED",
    "MACRO_F1",
    "TESTED",
    "Accuracy",
    "BalancedAccuracy",
    "HeuristicCells",
    "MacroF1",
    "PerLabel",
    "flat_label_metrics",
    "label_metrics",
    "label_table",
    "markdown_table",
    "metric_key",
    "overall_markdown",
    "per_label_markdown",
    "summarize",
]
