"""One self-contained HTML report of a run, built only from the run's saved JSON.

It reads ``manifest.json`` and the JSON outputs the stages saved (``stats.json``,
``artifacts.json``, filter and sampling summaries, ``results.json``, ``examples.json``); it
never imports training code. Figures are PNGs embedded as ``data:`` URIs, so the file can be
mailed or opened offline.

Sections (when the run has the stages they need):

- planted artifacts found and gone (runs on the built-in demo corpus);
- Gardner plots before and after debiasing;
- top biased features per label before and after (GD-NLI Table 12 shape);
- dataset sizes (Table 1 shape);
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
from pathlib import Path
from typing import Any

from zdebias.data.writers import atomic_open
from zdebias.errors import ConfigError

MANIFEST = "manifest.json"
REPORT = "report.html"

#: How the sizes table names each kind of stage output (GD-NLI Table 1 wording).
_SIZE_NAMES = {
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


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


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
        return json.loads(path.read_text(encoding="utf-8"))

    def side_json(self, stage: dict[str, Any], filename: str) -> Any:
        """A JSON file a stage saved beside its outputs (e.g. ``examples.json``)."""
        path = self.run_dir / stage["name"] / filename
        if not path.is_file():
            return None
        return json.loads(path.read_text(encoding="utf-8"))


def load_run(run_dir: str | Path) -> RunData:
    """Read a run folder's manifest (fails clearly when the folder is not a run)."""
    run = Path(run_dir)
    path = run / MANIFEST
    if not path.is_file():
        raise ConfigError(f"{run}: not a zdebias run folder (no {MANIFEST}); run a recipe first")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON ({err.msg})") from None
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


# --------------------------------------------------------------------------- html pieces


_CSS = """
body{font-family:-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1100px;color:#212529;line-height:1.45;padding:0 1em}
h1{font-size:1.7em;margin-bottom:.2em}h2{font-size:1.3em;margin-top:1.8em;border-bottom:1px solid
#dee2e6;padding-bottom:.2em}h3{font-size:1.05em;margin-bottom:.3em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #dee2e6;padding:.3em .6em;vertical-align:top}
th{background:#f1f3f5;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:#868e96}.ok{color:#2f9e44;font-weight:600}.bad{color:#e03131;font-weight:600}
.figs{display:flex;flex-wrap:wrap;gap:1em}.figs figure{margin:0;flex:1 1 480px}
.figs img{width:100%;border:1px solid #dee2e6}figcaption{font-size:.85em;color:#495057}
.lab{display:inline-block;padding:0 .4em;border-radius:3px;color:white;font-size:.85em}
.summary{background:#f8f9fa;border:1px solid #dee2e6;padding:.6em 1em;border-radius:4px}
details{margin:.5em 0}code{font-size:.9em}
"""


def label_colour(label: str) -> str:
    """A label's colour: the one the Gardner plots give it (its index in its task's labels)."""
    from zdebias.data.labels import TASKS
    from zdebias.report.plots import COLORS

    for task in TASKS.values():
        if label in task.labels:
            return COLORS[task.labels.index(label) % len(COLORS)]
    return COLORS[-1]


def _label_tag(label: str) -> str:
    return f'<span class="lab" style="background:{label_colour(label)}">{_e(label)}</span>'


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return _e(value)


def _table(header: list[str], rows: list[list[str]], *, numeric: set[int] | None = None) -> str:
    numeric = numeric or set()
    out = ["<table><tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr>"]
    for row in rows:
        cells = "".join(
            f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        out.append(f"<tr>{cells}</tr>")
    out.append("</table>")
    return "\n".join(out)


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def _section_artifacts(rows: list[dict[str, Any]] | None) -> str:
    if not rows:
        return ""
    body = []
    for r in rows:
        b, a = r.get("before"), r.get("after")

        def cell(c: dict[str, Any] | None) -> list[str]:
            if c is None:
                return ["–", "–", "–"]
            return [f"{c['z']:.1f}", _num(c["n"]), f"#{c['rank']}" if "rank" in c else "–"]

        verdict = []
        verdict.append(
            '<span class="ok">found</span>' if r["found"] else '<span class="bad">not found</span>'
        )
        if a is not None or r["gone"]:
            verdict.append(
                '<span class="ok">gone</span>'
                if r["gone"]
                else '<span class="bad">still significant</span>'
            )
        body.append(
            [
                f"<code>{_e(r['feature'])}</code>",
                _label_tag(r["label"]),
                _e(r["description"]),
                *cell(b),
                *cell(a),
                " · ".join(verdict),
            ]
        )
    header = [
        "planted feature",
        "gives away",
        "how",
        "z before",
        "n",
        "rank",
        "z after",
        "n",
        "rank",
        "verdict",
    ]
    zc = next((r["before"]["z_critical"] for r in rows if r.get("before")), None)
    zca = next((r["after"]["z_critical"] for r in rows if r.get("after")), None)
    note = (
        f"<p class='muted'>Significant means z above the Bonferroni-corrected critical "
        f"value (before: {_num(zc, 2)}, after: {_num(zca, 2)}). Rank is the feature's "
        f"place among all features by z for that label.</p>"
    )
    return (
        "<h2>Planted artifacts: found and gone</h2><p>The demo corpus plants three "
        "shortcuts of known ground truth in its train and dev splits; its test split is "
        "quota-balanced so that none of them says anything about the label there.</p>"
        + _table(header, body, numeric={3, 4, 5, 6, 7, 8})
        + note
    )


def gardner_image(stats: dict[str, Any], title: str) -> bytes | None:
    """PNG of the Gardner plot of a saved ``stats.json`` (drawn by :mod:`zdebias.report.plots`)."""
    import tempfile

    import numpy as np

    from zdebias.report.plots import gardner_plot

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
        )
        return png.read_bytes()


def _section_gardner(run: RunData) -> str:
    before, after = before_after(run)
    figs = []
    for stage, caption in ((before, "before"), (after, "after")):
        if stage is None:
            continue
        stats = run.json_output(stage, "stats")
        if not stats:
            continue
        png = gardner_image(stats, f"{caption} ({stage['name']}, {stats['n_examples']:,} ex.)")
        if png is None:
            continue
        text = (
            f"<b>{caption}</b>: <code>{_e(stage['name'])}</code>, "
            f"{stats['n_examples']:,} examples; {stats['n_significant']:,} of "
            f"{stats['n_features']:,} features significant for some label "
            f"(z_c = {stats['z_critical']:.2f}). Points: features seen in more than "
            f"{stats['gardner'].get('min_n', 20)} examples, at the label they favour most."
        )
        figs.append(
            f"<figure>{_img(png, f'Gardner plot {caption}')}"
            f"<figcaption>{text}</figcaption></figure>"
        )
    if not figs:
        return ""
    return (
        "<h2>z-statistics (Gardner plots)</h2><p>Each point is a feature: how often it "
        "occurs (n, log scale) and the share p̂ of those examples with the label it favours "
        "most. Above the curve a feature predicts its label more than chance allows.</p>"
        f"<div class='figs'>{''.join(figs)}</div>"
    )


def _section_top(run: RunData, top_n: int) -> str:
    before, after = before_after(run)
    sb = run.json_output(before, "stats") if before else None
    sa = run.json_output(after, "stats") if after else None
    if sb is None:
        return ""
    header = ["label", f"biased feature ({_e(before['name'])})", "z", "n", "p̂"]
    if sa is not None:
        header += [f"biased feature ({_e(after['name'])})", "z", "n", "p̂"]
    rows = []
    for label in sb["labels"]:
        left = sb["top"].get(label, [])[:top_n]
        right = sa["top"].get(label, [])[:top_n] if sa else []
        for i in range(max(len(left), len(right))):
            row = [_label_tag(label) if i == 0 else ""]
            for side, present in ((left, True), (right, sa is not None)):
                if not present:
                    continue
                if i < len(side):
                    r = side[i]
                    row += [
                        f"<code>{_e(r['feature'])}</code>",
                        f"{r['z']:.1f}",
                        _num(r["n"]),
                        f"{r['p']:.2f}",
                    ]
                else:
                    row += ["", "", "", ""]
            rows.append(row)
    numeric = {2, 3, 4, 6, 7, 8}
    return (
        f"<h2>Top biased features per label</h2><p>The {top_n} features with the highest z "
        "for each label (GD-NLI Table 12 shape).</p>" + _table(header, rows, numeric=numeric)
    )


def _section_sizes(run: RunData) -> str:
    rows = sizes_rows(run)
    if not rows:
        return ""
    body = [
        [
            _e(r["what"])
            + (f" <span class='muted'>({_e(r['detail'])})</span>" if r.get("detail") else ""),
            f"<code>{_e(r['stage'])}</code>",
            _num(r["n"]),
        ]
        for r in rows
    ]
    return (
        "<h2>Dataset sizes</h2><p>Records made by each stage (GD-NLI Table 1 shape).</p>"
        + _table(["data", "stage", "records"], body, numeric={2})
    )


def _fmt_cell(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "–"
    text = f"{100 * cell['mean']:.2f}"
    if cell.get("n_runs", 1) > 1:
        text += f"±{100 * cell['std']:.2f}"
    if cell.get("significant"):
        text = f"<u>{text}</u>"
    return text


def _section_evaluation(run: RunData) -> str:
    parts = []
    for stage in run.of_kind("evaluate"):
        results = run.json_output(stage, "results")
        if not results:
            continue
        table = results["table"]
        header = ["Method (model w/ data)", *[_e(c) for c in table["columns"]]]
        if table.get("average"):
            header.append("Avg.")
        body = []
        for row in table["rows"]:
            cells = [_fmt_cell(row["cells"].get(c)) for c in table["columns"]]
            if table.get("average"):
                cells.append(_fmt_cell(row.get("average")))
            runs = row.get("n_runs", 1)
            name = _e(row["name"]) + (
                f" <span class='muted'>({runs} runs)</span>" if runs > 1 else ""
            )
            body.append([name, *cells])
        parts.append(f"<h3>{_e(stage['name'])}</h3>")
        parts.append(_table(header, body, numeric=set(range(1, len(header)))))
        for g in results.get("groups", []):
            gh = ["heuristic", *[_e(c) for c in g["columns"]]]
            gb = [
                [_e(r["name"]), *[_fmt_cell(r["cells"].get(c)) for c in g["columns"]]]
                for r in g["rows"]
            ]
            parts.append(
                f"<p>{_e(g['method'])} on {_e(g['suite'])}, by heuristic and gold "
                "label:</p>" + _table(gh, gb, numeric=set(range(1, len(gh))))
            )
    if not parts:
        return ""
    return (
        "<h2>Evaluation</h2><p>Accuracy in % (GD-NLI Tables 2-5 shape); mean±std over "
        "seeds where a method has several runs; underlined: significantly different "
        "from the first row (two-tailed t-test, 95%).</p>" + "\n".join(parts)
    )


def _section_examples(run: RunData, n: int) -> str:
    if n <= 0:
        return ""
    parts = []
    for kind in ("combine", "confidence-filter", "sample"):
        stages = run.of_kind(kind)
        if not stages:
            continue
        stage = stages[-1]
        data = run.side_json(stage, "examples.json") or {}
        examples = data.get("examples", [])[:n]
        if not examples:
            continue
        rows = [
            [_e(x.get("premise", "")), _label_tag(x["label"]), _e(x.get("hypothesis", ""))]
            for x in examples
        ]
        parts.append(
            f"<h3>Generated samples in <code>{_e(stage['name'])}</code></h3>"
            + _table(["premise", "label", "hypothesis"], rows)
        )
        break
    for stage in run.of_kind("counterfactual-generate"):
        data = run.side_json(stage, "examples.json") or {}
        rows = []
        for item in data.get("counterfactuals", [])[:n]:
            orig, cf = item.get("original") or {}, item["counterfactual"]
            src = _pair_text(orig)
            new = _pair_text(cf)
            rows.append(
                [_e(src), _label_tag(orig.get("label", "?")), _e(new), _label_tag(cf["label"])]
            )
        if rows:
            parts.append(
                f"<h3>Counterfactuals from <code>{_e(stage['name'])}</code></h3>"
                + _table(["original", "label", "counterfactual", "target"], rows)
            )
    if not parts:
        return ""
    return "<h2>Examples</h2><p>GD-NLI Table 14 / AutoCAD shape.</p>" + "\n".join(parts)


def _pair_text(row: dict[str, Any]) -> str:
    if row.get("premise") is not None:
        return f"{row['premise']} / {row.get('hypothesis', '')}"
    return str(row.get("text", ""))


def _section_stages(run: RunData) -> str:
    rows = []
    for s in run.stages:
        status = s.get("status", "?")
        cls = (
            "ok"
            if status in ("done", "skipped")
            else "bad"
            if status in ("failed", "interrupted")
            else "muted"
        )
        rows_in = ", ".join(f"{k} {v:,}" for k, v in (s.get("rows_in") or {}).items())
        rows_out = ", ".join(f"{k} {v:,}" for k, v in (s.get("rows_out") or {}).items())
        notes = "<br>".join(_e(n) for n in s.get("notes") or [])
        seconds = s.get("seconds")
        rows.append(
            [
                f"<code>{_e(s['name'])}</code>",
                _e(s.get("stage", "")),
                f"<span class='{cls}'>{_e(status)}</span>"
                + (" <span class='muted'>(resumed)</span>" if s.get("resumed") else ""),
                _num(seconds) if seconds is not None else "–",
                _e(rows_in),
                _e(rows_out),
                notes,
            ]
        )
    return "<h2>Stages</h2>" + _table(
        ["stage", "kind", "status", "seconds", "rows in", "rows out", "notes"], rows, numeric={3}
    )


def _header(run: RunData) -> str:
    m = run.manifest
    cfg = run.config
    title = (cfg.get("report") or {}).get("title") or f"zdebias run: {m.get('name', '?')}"
    versions = m.get("versions", {})
    vtext = ", ".join(f"{k} {v}" for k, v in versions.items())
    desc = f"<p>{_e(cfg['description'])}</p>" if cfg.get("description") else ""
    seconds = m.get("seconds")
    done = sum(1 for s in run.stages if s.get("status") in ("done", "skipped"))
    return (
        f"<h1>{_e(title)}</h1>{desc}<div class='summary'>"
        f"status <b>{_e(m.get('status', '?'))}</b> · {done}/{len(run.stages)} stages done · "
        f"task <b>{_e(m.get('task', '?'))}</b> · seed <b>{_e(m.get('seed', '?'))}</b> · "
        f"last invocation {_num(seconds)} s · finished {_e(m.get('finished') or '–')}"
        f"<details><summary>versions</summary><code>{_e(vtext)}</code></details>"
        f"<details><summary>resolved recipe</summary><pre>{_e(json.dumps(cfg, indent=2))}"
        f"</pre></details></div>"
    )


def build_report(run_dir: str | Path) -> str:
    """The report of a run folder as one HTML string."""
    run = load_run(run_dir)
    settings = run.config.get("report") or {}
    sections = [
        _header(run),
        _section_artifacts(artifact_summary(run)),
        _section_gardner(run),
        _section_top(run, int(settings.get("top_n", 5))),
        _section_sizes(run),
        _section_evaluation(run),
        _section_examples(run, int(settings.get("examples", 8))),
        _section_stages(run),
    ]
    title = _e(settings.get("title") or f"zdebias run: {run.manifest.get('name', '?')}")
    body = "\n".join(s for s in sections if s)
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{title}"
        f"</title><style>{_CSS}</style></head><body>{body}"
        "<p class='muted'>Written by zdebias from the run's saved JSON.</p></body></html>\n"
    )


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the report (default ``RUN_DIR/report.html``) atomically; returns its path."""
    path = Path(out) if out is not None else Path(run_dir) / REPORT
    text = build_report(run_dir)
    with atomic_open(path) as fh:
        fh.write(text)
    return path
