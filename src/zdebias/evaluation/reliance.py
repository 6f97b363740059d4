"""Reliance on shortcuts: accuracy on a shortcut split's slices and the gap between them.

A folder written by ``zdebias shortcut-split`` (:mod:`zdebias.stats.shortcut_split`) holds a
test set's aligned, conflicting and free rows. Evaluated as three suites
(:data:`SUITES`), each run gets its accuracy on each slice and the gap aligned − conflicting
(:data:`GAP`, a flat metric, so that ``compare`` and the evaluate stage t-test it between
methods over seeds like any suite).

>>> run = {"results": {"shortcut-aligned": {"accuracy": 0.9},
...                    "shortcut-conflicting": {"accuracy": 0.6}}, "metrics": {}}
>>> round(run_reliance(run)["gap"], 2)
0.3
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zdebias.errors import ConfigError
from zdebias.evaluation.cells import format_cell
from zdebias.evaluation.suites import Suite, summarize

log = logging.getLogger("zdebias")

#: slice → the suite name its rows are evaluated under
SUITES = {
    "aligned": "shortcut-aligned",
    "conflicting": "shortcut-conflicting",
    "free": "shortcut-free",
}
#: the flat metric of the gap aligned − conflicting
GAP = "reliance-gap"
#: what the gap means, in one sentence (the reports print it)
MEANING = (
    "The reliance gap is a model's accuracy on the aligned rows (the training set's "
    "shortcuts point to the gold label) minus its accuracy on the conflicting rows (they "
    "point to another label): the more a model leans on those shortcuts, the larger the gap; "
    "a debiased training set should shrink it without lowering the aligned accuracy much."
)


def read_split(folder: str | Path) -> dict[str, Any]:
    """The ``summary.json`` of a shortcut-split folder (or that file itself)."""
    path = Path(folder)
    if path.is_file():
        path = path.parent
    try:
        summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: not a shortcut split (no summary.json; run zdebias shortcut-split)"
        ) from None
    if not isinstance(summary, dict) or "counts" not in summary:
        raise ConfigError(f"{path}/summary.json: not a shortcut split's summary")
    return {**summary, "folder": str(path)}


def split_suites(split: dict[str, Any], *, task: str | None = None) -> list[Suite]:
    """One suite per slice of ``split`` (:func:`read_split`) that has rows."""
    folder = Path(split["folder"])
    return [
        Suite(suite, str(folder / f"{name}.jsonl"), format="jsonl", task=task)
        for name, suite in SUITES.items()
        if split["counts"].get(name)
    ]


def evaluate_with_split(
    models: Sequence[str | Path],
    suites: Sequence[Suite],
    shortcut_split: str | Path | None,
    settings: Any = None,
    **options: Any,
) -> dict[str, Any]:
    """:func:`~zdebias.evaluation.suites.evaluate_models` of ``models`` on ``suites`` plus,
    with ``shortcut_split`` (a ``zdebias shortcut-split`` folder or its summary.json), the
    split's slices as suites and each run's reliance (:func:`add_reliance`); ``options``:
    evaluate_models' keywords."""
    from zdebias.evaluation.suites import evaluate_models

    if shortcut_split is None:
        return evaluate_models(models, suites, settings, **options)
    split = read_split(shortcut_split)
    task = suites[0].task if suites else None
    doc = evaluate_models(models, [*suites, *split_suites(split, task=task)], settings, **options)
    return add_reliance(doc, split)


def run_reliance(run: dict[str, Any]) -> dict[str, Any]:
    """One run's accuracy per slice (None for an empty slice) and the gap; the gap is also
    put in ``run["metrics"]`` (:data:`GAP`) when both sides have rows."""
    results = run.get("results", {})
    acc = {
        name: (float(results[suite]["accuracy"]) if suite in results else None)
        for name, suite in SUITES.items()
    }
    gap = None
    if acc["aligned"] is not None and acc["conflicting"] is not None:
        gap = acc["aligned"] - acc["conflicting"]
        run.setdefault("metrics", {})[GAP] = gap
    return {**acc, "gap": gap}


def add_reliance(doc: dict[str, Any], split: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (an evaluation results document whose suites include the split's) with each
    run's ``reliance``, the gap's ``summary`` over runs and ``shortcut_split`` (what was
    split, by what, the counts, warnings and :data:`MEANING`)."""
    gaps = []
    for run in doc["runs"]:
        run["reliance"] = run_reliance(run)
        if run["reliance"]["gap"] is not None:
            gaps.append(run["reliance"]["gap"])
    if gaps and len(gaps) == len(doc["runs"]):
        doc["summary"][GAP] = summarize(gaps)
    warnings = list(split.get("warnings", []))
    if not split["counts"].get("conflicting"):
        warnings.append("the split has no conflicting rows: no gap")
    for line in warnings:
        log.warning("shortcut split %s: %s", split["folder"], line)
    doc["shortcut_split"] = {
        "folder": split["folder"],
        "by": split.get("by"),
        "test": split.get("test"),
        "counts": split["counts"],
        "warnings": warnings,
        "meaning": MEANING,
    }
    return doc


def reliance_table(
    docs: Sequence[dict[str, Any]], comparison: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Per document with a shortcut split: its name and per slice and gap a summary over runs
    (``{mean, std, n_runs}``, None where absent); ``comparison`` adds the gap's t-test."""
    tests = {
        item["name"]: item["tests"].get(GAP) for item in (comparison or {}).get("comparisons", [])
    }
    rows = []
    for doc in docs:
        if "shortcut_split" not in doc:
            continue
        cells: dict[str, Any] = {}
        for name, suite in [*SUITES.items(), ("gap", GAP)]:
            values = [run.get("metrics", {}).get(suite) for run in doc["runs"]]
            ok = values and all(v is not None for v in values)
            cells[name] = summarize([float(v) for v in values]) if ok else None
        rows.append({"name": doc.get("name"), "cells": cells, "test": tests.get(doc.get("name"))})
    return rows


def reliance_markdown(
    docs: Sequence[dict[str, Any]], comparison: dict[str, Any] | None = None
) -> str:
    """The reliance table in Markdown with :data:`MEANING` and the split's warnings; empty
    when no document has a shortcut split."""
    rows = reliance_table(docs, comparison)
    if not rows:
        return ""
    tested = comparison is not None and any(row["test"] for row in rows)
    header = ["Method", "aligned", "conflicting", "free", "gap (aligned − conflicting)"]
    header += ["Δ gap vs " + str(comparison["baseline"]), "p"] if tested else []
    lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
    for row in rows:
        cells = [format_cell(row["cells"][k]) for k in ("aligned", "conflicting", "free", "gap")]
        if tested:
            test = row["test"]
            if test:
                p = "–" if test["p"] is None else f"{test['p']:.4f}"
                cells += [f"{100 * test['difference']:+.2f}", p]
            else:
                cells += ["", ""]
        lines.append("| " + " | ".join([str(row["name"]), *cells]) + " |")
    split = next(doc["shortcut_split"] for doc in docs if "shortcut_split" in doc)
    counts = ", ".join(f"{k} {v:,}" for k, v in split["counts"].items())
    out = [
        f"Shortcut split {split['folder']} (by {split['by']}: {counts}); accuracy in %.",
        "",
        *lines,
        "",
        MEANING,
    ]
    out += [f"Warning: {line}" for line in split["warnings"]]
    return "\n".join(out)


__all__ = [
    "GAP",
    "MEANING",
    "SUITES",
    "add_reliance",
    "evaluate_with_split",
    "read_split",
    "reliance_markdown",
    "reliance_table",
    "run_reliance",
    "split_suites",
]
