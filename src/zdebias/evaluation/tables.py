"""Result tables shaped like GD-NLI Tables 2-5, as JSON-ready dicts and as Markdown.

A table has one row per results document (a method: one or more runs / seeds) and one column
per suite; cells are accuracy in percent, ``mean±std`` when there are several runs (Tables 2-4).
``average=True`` adds an ``Avg.`` column (Table 5: the Liu et al. categories), averaged per run
and then over runs. Grouped suites (HANS) get a heuristic × gold-label table.

Cells print through :mod:`zdebias.evaluation.cells`, as in the HTML report and the terminal
summary. Tables only read saved results documents; they never import training code.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from zdebias.evaluation.cells import SIGNIFICANT as SIGNIFICANT  # re-exported, as before
from zdebias.evaluation.cells import format_cell, format_percent
from zdebias.evaluation.metrics import (
    label_table,
    markdown_table,
    overall_markdown,
    per_label_markdown,
)
from zdebias.evaluation.suites import summarize


def suite_names(docs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Top-level suite names across documents, in first-seen order."""
    seen: dict[str, None] = {}
    for doc in docs:
        for suite in doc.get("suites", []):
            seen.setdefault(suite["name"], None)
    return list(seen)


def _run_values(doc: Mapping[str, Any], key: str) -> list[float] | None:
    values = [run["metrics"].get(key) for run in doc.get("runs", [])]
    if not values or any(v is None for v in values):
        return None
    return [float(v) for v in values]


def summary_table(
    docs: Sequence[Mapping[str, Any]],
    *,
    columns: Sequence[str] | None = None,
    average: bool = False,
    comparison: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Rows = documents, columns = suites; each cell ``{mean, std, n_runs}`` (fractions) or
    ``None`` where a document lacks the suite. ``comparison`` (from
    :func:`zdebias.evaluation.significance.compare_results`) adds ``significant`` flags."""
    cols = list(columns) if columns is not None else suite_names(docs)
    tests: dict[int, dict[str, Any]] = {}
    if comparison is not None:
        for i, item in enumerate(comparison.get("comparisons", []), start=1):
            tests[i] = item.get("tests", {})
    rows = []
    for i, doc in enumerate(docs):
        cells: dict[str, Any] = {}
        for col in cols:
            values = _run_values(doc, col)
            cell = summarize(values) if values else None
            if cell is not None and col in tests.get(i, {}):
                cell["significant"] = bool(tests[i][col].get("significant"))
            cells[col] = cell
        row: dict[str, Any] = {
            "name": doc.get("name", f"run {i}"),
            "n_runs": len(doc.get("runs", [])),
            "cells": cells,
        }
        unlearned = sum(bool(run.get("did_not_learn")) for run in doc.get("runs", []))
        if unlearned:  # kept in the means (what was measured), said under the tables
            row["did_not_learn"] = unlearned
        poor = outlier_runs(doc.get("runs", []))
        if poor:  # flagged beside the name and under the tables, kept in the means
            row["outliers"] = poor
        if average:
            per_run = [v for col in cols if (v := _run_values(doc, col)) is not None]
            if cols and len(per_run) == len(cols):
                n = len(per_run[0])
                avg = [sum(v[r] for v in per_run) / len(cols) for r in range(n)]
                row["average"] = summarize(avg)
                if "Avg." in tests.get(i, {}):
                    row["average"]["significant"] = bool(tests[i]["Avg."].get("significant"))
            else:
                row["average"] = None
        rows.append(row)
    return {"columns": cols, "average": average, "rows": rows}


def table_markdown(table: dict[str, Any], *, first: str = "Method") -> str:
    """The summary table as a Markdown pipe table."""
    header = [first, *table["columns"]] + (["Avg."] if table.get("average") else [])
    body = []
    for row in table["rows"]:
        cells = [format_cell(row["cells"].get(c)) for c in table["columns"]]
        if table.get("average"):
            cells.append(format_cell(row.get("average")))
        name = str(row["name"])
        if row.get("outliers"):
            name += " ⚠ " + ", ".join(f"seed {o['seed']}" for o in row["outliers"])
        body.append([name, *cells])
    return markdown_table(header, body)


#: a seed whose best dev accuracy lies this many points below its siblings' median is flagged
OUTLIER_POINTS = 5.0


def outlier_runs(
    runs: Sequence[Mapping[str, Any]], points: float = OUTLIER_POINTS
) -> list[dict[str, Any]]:
    """Runs that trained far worse than their siblings: best dev accuracy more than ``points``
    below the median of the other runs' (leave-one-out, so one bad seed of three is found;
    two or more others needed). Each: ``seed``, ``model``, ``dev``, ``median``."""
    devs = [run.get("best_dev_accuracy") for run in runs]
    out = []
    for i, run in enumerate(runs):
        rest = [d for j, d in enumerate(devs) if j != i and d is not None]
        if devs[i] is None or len(rest) < 2:
            continue
        median = statistics.median(rest)
        if 100 * (median - devs[i]) > points:
            seed, model = run.get("seed"), run.get("model")
            out.append({"seed": seed, "model": model, "dev": devs[i], "median": median})
    return out


def unlearned_lines(table: dict[str, Any]) -> list[str]:
    """One line per method of a summary table some of whose runs did not learn (they stay in
    its means: the numbers are what was measured)."""
    lines = [
        f"{row['name']}: {row['did_not_learn']} of {row['n_runs']} "
        f"run{'' if row['n_runs'] == 1 else 's'} did not learn (kept in the means)"
        for row in table["rows"]
        if row.get("did_not_learn")
    ]
    for row in table["rows"]:
        for o in row.get("outliers", []):
            lines.append(
                f"{row['name']}: seed {o['seed']} reached {100 * o['dev']:.1f} % best dev "
                f"accuracy against {100 * o['median']:.1f} % for its other seeds (median): an "
                "outlier, kept in the means; see docs/classify.md, 'A seed that trains poorly'"
            )
    return lines


def group_table(doc: Mapping[str, Any], suite: str) -> dict[str, Any] | None:
    """Heuristic × gold label (plus ``all``) for a grouped suite (HANS), mean ± std over runs;
    counts ``n`` and ``n_correct`` per cell for each run. None if the suite has no groups."""
    runs = doc.get("runs", [])
    groups = [run["results"].get(suite, {}).get("groups") for run in runs]
    if not runs or any(g is None for g in groups):
        return None
    first = groups[0]
    labels: list[str] = []
    for cells in first.values():
        for key in cells:
            if key != "all" and key not in labels:
                labels.append(key)
    columns = [*labels, "all"]
    rows = []
    for heuristic in first:
        cells = {}
        for col in columns:
            values = [g[heuristic][col]["accuracy"] for g in groups if col in g.get(heuristic, {})]
            counts = [
                {"n": g[heuristic][col]["n"], "n_correct": g[heuristic][col]["n_correct"]}
                for g in groups
                if col in g.get(heuristic, {})
            ]
            cells[col] = (
                {**summarize(values), "counts": counts} if len(values) == len(groups) else None
            )
        rows.append({"name": heuristic, "cells": cells})
    overall = summarize([run["metrics"][suite] for run in runs])
    return {"suite": suite, "columns": columns, "rows": rows, "overall": overall}


def group_markdown(table: dict[str, Any]) -> str:
    """The heuristic table as Markdown; with one run each cell also shows ``correct/n``."""
    body = []
    for row in table["rows"]:
        cells = []
        for col in table["columns"]:
            cell = row["cells"].get(col)
            text = format_cell(cell)
            if cell is not None and len(cell["counts"]) == 1:
                count = cell["counts"][0]
                text += f" ({count['n_correct']}/{count['n']})"
            cells.append(text)
        body.append([row["name"], *cells])
    body.append(
        [
            f"**{table['suite']} overall**",
            *[""] * (len(table["columns"]) - 1),
            format_cell(table["overall"]),
        ]
    )
    return markdown_table(["heuristic", *table["columns"]], body)


def runs_markdown(doc: Mapping[str, Any]) -> str:
    """One row per run (model, seed) with its accuracy on each suite."""
    cols = [s["name"] for s in doc.get("suites", [])]
    body = []
    for run in doc.get("runs", []):
        seed = run.get("seed")
        body.append(
            [
                str(run["model"]),
                "" if seed is None else str(seed),
                *[format_percent(run["metrics"].get(c)) for c in cols],
            ]
        )
    return markdown_table(["model", "seed", *cols], body)


def render_markdown(doc: Mapping[str, Any], *, average: bool = False) -> str:
    """The Markdown report of one results document: summary, macro-F1 / balanced accuracy
    and per-label tables, heuristic tables, runs."""
    parts = [
        f"## {doc.get('name', 'results')}",
        "",
        table_markdown(summary_table([doc], average=average)),
        "",
    ]
    labels = label_table(doc)
    if labels is not None:  # imbalanced sets: accuracy alone hides a label the model misses
        parts += ["### macro-F1 and balanced accuracy", "", overall_markdown(labels), ""]
        parts += ["### per gold label", "", per_label_markdown(labels), ""]
    for suite in suite_names([doc]):
        table = group_table(doc, suite)
        if table is not None:
            parts += [f"### {suite} by heuristic and gold label", "", group_markdown(table), ""]
    if len(doc.get("runs", [])) > 1:
        parts += ["### runs", "", runs_markdown(doc), ""]
    unlearned = [run for run in doc.get("runs", []) if run.get("did_not_learn")]
    if unlearned:
        parts += [
            "Runs that did not learn (kept in the means above):",
            "",
            *[f"- {run['model']}: {run['did_not_learn']}" for run in unlearned],
            "",
        ]
    poor = outlier_runs(doc.get("runs", []))
    if poor:
        parts += [
            "Runs whose best dev accuracy is an outlier among their seeds (kept in the means):",
            "",
            *[
                f"- {o['model']}: {100 * o['dev']:.1f} % against the others' median "
                f"{100 * o['median']:.1f} %"
                for o in poor
            ],
            "",
        ]
    if "shortcut_split" in doc:
        from zdebias.evaluation.reliance import reliance_markdown

        parts += ["### reliance on shortcuts", "", reliance_markdown([doc]), ""]
    parts.append("Accuracy in %; mean±std (sample std) over runs.")
    if labels is not None:
        parts[-1] += (
            " F1 and precision in % too. Per-label accuracy is the label's recall; balanced "
            "accuracy their mean; macro-F1 the mean F1 over the set's gold labels."
        )
    return "\n".join(parts) + "\n"
