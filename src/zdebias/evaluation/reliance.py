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

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from zdebias.data.documents import checked, read_document
from zdebias.errors import ConfigError
from zdebias.evaluation.cells import format_cell
from zdebias.evaluation.suites import Suite, load_suite, summarize
from zdebias.stats.shortcut_split import rows_digest

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


_Count = Annotated[StrictInt, Field(ge=0)]


class _Counts(BaseModel):
    aligned: _Count
    conflicting: _Count
    free: _Count


class _Digests(BaseModel):
    aligned: str
    conflicting: str
    free: str


class _SplitSummary(BaseModel):
    """The fields of a split's ``summary.json`` that evaluate reads (others pass through)."""

    model_config = ConfigDict(extra="allow")
    counts: _Counts
    n_test: _Count | None = None
    test_digest: str | None = None
    digests: _Digests | None = None
    by: str | None = None
    test: str | None = None
    warnings: list[str] = []


def read_split(folder: str | Path) -> dict[str, Any]:
    """The ``summary.json`` of a shortcut-split folder (or that file itself), checked: one
    :class:`ConfigError` line for a missing, unreadable or foreign summary, or one whose
    counts do not add up."""
    path = Path(folder)
    if path.is_file():
        path = path.parent
    file = path / "summary.json"
    missing = f"{path}: not a shortcut split (no summary.json; run zdebias shortcut-split)"
    summary = read_document(file, missing=missing)  # a key given twice is refused there
    split = checked(summary, _SplitSummary, file, what="a shortcut split's summary")
    total = sum(split.counts.model_dump().values())
    if split.n_test is not None and total != split.n_test:
        raise ConfigError(
            f"{file}: field 'counts': the slices hold {total:,} rows, but n_test says "
            f"{split.n_test:,}; not a shortcut split's summary"
        )
    return {**summary, "folder": str(path)}


def _short(digest: str) -> str:
    return digest[:12]


def check_split(
    split: dict[str, Any], suites: Sequence[Suite], *, task: str | None = None
) -> dict[str, Any]:
    """Check that ``split`` (:func:`read_split`) grades the rows it was made with: each slice
    file holds as many rows as ``summary.json`` counts, with the recorded row digest
    (:func:`~zdebias.stats.shortcut_split.rows_digest`); a mismatch is a
    :class:`ConfigError` naming the file. Returns ``{"suite", "warnings"}``: the suite whose
    rows are the split's test set (None when none is), and what could not be checked or
    does not match. A summary without digests (an older split) has only its counts checked
    and says so in a warning; a suite that reads the file the split was made from, with
    other rows, is an error."""
    folder = Path(split["folder"])
    summary = folder / "summary.json"
    digests = split.get("digests") or {}
    warnings: list[str] = []
    for name, suite in SUITES.items():
        count = split["counts"][name]
        file = folder / f"{name}.jsonl"
        if not file.exists():
            if count:
                raise ConfigError(f"{file}: missing; {summary} counts {count:,} {name} rows")
            continue
        records, _info = load_suite(Suite(suite, str(file), format="jsonl", task=task), empty=True)
        if len(records) != count:
            raise ConfigError(
                f"{file}: {len(records):,} labelled rows, but {summary} records {count:,} "
                f"{name} rows: the file changed after the split was made; restore it or "
                "remake the split (zdebias shortcut-split)"
            )
        got = rows_digest(records)
        if name in digests and got != digests[name]:
            raise ConfigError(
                f"{file}: its {count:,} rows are not the {name} rows the split wrote (row "
                f"digest {_short(got)}, {summary} records {_short(digests[name])}); restore "
                "it or remake the split (zdebias shortcut-split)"
            )
    want = split.get("test_digest")
    test = split.get("test") or "its test set"
    n_test = split.get("n_test", sum(split["counts"].values()))
    if not want or not digests:
        warnings.append(
            f"{summary} records no row digests (a split made before splits recorded them): "
            "only its slices' row counts are checked, not their rows nor which suite it "
            "splits; remake it with zdebias shortcut-split"
        )
        return {"suite": None, "warnings": warnings}
    seen = []
    for s in suites:
        records, _info = load_suite(s)
        got = rows_digest(records)
        if got == want:
            return {"suite": s.name, "warnings": warnings}
        whole = not (s.where or s.limit)  # a selection of the file is not the file
        if whole and split.get("test") and _same_input(s.path, split["test"]):
            raise ConfigError(
                f"suite {s.name!r} ({s.path}) reads the file the split was made from, but not "
                f"its rows: {len(records):,} rows now, {n_test:,} then (row digest "
                f"{_short(got)}, {summary} records {_short(want)}); remake the split "
                "(zdebias shortcut-split)"
            )
        seen.append(f"{s.name} {len(records):,} rows")
    warnings.append(
        f"no suite here is the test set the split was made from ({test}, {n_test:,} rows; "
        f"the suites: {', '.join(seen) or 'none'}): the reliance gap is measured on the "
        "split's own rows, not on any suite here"
    )
    return {"suite": None, "warnings": warnings}


def _same_input(a: str, b: str) -> bool:
    """Whether two input paths name the same file (as written, or resolved)."""
    if a == b:
        return True
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError):
        return False


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
    found = check_split(split, suites, task=task)  # before any model loads
    split = {**split, "suite": found["suite"]}
    split["warnings"] = [*split.get("warnings", []), *found["warnings"]]
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
        "suite": split.get("suite"),
        "test_digest": split.get("test_digest"),
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
    header += ["Δ gap vs " + str(comparison["baseline"]), "p", "p (Holm)"] if tested else []
    lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
    for row in rows:
        cells = [format_cell(row["cells"][k]) for k in ("aligned", "conflicting", "free", "gap")]
        if tested:
            test = row["test"]
            if test:
                p = "–" if test["p"] is None else f"{test['p']:.4f}"
                holm = "–" if test.get("p_holm") is None else f"{test['p_holm']:.4f}"
                holm += "*" if test.get("significant") and test.get("p_holm") is not None else ""
                cells += [f"{100 * test['difference']:+.2f}", p, holm]
            else:
                cells += ["", "", ""]
        lines.append("| " + " | ".join([str(row["name"]), *cells]) + " |")
    split = next(doc["shortcut_split"] for doc in docs if "shortcut_split" in doc)
    counts = ", ".join(f"{k} {v:,}" for k, v in split["counts"].items())
    of = f" of suite {split['suite']!r}" if split.get("suite") else ""
    out = [
        f"Shortcut split {split['folder']}{of} (by {split['by']}: {counts}); accuracy in %.",
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
    "check_split",
    "evaluate_with_split",
    "read_split",
    "reliance_markdown",
    "reliance_table",
    "run_reliance",
    "split_suites",
]
