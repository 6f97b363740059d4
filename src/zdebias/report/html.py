"""One self-contained HTML report of a run, built only from the run's saved JSON.

It reads ``manifest.json`` and the JSON outputs the stages saved (``stats.json``,
``artifacts.json``, filter and sampling summaries, ``results.json``, ``examples.json``); it
never imports training code. Figures are PNGs embedded as ``data:`` URIs, so the file can be
mailed or opened offline. This module computes and formats what the report shows
(:func:`report_context`, numbers through :mod:`zdebias.evaluation.cells`); the page layout is
the jinja2 template ``zdebias/resources/report.html.j2``.

Sections (when the run has the stages they need):

- planted artifacts found and gone (runs on the built-in demo corpus); on other data, the
  tracked features (``track:`` of the stats stages) before and after;
- Gardner plots before and after debiasing;
- top biased features per label before and after (GD-NLI Table 12 shape);
- dataset sizes (Table 1 shape);
- data maps of the classifiers trained (dataset cartography: each train-classifier stage's
  first seed, from its ``training_dynamics.jsonl``);
- shortcut-breaking cells of targeted sampling: asked, generated, written, accepted by each
  judge, rule-made pairs, the feature's z before → after (:mod:`zdebias.report.cells`);
- evaluation tables (Tables 2-5 shape, plus HANS-style group tables);
- generated and counterfactual examples (Table 14 shape);
- the stages: status, time, rows in and out.

>>> write_report("runs/demo")          # doctest: +SKIP
PosixPath('runs/demo/report.html')
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup
from pydantic import BaseModel, ConfigDict

from zdebias.data.documents import checked, read_document
from zdebias.data.writers import atomic_open
from zdebias.evaluation.cells import MISSING, format_cell, format_number
from zdebias.evaluation.tables import unlearned_lines
from zdebias.pipeline.run_folder import MANIFEST
from zdebias.report.cells import cell_rows
from zdebias.report.text import artifact_lines, prior_lines

REPORT = "report.html"
#: The page layout, in ``zdebias/resources``; this module computes what it shows.
TEMPLATE = "report.html.j2"

#: How the sizes table names each kind of stage output (GD-NLI Table 1 wording), by
#: (stage kind, output); a stage's kind is None where its record lacks one.
_SIZE_NAMES: dict[tuple[str | None, str], str] = {
    ("filter", "kept"): "Z(D) — z-filtered",
    ("filter", "rejected"): "Z⁻(D) — rejected by z-filtering",
    ("sample", "samples"): "D_G* — generated samples",
    ("confidence-filter", "kept"): "D̂_G* — confident generated samples",
    ("confidence-filter", "rejected"): "rejected by the confidence filter",
    ("counterfactual-generate", "kept"): "counterfactuals (post-selected)",
    ("counterfactual-rationales", "kept"): "examples with rationales",
}
_RECIPE_NAMES = {
    "z-aug": "Z-Aug  Z(D̂_G* | D0)",
    "par-z": "Par-Z  Z(D0) ∪ Z(D̂_G*)",
    "seq-z": "Seq-Z  Z(D̂_G* | Z(D0))",
}


@dataclass
class RunData:
    """A run folder's manifest and the saved JSON of its stages."""

    run_dir: Path
    manifest: dict[str, Any]
    stages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def config(self) -> dict[str, Any]:
        return self.manifest.get("config", {})

    def stage(self, name: str) -> dict[str, Any] | None:
        return next((s for s in self.stages if s["name"] == name), None)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [s for s in self.stages if s.get("stage") == kind and s.get("outputs")]

    def output(self, stage: dict[str, Any], name: str) -> Path | None:
        info = (stage.get("outputs") or {}).get(name)
        return self.run_dir / info["path"] if info else None

    def json_output(self, stage: dict[str, Any], name: str) -> Any:
        path = self.output(stage, name)
        if path is None or not path.is_file():
            return None
        return read_document(path, missing=f"{path}: no such file")

    def side_json(self, stage: dict[str, Any], filename: str) -> Any:
        """A JSON file a stage saved beside its outputs (e.g. ``examples.json``)."""
        path = self.run_dir / stage["name"] / filename
        if not path.is_file():
            return None
        return read_document(path, missing=f"{path}: no such file")


class _Output(BaseModel):
    model_config = ConfigDict(extra="allow")
    path: str


class _StageEntry(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    stage: str
    outputs: dict[str, _Output | None] | None = None


class _Versions(BaseModel):
    model_config = ConfigDict(extra="allow")
    zdebias: str


class _Manifest(BaseModel):
    """What makes a ``manifest.json`` zdebias's (``zdebias run`` writes it): the recipe's
    name, the zdebias version and the stages; the report reads no more of it unchecked."""

    model_config = ConfigDict(extra="allow")
    name: str
    versions: _Versions
    stages: list[_StageEntry]
    config: dict[str, Any] = {}


def load_run(run_dir: str | Path) -> RunData:
    """Read a run folder's manifest (fails clearly when the folder is not a run, or its
    manifest.json is not one zdebias wrote)."""
    run = Path(run_dir)
    missing = f"{run}: not a zdebias run folder (no {MANIFEST}); run a recipe first"
    manifest = read_document(run / MANIFEST, missing=missing)
    what = "a zdebias run manifest (zdebias run writes one)"
    checked(manifest, _Manifest, run / MANIFEST, what=what)
    return RunData(run, manifest, list(manifest.get("stages", [])))


# --------------------------------------------------------------------------- data


def before_after(run: RunData) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The stats stages the report compares: the recipe's ``report.before/after``, else the
    first and last ``stats`` stages."""
    stats = run.of_kind("stats")
    settings = run.config.get("report") or {}
    before = run.stage(settings["before"]) if settings.get("before") else None
    after = run.stage(settings["after"]) if settings.get("after") else None
    if before is None and stats:
        before = stats[0]
    if after is None and len(stats) > 1:
        after = stats[-1]
    if after is before:
        after = None
    return before, after


def artifact_summary(run: RunData) -> list[dict[str, Any]] | None:
    """For a run on the demo corpus: each planted artifact's z before and after, and whether
    it was found (significant before) and is gone (not significant after)."""
    demo = run.of_kind("demo-data")
    if not demo:
        return None
    artifacts = run.json_output(demo[0], "artifacts") or {}
    before, after = before_after(run)
    if before is None:
        return None
    sb = run.json_output(before, "stats") if before else None
    sa = run.json_output(after, "stats") if after else None
    rows = []
    for item in artifacts.get("planted", []):
        feature, label = item["feature"], item["label"]
        row: dict[str, Any] = {
            "feature": feature,
            "label": label,
            "description": item.get("description", ""),
        }
        for side, stats in (("before", sb), ("after", sa)):
            if stats is None:
                row[side] = None
                continue
            cell = _feature_stats(stats, feature, label)
            if cell is not None:
                cell["significant"] = cell["z"] > stats["z_critical"]
                cell["z_critical"] = stats["z_critical"]
            row[side] = cell
        b, a = row.get("before"), row.get("after")
        row["found"] = bool(b and b["significant"])
        row["gone"] = bool(sa is not None and (a is None or not a["significant"]))
        rows.append(row)
    return rows


def tracked_summary(run: RunData) -> list[dict[str, Any]] | None:
    """For any run whose stats stages track features (``track:``): each tracked feature at
    the label it favours most before, with its z, n and rank before and after, and whether it
    was significant before and is no longer after (the shape of :func:`artifact_summary`)."""
    before, after = before_after(run)
    sb = run.json_output(before, "stats") if before else None
    if not sb or not sb.get("tracked"):
        return None
    sa = run.json_output(after, "stats") if after else None
    rows = []
    for feature, cells in sb["tracked"].items():
        if not cells:
            continue
        label = max(cells, key=lambda lab: cells[lab]["z"])
        row: dict[str, Any] = {"feature": feature, "label": label, "description": ""}
        for side, stats in (("before", sb), ("after", sa)):
            cell = _feature_stats(stats, feature, label) if stats else None
            if cell is not None:
                cell["significant"] = cell["z"] > stats["z_critical"]  # type: ignore[index]
                cell["z_critical"] = stats["z_critical"]  # type: ignore[index]
            row[side] = cell
        b, a = row["before"], row["after"]
        row["found"] = bool(b and b["significant"])
        row["gone"] = bool(sa is not None and (a is None or not a["significant"]))
        rows.append(row)
    return rows or None


def _feature_stats(stats: dict[str, Any], feature: str, label: str) -> dict[str, Any] | None:
    tracked = (stats.get("tracked") or {}).get(feature)
    if tracked and label in tracked:
        return dict(tracked[label])
    for rank, row in enumerate(stats.get("top", {}).get(label, []), start=1):
        if row["feature"] == feature:
            return {"z": row["z"], "n": row["n"], "p": row["p"], "rank": rank}
    return None


def sizes_rows(run: RunData) -> list[dict[str, Any]]:
    """Rows of the sizes table: a description, the stage and the number of records."""
    rows: list[dict[str, Any]] = []
    data_counted: set[str] = set()
    config_stages = run.config.get("stages", {})
    for stage in run.stages:
        kind, outs = stage.get("stage"), stage.get("rows_out") or {}
        if kind == "demo-data":
            names = {
                "train": "Original D0 (demo train, planted artifacts)",
                "dev": "demo dev (planted artifacts)",
                "test": "demo test (artifact-free)",
                "test_hard": "demo test, hard: an artifact points to another label",
                "test_easy": "demo test, easy: an artifact points to the gold label",
            }
            for split, what in names.items():
                if split in outs:
                    rows.append({"what": what, "stage": stage["name"], "n": outs[split]})
            continue
        settings = config_stages.get(stage["name"], {})
        for key, n in (stage.get("rows_in") or {}).items():
            ref = settings.get(key)
            if (
                isinstance(ref, str)
                and ref in run.config.get("data", {})
                and ref not in data_counted
            ):
                data_counted.add(ref)
                rows.append({"what": f"dataset {ref}", "stage": stage["name"], "n": n})
        if kind == "combine":
            recipe = settings.get("recipe", "")
            parts = ", ".join(f"{k} {v:,}" for k, v in outs.items() if k != "total")
            rows.append(
                {
                    "what": _RECIPE_NAMES.get(recipe, recipe),
                    "stage": stage["name"],
                    "n": outs.get("total"),
                    "detail": parts,
                }
            )
            continue
        for key, n in outs.items():
            what = _SIZE_NAMES.get((kind, key), f"{kind}: {key}")
            rows.append({"what": what, "stage": stage["name"], "n": n})
    return rows


# --------------------------------------------------------------------------- sections


def label_colour(label: str) -> str:
    """A label's colour: the one the Gardner plots give it (its index in its task's labels)."""
    from zdebias.data.labels import TASKS
    from zdebias.report.plots import COLORS

    for task in TASKS.values():
        if label in task.labels:
            return COLORS[task.labels.index(label) % len(COLORS)]
    return COLORS[-1]


def gardner_image(stats: dict[str, Any], title: str) -> bytes | None:
    """PNG of the Gardner plot of a saved ``stats.json`` (drawn by :mod:`zdebias.report.plots`)."""
    import tempfile

    import numpy as np

    from zdebias.report.plots import gardner_plot, prior_of

    g = stats.get("gardner")
    if not g or not g.get("features"):
        return None
    labels = stats["labels"]
    z = np.array([g["z"][lab] for lab in labels], dtype=np.float64).T
    p = np.array([g["p"][lab] for lab in labels], dtype=np.float64).T
    n = np.asarray(g["n"], dtype=np.int64)
    with tempfile.TemporaryDirectory(prefix="zdebias-report-") as tmp:
        png = Path(tmp) / "gardner.png"
        gardner_plot(
            g["features"],
            labels,
            z,
            n,
            p,
            z_c=stats["z_critical"],
            png=png,
            min_n=int(g.get("min_n", 20)),
            title=title,
            p0=prior_of(stats),
        )
        return png.read_bytes()


def _z(value: float) -> str:
    return format_number(value, digits=1, thousands="")


def _artifacts_section(
    rows: list[dict[str, Any]] | None, found: tuple[str, str] = ("found", "not found")
) -> dict[str, Any] | None:
    """Planted (or tracked) features: z, n and rank before and after, and the verdicts;
    ``found``: how to say significant before / not."""
    if not rows:
        return None

    def side(c: dict[str, Any] | None) -> list[str]:
        if c is None:
            return [MISSING, MISSING, MISSING]
        return [_z(c["z"]), format_number(c["n"]), f"#{c['rank']}" if "rank" in c else MISSING]

    body = []
    for r in rows:
        a = r.get("after")
        verdict = [("ok", found[0]) if r["found"] else ("bad", found[1])]
        if a is not None or r["gone"]:
            verdict.append(("ok", "gone") if r["gone"] else ("bad", "still significant"))
        body.append(
            {
                "feature": r["feature"],
                "label": r["label"],
                "description": r["description"],
                "numbers": side(r.get("before")) + side(a),
                "verdict": verdict,
            }
        )
    zc = next((r["before"]["z_critical"] for r in rows if r.get("before")), None)
    zca = next((r["after"]["z_critical"] for r in rows if r.get("after")), None)
    return {
        "rows": body,
        "z_critical": format_number(zc, digits=2),
        "z_critical_after": format_number(zca, digits=2),
    }


def _gardner_section(run: RunData) -> list[dict[str, Any]]:
    """The Gardner plots before and after, as base64 PNGs with their caption numbers."""
    before, after = before_after(run)
    figures = []
    for stage, caption in ((before, "before"), (after, "after")):
        if stage is None:
            continue
        stats = run.json_output(stage, "stats")
        if not stats:
            continue
        png = gardner_image(stats, f"{caption} ({stage['name']}, {stats['n_examples']:,} ex.)")
        if png is None:
            continue
        figures.append(
            {
                "caption": caption,
                "stage": stage["name"],
                "png": base64.b64encode(png).decode("ascii"),
                "n_examples": format_number(stats["n_examples"]),
                "n_significant": format_number(stats["n_significant"]),
                "n_features": format_number(stats["n_features"]),
                "z_critical": format_number(stats["z_critical"], digits=2, thousands=""),
                "min_n": stats["gardner"].get("min_n", 20),
                "prior_lines": prior_lines(stats),
                "artifact_lines": artifact_lines(stats.get("artifact_model")),
            }
        )
    return figures


def _data_map_section(run: RunData) -> list[dict[str, Any]]:
    """The data map of each train-classifier stage that recorded training dynamics."""
    import tempfile

    from zdebias.report.plots import data_map_plot
    from zdebias.stats.dynamics import DYNAMICS_FILE, read_dynamics

    figures = []
    for stage in run.of_kind("train-classifier"):
        folder = run.output(stage, "model")
        if folder is None or not (folder / DYNAMICS_FILE).is_file():
            continue
        dyn = read_dynamics(folder)
        if dyn.n_epochs < 2:  # one epoch: no variability, no map
            continue
        with tempfile.TemporaryDirectory(prefix="zdebias-report-") as tmp:
            png = Path(tmp) / "data_map.png"
            drawn = data_map_plot(
                dyn.confidence, dyn.variability, dyn.correctness, png=png, title=stage["name"]
            )
            data = png.read_bytes()
        figures.append(
            {
                "stage": stage["name"],
                "png": base64.b64encode(data).decode("ascii"),
                "n_examples": format_number(drawn.summary["n_examples"]),
                "n_plotted": format_number(drawn.summary["n_plotted"]),
                "epochs": dyn.n_epochs,
            }
        )
    return figures


def _top_section(run: RunData, top_n: int) -> dict[str, Any] | None:
    """The top ``top_n`` features per label before (and after): one row per rank."""
    before, after = before_after(run)
    sb = run.json_output(before, "stats") if before else None
    sa = run.json_output(after, "stats") if after else None
    if sb is None or before is None:
        return None
    stages = [before["name"]] + ([after["name"]] if sa is not None and after else [])
    rows = []
    for label in sb["labels"]:
        sides = [sb["top"].get(label, [])[:top_n]]
        if sa is not None:
            sides.append(sa["top"].get(label, [])[:top_n])
        for i in range(max(len(side) for side in sides)):
            cells = [
                {
                    "feature": side[i]["feature"] + (" (kept)" if side[i].get("kept") else ""),
                    "z": _z(side[i]["z"]),
                    "n": format_number(side[i]["n"]),
                    "p": format_number(side[i]["p"], digits=2, thousands=""),
                }
                if i < len(side)
                else None
                for side in sides
            ]
            rows.append({"label": label if i == 0 else None, "sides": cells})
    return {"top_n": top_n, "stages": stages, "rows": rows}


def _significance_section(run: RunData) -> list[dict[str, Any]]:
    """Per stats stage (two or more): what it measured, its examples, significant features
    (all and per label) and the highest z: the datasets of a run side by side."""
    rows = []
    for stage in run.of_kind("stats"):
        stats = run.json_output(stage, "stats")
        if not stats:
            continue
        per_label = stats.get("n_significant_per_label") or {}
        rows.append(
            {
                "stage": stage["name"],
                "input": (run.config.get("stages", {}).get(stage["name"]) or {}).get("input"),
                "n": format_number(stats["n_examples"]),
                "significant": format_number(stats["n_significant"]),
                "per_label": ", ".join(f"{k} {format_number(v)}" for k, v in per_label.items()),
                "z_critical": format_number(stats["z_critical"], digits=2, thousands=""),
                "max_z": _z(max(stats["max_z"].values())) if stats.get("max_z") else MISSING,
            }
        )
    return rows if len(rows) > 1 else []


def _sizes_section(run: RunData) -> list[dict[str, Any]]:
    """:func:`sizes_rows` with the counts formatted."""
    return [{**r, "n": format_number(r["n"]), "detail": r.get("detail")} for r in sizes_rows(run)]


def _cells_section(run: RunData) -> list[dict[str, Any]]:
    """Per targeted sample stage: a row per shortcut-breaking cell, formatted
    (:func:`zdebias.report.cells.cell_rows`)."""
    before, after = before_after(run)
    tables = cell_rows(run.of_kind, run.json_output, run.config.get("stages") or {}, before, after)
    for table in tables:
        table["before"] = before["name"] if before else None
        table["after"] = after["name"] if after else None
        for row in table["rows"]:
            row["accepted_text"] = [f"{a['kept']}/{a['n']}" for a in row["accepted"].values()]
            row["z_text"] = " → ".join(
                MISSING if z is None else _z(z["z"]) + ("*" if z["significant"] else "")
                for z in (row["z_before"], row["z_after"])
            )
    return tables


def _cell(cell: dict[str, Any] | None) -> dict[str, Any]:
    """An evaluation cell: its text and whether to underline it (significant)."""
    return {
        "text": format_cell(cell, mark=""),
        "significant": bool(cell and cell.get("significant")),
    }


def _reliance(results: dict[str, Any]) -> dict[str, Any]:
    """The reliance table of an evaluate stage with a shortcut split (empty when none): per
    method, accuracy on aligned, conflicting and free rows and the gap, and what it means;
    the same keys, empty, for a stage without one."""
    from zdebias.evaluation.reliance import (
        COLUMNS,
        HEADERS,
        groups_table,
        reliance_notes,
        shortcuts_table,
    )

    table = results.get("reliance")
    empty: dict[str, Any] = {
        "reliance_groups": None,
        "reliance_shortcuts": None,
        "reliance_notes": [],
    }
    if not table:
        return {"reliance": [], "reliance_meaning": "", "reliance_warnings": [], **empty}
    docs = results.get("documents", [])
    split: dict[str, Any] = next((d["shortcut_split"] for d in docs if "shortcut_split" in d), {})
    groups = groups_table(docs)
    cuts = shortcuts_table(docs)
    return {
        # worst group and conflicting first, the gap beside its two parts
        "reliance_header": ["Method", *[HEADERS[k] for k in COLUMNS]],
        "reliance": [
            {"name": row["name"], "cells": [_cell(row["cells"].get(k)) for k in COLUMNS]}
            for row in table
        ],
        "reliance_meaning": split.get("meaning", ""),
        "reliance_warnings": split.get("warnings", []),
        "reliance_notes": reliance_notes(table) if any("aligned_loss" in r for r in table) else [],
        "reliance_groups": None
        if groups is None
        else {
            "header": ["gold × verdict", "slice", "n", *groups["methods"]],
            "rows": [
                {
                    "cells": [r["name"], r["slice"], f"{r['n']:,}"],
                    "values": [format_cell(c, mark="") for c in r["cells"]],
                }
                for r in groups["rows"]
            ],
            "worst": groups["worst"],
        },
        "reliance_shortcuts": None
        if cuts is None
        else {
            "header": ["shortcut → label", "rows to gold", "rows elsewhere"]
            + [f"{m}: {side}" for m in cuts["methods"] for side in ("to gold", "elsewhere")],
            "rows": [
                {
                    "cells": [r["name"], f"{r['n_to_gold']:,}", f"{r['n_elsewhere']:,}"],
                    "values": [format_cell(c, mark="") for c in r["cells"]],
                }
                for r in cuts["rows"]
            ],
        },
    }


def _evaluation_section(run: RunData) -> list[dict[str, Any]]:
    """Per evaluate stage: the summary table, its bar chart, the macro-F1 / per-label tables
    and the heuristic (group) tables."""
    stages = []
    for stage in run.of_kind("evaluate"):
        results = run.json_output(stage, "results")
        if not results:
            continue
        stages.append(evaluation_tables(stage["name"], results))
    return stages


def _label_tables(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per results document with label metrics: accuracy, macro-F1 and balanced accuracy per
    suite, and per gold label its accuracy (recall), precision and F1 (formatted cells)."""
    from zdebias.evaluation.metrics import KEYS, label_table

    out = []
    for doc in docs:
        table = label_table(doc)
        if table is None:
            continue
        out.append(
            {
                "method": table["method"],
                "overall": [
                    {
                        "suite": s["suite"],
                        "cells": [
                            _cell(s[k]) for k in ("accuracy", "macro_f1", "balanced_accuracy")
                        ],
                    }
                    for s in table["suites"]
                ],
                "labels": [
                    {
                        "suite": s["suite"],
                        "label": lab["label"],
                        "n": format_number(lab["n"]),
                        "cells": [_cell(lab[k]) for k in KEYS],
                    }
                    for s in table["suites"]
                    for lab in s["labels"]
                ],
            }
        )
    return out


def evaluation_tables(name: str, results: dict[str, Any]) -> dict[str, Any]:
    """What the report shows of one evaluation (an evaluate stage's ``results.json``: its
    ``table``, ``groups`` and ``documents``): the summary table, its bar chart, the label
    metrics of each document and the heuristic tables."""
    from zdebias.report.plots import evaluation_bars

    table = results["table"]
    columns = list(table["columns"]) + (["Avg."] if table.get("average") else [])
    rows = []
    for row in table["rows"]:
        cells = [_cell(row["cells"].get(c)) for c in table["columns"]]
        if table.get("average"):
            cells.append(_cell(row.get("average")))
        rows.append({"name": row["name"], "n_runs": row.get("n_runs", 1), "cells": cells})
    groups = [
        {
            "method": g["method"],
            "suite": g["suite"],
            "columns": g["columns"],
            "rows": [
                {"name": r["name"], "cells": [_cell(r["cells"].get(c)) for c in g["columns"]]}
                for r in g["rows"]
            ],
        }
        for g in results.get("groups", [])
    ]
    png = evaluation_bars(table, title=name) if table["rows"] else None
    return {
        "name": name,
        "columns": columns,
        "rows": rows,
        "unlearned": unlearned_lines(table),
        # what the underline means (Holm, the tests used); None in results of older versions
        "legend": _legend((results.get("comparison") or {}).get("legend")),
        "labels": _label_tables(list(results.get("documents") or [])),
        "groups": groups,
        "png": base64.b64encode(png).decode("ascii") if png else None,
        **_reliance(results),
    }


def _legend(text: str | None) -> str | None:
    """A comparison's legend for the page, where the mark ``*`` is an underline."""
    if not text:
        return None
    return "Underlined: " + text[2:] if text.startswith("* ") else text


def _pair_text(row: dict[str, Any]) -> str:
    if row.get("premise") is not None:
        return f"{row['premise']} / {row.get('hypothesis', '')}"
    return str(row.get("text", ""))


def _examples_section(run: RunData, n: int) -> dict[str, Any] | None:
    """Up to ``n`` generated samples (of the last stage that has them) and counterfactuals."""
    if n <= 0:
        return None
    samples = None
    for kind in ("combine", "confidence-filter", "sample"):
        stages = run.of_kind(kind)
        if not stages:
            continue
        stage = stages[-1]
        examples = (run.side_json(stage, "examples.json") or {}).get("examples", [])[:n]
        if not examples:
            continue
        samples = {
            "stage": stage["name"],
            "rows": [
                {
                    "premise": x.get("premise", ""),
                    "label": x["label"],
                    "hypothesis": x.get("hypothesis", ""),
                }
                for x in examples
            ],
        }
        break
    counterfactuals = []
    for stage in run.of_kind("counterfactual-generate"):
        data = run.side_json(stage, "examples.json") or {}
        rows = []
        for item in data.get("counterfactuals", [])[:n]:
            orig, cf = item.get("original") or {}, item["counterfactual"]
            rows.append(
                {
                    "original": _pair_text(orig),
                    "label": orig.get("label", "?"),
                    "counterfactual": _pair_text(cf),
                    "target": cf["label"],
                }
            )
        if rows:
            counterfactuals.append({"stage": stage["name"], "rows": rows})
    if samples is None and not counterfactuals:
        return None
    return {"samples": samples, "counterfactuals": counterfactuals}


def _status_class(status: str) -> str:
    if status in ("done", "skipped"):
        return "ok"
    return "bad" if status in ("failed", "interrupted") else "muted"


def _stages_section(run: RunData) -> list[dict[str, Any]]:
    """One row per stage: kind, status, seconds, rows in and out, notes."""
    rows = []
    for s in run.stages:
        status = s.get("status", "?")
        rows.append(
            {
                "name": s["name"],
                "kind": s.get("stage", ""),
                "status": status,
                "status_class": _status_class(status),
                "resumed": bool(s.get("resumed")),
                "seconds": format_number(s.get("seconds")),
                "rows_in": ", ".join(f"{k} {v:,}" for k, v in (s.get("rows_in") or {}).items()),
                "rows_out": ", ".join(f"{k} {v:,}" for k, v in (s.get("rows_out") or {}).items()),
                "notes": list(s.get("notes") or []),
            }
        )
    return rows


def _header(run: RunData, title: str) -> dict[str, Any]:
    """The title block: status, task, seed, timing, versions and the resolved recipe."""
    m = run.manifest
    return {
        "title": title,
        "description": run.config.get("description") or None,
        "status": m.get("status", "?"),
        "done": sum(1 for s in run.stages if s.get("status") in ("done", "skipped")),
        "n_stages": len(run.stages),
        "task": m.get("task", "?"),
        "seed": m.get("seed", "?"),
        "seconds": format_number(m.get("seconds")),
        "finished": m.get("finished") or MISSING,
        "versions": ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items()),
        "recipe": json.dumps(run.config, indent=2),
    }


# --------------------------------------------------------------------------- rendering


def _escape(value: Any) -> Markup:
    """Escape as :func:`html.escape` does (``&quot;``, ``&#x27;``), as this report always has,
    so that reports stay byte-comparable; values already marked safe pass unchanged."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


@lru_cache(maxsize=4)
def load_template(name: str = TEMPLATE) -> jinja2.Template:
    """A packaged report template (``resources/NAME``), escaping as :func:`_escape`."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("zdebias", "resources"),
        autoescape=True,
        finalize=_escape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.globals["label_colour"] = label_colour
    return env.get_template(name)


def report_context(run: RunData) -> dict[str, Any]:
    """Everything the report template shows, computed and formatted (no HTML in it)."""
    settings = run.config.get("report") or {}
    title = settings.get("title") or f"zdebias run: {run.manifest.get('name', '?')}"
    return {
        "header": _header(run, title),
        "artifacts": _artifacts_section(artifact_summary(run)),
        "tracked": None
        if run.of_kind("demo-data")
        else _artifacts_section(tracked_summary(run), ("significant", "not significant")),
        "gardner": _gardner_section(run),
        "top": _top_section(run, int(settings.get("top_n", 5))),
        "sizes": _sizes_section(run),
        "significance": _significance_section(run),
        "data_maps": _data_map_section(run),
        "cells": _cells_section(run),
        "evaluation": _evaluation_section(run),
        "examples": _examples_section(run, int(settings.get("examples", 8))),
        "stages": _stages_section(run),
    }


def build_report(run_dir: str | Path) -> str:
    """The report of a run folder as one HTML string."""
    return load_template().render(report_context(load_run(run_dir)))


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the report (default ``RUN_DIR/report.html``) atomically; returns its path."""
    path = Path(out) if out is not None else Path(run_dir) / REPORT
    text = build_report(run_dir)
    with atomic_open(path) as fh:
        fh.write(text)
    return path
