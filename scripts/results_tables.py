"""Markdown tables for docs/results/history.md from a finished `zdebias run` folder.

    python scripts/results_tables.py runs/snli20k-cpu > /tmp/snli-tables.md
    python scripts/results_tables.py runs/autocad-sst2-cpu > /tmp/cad-tables.md

Every number printed is read from the run folder (manifest, stage outputs); nothing is typed in.
Sections appear when the run has the stages they read: evaluation tables (significance marks
against each t-test baseline), HANS per heuristic, dataset sizes and z-statistics, top-5 features
per label before/after (GD-NLI Table 12), the generated data's quality and examples,
counterfactual metrics, every training's seeds, steps, best dev accuracy and whether it learned,
and per-stage wall/CPU time.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

MARKS = "†‡§¶"
#: the flat metric of the reliance gap (zdebias.evaluation.reliance.GAP)
GAP = "reliance-gap"
#: per-suite metrics beside accuracy (zdebias.evaluation.metrics.metric_key)
SCORE_SUFFIXES = (" macro-F1", " balanced accuracy")
DONE = ("done", "skipped")  # skipped: up to date from an earlier invocation


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def md(text: str) -> str:
    """``text`` in a Markdown table cell (a method named ``Z(pool | D0)`` keeps its bar)."""
    return text.replace("|", "\\|")


def pct(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "–"
    text = f"{100 * cell['mean']:.2f}"
    if cell.get("n_runs", 1) > 1:
        text += f"±{100 * cell['std']:.2f}"
    return text


def stage_output(run: Path, manifest: dict[str, Any], name: str, output: str) -> Path | None:
    for stage in manifest["stages"]:
        if stage["name"] == name and stage.get("status") in DONE:
            out = stage.get("outputs", {}).get(output)
            return run / out["path"] if out else None
    return None


def stage_inputs(run: Path) -> dict[str, str]:
    """Each stage's ``input`` reference in the run's recipe copy (``config.yaml``; {} without
    one): which sample stage a judge read."""
    path = run / "config.yaml"
    if not path.is_file():
        return {}
    import yaml

    stages = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("stages") or {}
    return {
        name: spec["input"]
        for name, spec in stages.items()
        if isinstance(spec, dict) and isinstance(spec.get("input"), str)
    }


def differences(comparison: dict[str, Any], columns: list[str]) -> list[str]:
    """One row per method: its t-test against the comparison's baseline in each column."""
    lines = ["| Method | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    for item in comparison["comparisons"]:
        cells = []
        for col in columns:
            test = item["tests"].get(col)
            if test is None:
                cells.append("–")
            else:
                p = "–" if test["p"] is None else f"{test['p']:.3f}"
                if "p_holm" not in test:  # results of the Student t-test era, as printed then
                    cells.append(f"{100 * test['difference']:+.2f} (p {p})")
                    continue
                ci = test.get("ci")
                interval = f" [{100 * ci[0]:+.2f}, {100 * ci[1]:+.2f}]" if ci else ""
                holm = "–" if test["p_holm"] is None else f"{test['p_holm']:.3f}"
                cells.append(f"{100 * test['difference']:+.2f}{interval} (p {p}, Holm {holm})")
        lines.append(f"| {md(item['name'])} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def reliance(results: dict[str, Any]) -> list[str]:
    """The shortcut split's slices and gap per method (mean±std over seeds), with the gap's
    t-test against the first method."""
    rows = results.get("reliance") or []
    if not rows:
        return []
    lines = [
        "Reliance on the shortcut split (accuracy %, gap aligned − conflicting in points; "
        f"p: the gap's t-test against {rows[0]['name']}):",
        "",
        "| Method | aligned | conflicting | free | gap | p |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        cells = [pct(row["cells"].get(k)) for k in ("aligned", "conflicting", "free", "gap")]
        test = row.get("test")
        p = "–" if not test or test.get("p") is None else f"{test['p']:.3f}"
        lines.append(f"| {md(row['name'])} | " + " | ".join(cells) + f" | {p} |")
    return [*lines, ""]


def evaluation(run: Path, manifest: dict[str, Any]) -> list[str]:
    """Accuracy tables (mean±std over seeds) with one mark per t-test baseline."""
    lines: list[str] = []
    for stage in manifest["stages"]:
        if stage["stage"] != "evaluate" or stage.get("status") not in DONE:
            continue
        results = load(run / stage["outputs"]["results"]["path"])
        comparisons = results.get("comparisons") or (
            [results["comparison"]] if results.get("comparison") else []
        )
        marks = {c["baseline"]: MARKS[i] for i, c in enumerate(comparisons)}
        significant: dict[tuple[str, str], str] = {}
        for c in comparisons:
            for item in c["comparisons"]:
                for suite, test in item["tests"].items():
                    if test.get("significant"):
                        key = (item["name"], suite)
                        significant[key] = significant.get(key, "") + marks[c["baseline"]]
        table = results["table"]
        columns = list(table["rows"][0]["cells"]) if table["rows"] else []
        lines += [
            f"Stage `{stage['name']}`: accuracy (%), mean±std over "
            f"{table['rows'][0]['n_runs']} seeds.",
            "",
            "| Method | " + " | ".join(columns) + " |",
            "|---|" + "---:|" * len(columns),
        ]
        for row in table["rows"]:
            cells = [pct(row["cells"][c]) + significant.get((row["name"], c), "") for c in columns]
            lines.append(f"| {md(row['name'])} | " + " | ".join(cells) + " |")
        lines.append("")
        for c in comparisons:
            if "families" not in c:  # results of the Student t-test era, as printed then
                lines.append(
                    f"{marks[c['baseline']]} p < {c['alpha']} against {c['baseline']} "
                    f"(two-tailed {c['test']} t-test over seeds)."
                )
                continue
            fam = c["families"]
            lines.append(
                f"{marks[c['baseline']]} Holm-adjusted p < {c['alpha']} (two-tailed) against "
                f"{c['baseline']}; families: primary = {', '.join(fam['primary']['metrics'])} "
                f"({fam['primary']['size']} tests over every baseline), secondary = every "
                f"other metric ({fam['secondary']['size']} tests); tests: "
                f"{', '.join(c.get('tests_used', [])) or '–'}; [CI]: 95 % interval, points."
            )
        lines.append("")
        for c in comparisons:
            rest = [k for k in c["comparisons"][0]["tests"] if k not in columns]
            scores = [k for k in rest if k == GAP or k.endswith(SCORE_SUFFIXES)]
            detail = [k for k in rest if k not in scores]
            lines += [f"Differences against {c['baseline']} (points, p-value):", ""]
            lines += differences(c, columns)
            if scores:  # macro-F1, balanced accuracy, the reliance gap
                lines += [
                    f"Macro-F1, balanced accuracy and the reliance gap, against {c['baseline']}:",
                    "",
                ]
                lines += differences(c, scores)
            if detail:  # `detail: true`: per HANS heuristic and heuristic × gold label
                lines += [f"Per heuristic and gold label, against {c['baseline']}:", ""]
                lines += differences(c, detail)
        lines += reliance(results)
        for group in results.get("groups", []):
            cols = group["columns"]
            lines += [
                f"{group['method']} on {group['suite']}, by heuristic and gold label:",
                "",
                "| Heuristic | " + " | ".join(cols) + " |",
                "|---|" + "---:|" * len(cols),
            ]
            for row in group["rows"]:
                lines.append(
                    f"| {row['name']} | "
                    + " | ".join(pct(row["cells"].get(c)) for c in cols)
                    + " |"
                )
            lines.append("")
    return lines


def hans_compact(run: Path, manifest: dict[str, Any]) -> list[str]:
    """GD-NLI Table 4 shape: one row per method, HANS per heuristic × label."""
    lines: list[str] = []
    for stage in manifest["stages"]:
        if stage["stage"] != "evaluate" or stage.get("status") not in DONE:
            continue
        groups = load(run / stage["outputs"]["results"]["path"]).get("groups", [])
        if not groups:
            continue
        heads = [
            (r["name"], c) for r in groups[0]["rows"] for c in groups[0]["columns"] if c != "all"
        ]
        lines += [
            "HANS by heuristic (accuracy %, mean±std over seeds):",
            "",
            "| Method | " + " | ".join(f"{h} / {c}" for h, c in heads) + " |",
            "|---|" + "---:|" * len(heads),
        ]
        for group in groups:
            rows = {r["name"]: r["cells"] for r in group["rows"]}
            lines.append(
                f"| {md(group['method'])} | "
                + " | ".join(pct(rows.get(h, {}).get(c)) for h, c in heads)
                + " |"
            )
        lines.append("")
    return lines


def datasets(run: Path, manifest: dict[str, Any]) -> list[str]:
    """Size and z-statistics of every dataset a stats stage measured."""
    lines = [
        "| Dataset (stats stage) | rows | per label | significant features | max z per label |",
        "|---|---:|---|---:|---|",
    ]
    found = False
    for stage in manifest["stages"]:
        if stage["stage"] != "stats" or stage.get("status") not in DONE:
            continue
        found = True
        stats = load(run / stage["outputs"]["stats"]["path"])
        per_label = ", ".join(f"{k} {v:,}" for k, v in stats["label_counts"].items())
        max_z = ", ".join(f"{k} {v:.1f}" for k, v in stats["max_z"].items())
        lines.append(
            f"| {stage['name']} | {stats['n_examples']:,} | {per_label} | "
            f"{stats['n_significant']:,} | {max_z} |"
        )
    return [*lines, ""] if found else []


def top_features(run: Path, manifest: dict[str, Any], stages: list[str], k: int = 5) -> list[str]:
    """GD-NLI Table 12 shape: top-k features (z) per label, side by side for the stages."""
    tops = {}
    for name in stages:
        path = stage_output(run, manifest, name, "stats")
        if path is not None:
            tops[name] = load(path)["top"]
    if not tops:
        return []
    lines = [
        "| Label | rank | " + " | ".join(tops) + " |",
        "|---|---:|" + "---|" * len(tops),
    ]
    labels = list(next(iter(tops.values())))
    for label in labels:
        for i in range(k):
            cells = []
            for top in tops.values():
                rows = top.get(label, [])
                cells.append(f"`{rows[i]['feature']}` {rows[i]['z']:.1f}" if i < len(rows) else "")
            lines.append(f"| {label if i == 0 else ''} | {i + 1} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def generated(run: Path, manifest: dict[str, Any], per_label: int, seed: int) -> list[str]:
    """The sampler's and the confidence filter's counts, and real examples per label."""
    lines: list[str] = []
    for stage in manifest["stages"]:
        if stage.get("status") not in DONE:
            continue
        if stage["stage"] == "sample":
            summary = load(run / stage["outputs"]["summary"]["path"])
            keep = {k: v for k, v in summary.items() if not isinstance(v, (dict, list))}
            keep.update({k: v for k, v in summary.items() if isinstance(v, dict)})
            lines += [f"Sampler (`{stage['name']}`) summary:", "", "```json"]
            lines += [json.dumps(keep, indent=1, ensure_ascii=False), "```", ""]
        if stage["stage"] in ("confidence-filter", "combine", "filter"):
            summary_out = stage.get("outputs", {}).get("summary")
            if summary_out is None:
                continue
            summary = load(run / summary_out["path"])
            flat = {
                k: v
                for k, v in summary.items()
                if isinstance(v, (int, float, str)) or k.startswith("label_counts")
            }
            lines += [f"`{stage['name']}` ({stage['stage']}) summary:", "", "```json"]
            lines += [json.dumps(flat, indent=1, ensure_ascii=False), "```", ""]
        if stage["stage"] == "confidence-filter":
            records = read_jsonl(run / stage["outputs"]["data"]["path"])
            rng = random.Random(seed)
            by_label: dict[str, list[dict[str, Any]]] = {}
            for r in records:
                by_label.setdefault(r["label"], []).append(r)
            lines += [
                f"{per_label} kept samples per label, drawn at random (seed {seed}) from "
                f"`{stage['name']}` ({len(records):,} samples; "
                + ", ".join(f"{k} {len(v):,}" for k, v in sorted(by_label.items()))
                + "):",
                "",
                "| label | premise | hypothesis | p(label) |",
                "|---|---|---|---:|",
            ]
            for label, rows in sorted(by_label.items()):
                for r in rng.sample(rows, min(per_label, len(rows))):
                    conf = r.get("meta", {}).get("confidence")
                    conf_text = f"{conf:.2f}" if isinstance(conf, float) else "–"
                    lines.append(
                        f"| {label} | {r['premise']} | {r['hypothesis']} | {conf_text} |".replace(
                            "\n", " "
                        )
                    )
            lines.append("")
            dupes = Counter((r["premise"].lower(), r["hypothesis"].lower()) for r in records)
            lines.append(
                f"Repeated (premise, hypothesis) pairs among kept samples: "
                f"{sum(c - 1 for c in dupes.values() if c > 1)}; distinct premises: "
                f"{len({r['premise'].lower() for r in records}):,}."
            )
            lines.append("")
    return lines


def targeted(run: Path, manifest: dict[str, Any], seed: int) -> list[str]:
    """Per shortcut-breaking cell: asked, generated, fired, judged, z before → after;
    one kept and one rejected sample per cell; two rule-made pairs per rule."""
    lines: list[str] = []
    done = [s for s in manifest["stages"] if s.get("status") in DONE]
    judges = []
    inputs = stage_inputs(run)
    for stage in done:
        if stage["stage"] == "confidence-filter" and "summary" in stage.get("outputs", {}):
            summary = load(run / stage["outputs"]["summary"]["path"])
            if summary.get("per_cell"):
                judges.append((stage, summary, inputs.get(stage["name"])))
    rng = random.Random(seed)
    for stage in done:
        if stage["stage"] != "sample":
            continue
        cells = load(run / stage["outputs"]["summary"]["path"]).get("cells")
        if not cells or not cells.get("rows"):
            continue
        names = {r["cell"] for r in cells["rows"]}
        mine = [  # the judges of this stage (by the recipe; without one, by shared cells)
            (j, s)
            for j, s, source in judges
            if source == stage["name"] or (source is None and set(s["per_cell"]) & names)
        ]
        heads = [f"kept by `{j['name']}`" for j, _ in mine]
        lines += [
            f"`{stage['name']}`: {cells['n_cells']} cells, {cells['asked']:,} rows asked, "
            f"{cells['fired']:,} written with their feature, {cells['short']:,} short; "
            f"{cells['n_skipped']} cells skipped.",
            "",
            "| cell | steer | asked | generated | written | "
            + " | ".join(heads)
            + " | z before → after |",
            "|---|---|---:|---:|---:|" + "---:|" * len(heads) + "---:|",
        ]
        for row in cells["rows"]:
            kept = []
            for _, summary in mine:
                c = summary["per_cell"].get(row["cell"])
                kept.append(f"{c['kept']}/{c['n']}" if c else "–")
            lines.append(
                f"| {row['cell']} | {row.get('steer', '–')} | {row['asked']} | "
                f"{row['generated']} | {row['fired']} | "
                + " | ".join(kept)
                + f" | {row['z_before']:.1f} → {row['z_after']:.1f} |"
            )
        lines.append("")
        for judge, _ in mine[:1]:
            outs = judge["outputs"]
            pools = {
                "kept": read_jsonl(run / outs["data"]["path"]),
                "rejected": read_jsonl(run / outs["rejected"]["path"]),
            }
            lines += [
                f"One kept and one rejected sample per cell, drawn at random (seed {seed}), "
                f"judged by `{judge['name']}`:",
                "",
                "| cell | verdict | premise | hypothesis | p(label) | Δp |",
                "|---|---|---|---|---:|---:|",
            ]
            for row in cells["rows"]:
                for verdict, pool in pools.items():
                    hits = [r for r in pool if r.get("meta", {}).get("cell") == row["cell"]]
                    if not hits:
                        continue
                    r = rng.choice(hits)
                    meta = r["meta"]
                    dp = meta.get("delta_p")
                    lines.append(
                        f"| {row['cell']} | {verdict} | {r['premise']} | {r['hypothesis']} | "
                        f"{meta.get('confidence', float('nan')):.2f} | "
                        f"{'–' if dp is None else f'{dp:+.2f}'} |".replace("\n", " ")
                    )
            lines.append("")
    for stage in done:
        if stage["stage"] != "transform":
            continue
        records = read_jsonl(run / stage["outputs"]["data"]["path"])
        by_rule: dict[str, list[dict[str, Any]]] = {}
        for r in records:
            by_rule.setdefault(r["id"].split(":", 1)[0].removeprefix("tf-"), []).append(r)
        lines += [
            f"`{stage['name']}`: two pairs per rule, drawn at random (seed {seed}):",
            "",
            "| rule | label | premise | hypothesis |",
            "|---|---|---|---|",
        ]
        for rule, rows in by_rule.items():
            for r in rng.sample(rows, min(2, len(rows))):
                lines.append(f"| {rule} | {r['label']} | {r['premise']} | {r['hypothesis']} |")
        lines.append("")
    return lines


def hand_labels(
    run: Path, manifest: dict[str, Any], path: Path, data: Path | None = None
) -> list[str]:
    """Hand labels of a sample stage's rows against the generated labels and each judge's verdict
    (``{"stage", "labels": {id: label or null}, "texts": {id: [premise, hypothesis, label]}}``;
    null: too garbled to label; ``texts``, optional, must match the run's rows). A text may be
    given as ``{"premise_from": [ROW_ID, FIELD], "hypothesis": ..., "label": ...}``: the text of
    that row of the file ``source`` names under ``data`` (the shared data folder), not copied."""
    doc = load(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("labels"), dict) or "stage" not in doc:
        raise SystemExit(f'{path}: expected {{"stage": NAME, "labels": {{ID: LABEL or null}}}}')
    hand: dict[str, str | None] = doc["labels"]
    samples = run / doc["stage"] / "samples.jsonl"
    rows = {r["id"]: r for r in read_jsonl(samples) if r["id"] in hand}
    missing = sorted(set(hand) - set(rows))
    if missing:
        raise SystemExit(f"{path}: {len(missing)} ids not in {samples}, e.g. {missing[0]!r}")
    texts = _hand_texts(path, doc, data)
    other = [
        i
        for i, t in texts.items()
        if i not in rows or [rows[i]["premise"], rows[i]["hypothesis"], rows[i]["label"]] != t
    ]
    if other:
        raise SystemExit(
            f"{path}: {len(other)} rows were labelled as other text than {samples} holds "
            f"(e.g. {other[0]!r}); these labels belong to another run"
        )
    right = {i for i, label in hand.items() if label is not None and label == rows[i]["label"]}
    garbled = sum(label is None for label in hand.values())
    gen = Counter(rows[i]["label"] for i in hand)
    lines = [
        f"{len(hand)} rows of `{doc['stage']}` labelled by hand ({path}): {len(right)} carry the "
        f"label the labeller gave, {garbled} too garbled to label, "
        f"{len(hand) - len(right) - garbled} readable with another label.",
        "",
        "| generated label | rows | right |",
        "|---|---:|---:|",
    ]
    for label, n in sorted(gen.items()):
        lines.append(f"| {label} | {n} | {sum(rows[i]['label'] == label for i in right)} |")
    lines += ["", "| judge | kept | kept and right |", "|---|---:|---:|"]
    for stage in manifest["stages"]:
        if stage["stage"] != "confidence-filter" or stage.get("status") not in DONE:
            continue
        # ids repeat across sample stages: a judge of this stage keeps these very pairs
        kept = {
            r["id"]
            for r in read_jsonl(run / stage["outputs"]["data"]["path"])
            if r["id"] in rows and r["hypothesis"] == rows[r["id"]]["hypothesis"]
        }
        if kept:
            lines.append(f"| `{stage['name']}` | {len(kept)} | {len(kept & right)} |")
    return [*lines, ""]


def _hand_texts(path: Path, doc: dict[str, Any], data: Path | None) -> dict[str, list[str]]:
    """``texts`` of a hand-label file as ``[premise, hypothesis, label]`` per id, its references
    to rows of ``doc["source"]`` resolved from the data folder."""
    texts: dict[str, Any] = doc.get("texts") or {}
    if all(isinstance(t, list) for t in texts.values()):
        return texts
    if data is None or "source" not in doc:
        raise SystemExit(
            f"{path}: its texts name rows of {doc.get('source', 'a source file')!r}; "
            "give the data folder that holds it (--data)"
        )
    from zdebias.data.readers import read_records

    by_id = {r.id: r for r in read_records(data / doc["source"])}
    out: dict[str, list[str]] = {}
    for i, t in texts.items():
        if isinstance(t, list):
            out[i] = t
            continue
        row = []
        for field in ("premise", "hypothesis", "label"):
            if f"{field}_from" in t:
                rid, source_field = t[f"{field}_from"]
                if rid not in by_id:
                    raise SystemExit(f"{path}: {i}: row {rid!r} is not in {doc['source']}")
                row.append(getattr(by_id[rid], source_field))
            else:
                row.append(t[field])
        out[i] = row
    return out


def counterfactuals(run: Path, manifest: dict[str, Any], per_label: int, seed: int) -> list[str]:
    """Counterfactual metrics and examples (original → counterfactual)."""
    lines: list[str] = []
    for stage in manifest["stages"]:
        if stage.get("status") not in DONE:
            continue
        if stage["stage"] == "counterfactual-metrics":
            metrics = load(run / stage["outputs"]["metrics"]["path"])
            lines += [f"`{stage['name']}`:", "", "```json"]
            lines += [json.dumps(metrics, indent=1, ensure_ascii=False)[:4000], "```", ""]
        if stage["stage"] == "counterfactual-generate":
            summary = load(run / stage["outputs"]["summary"]["path"])
            lines += [f"`{stage['name']}` summary:", "", "```json"]
            lines += [json.dumps(summary, indent=1, ensure_ascii=False)[:4000], "```", ""]
            records = read_jsonl(run / stage["outputs"]["data"]["path"])
            rng = random.Random(seed)
            lines += [
                "| target | rationale words → fillers | counterfactual |",
                "|---|---|---|",
            ]
            for r in rng.sample(records, min(2 * per_label, len(records))):
                meta = r.get("meta", {})
                swap = "; ".join(
                    f"{a} → {b}"
                    for a, b in zip(
                        meta.get("original_fillers", []), meta.get("fillers", []), strict=False
                    )
                )
                text = r.get("text") or f"{r.get('premise')} / {r.get('hypothesis')}"
                lines.append(f"| {r['label']} | {swap} | {text} |".replace("\n", " "))
            lines.append("")
    return lines


def trainings(run: Path, manifest: dict[str, Any]) -> list[str]:
    """Every train-classifier stage: seeds, optimizer steps, best dev accuracy (mean±std over
    seeds) and how many of its trainings did not learn; the total of those last."""
    lines = [
        "| Stage | seeds | steps | best dev accuracy (%) | did not learn |",
        "|---|---|---:|---:|---:|",
    ]
    found, failed = False, 0
    for stage in manifest["stages"]:
        if stage["stage"] != "train-classifier" or stage.get("status") not in DONE:
            continue
        found = True
        runs = load(run / stage["outputs"]["runs"]["path"])["runs"]
        accs = [100 * r["best"]["dev_accuracy"] for r in runs if r["best"]["dev_accuracy"]]
        mean = sum(accs) / len(accs)
        std = (sum((a - mean) ** 2 for a in accs) / (len(accs) - 1)) ** 0.5 if len(accs) > 1 else 0
        steps = sorted({r["steps"] for r in runs})
        bad = sum(1 for r in runs if r.get("did_not_learn"))
        failed += bad
        lines.append(
            f"| {stage['name']} | {', '.join(str(r['seed']) for r in runs)} | "
            f"{', '.join(map(str, steps))} | {mean:.1f}±{std:.1f} | {bad} |"
        )
    return [*lines, "", f"Trainings that did not learn: {failed}.", ""] if found else []


def timings(manifest: dict[str, Any]) -> list[str]:
    lines = ["| Stage | kind | wall (s) | CPU (s) |", "|---|---|---:|---:|"]
    wall = cpu = 0.0
    for stage in manifest["stages"]:
        w, c = stage.get("seconds"), stage.get("cpu_seconds")
        wall += w or 0
        cpu += c or 0
        lines.append(
            f"| {stage['name']} | {stage['stage']} | {w if w is not None else '–'} | "
            f"{c if c is not None else '–'} |"
        )
    lines.append(f"| total | | {wall:,.0f} | {cpu:,.0f} |")
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--examples", type=int, default=12, help="examples per label")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--top",
        nargs="*",
        default=["stats_original", "stats_zfilter", "stats_seq_z"],
        help="stats stages for the Table 12 shape",
    )
    parser.add_argument(
        "--hand-labels",
        type=Path,
        help="hand labels of a sample stage's rows (docs/data/targeted-hand-labels.json)",
    )
    parser.add_argument(
        "--data", type=Path, help="the shared data folder (the hand labels' texts name its rows)"
    )
    args = parser.parse_args()
    manifest = load(args.run / "manifest.json")
    sections = [
        ("Evaluation", evaluation(args.run, manifest)),
        ("Trainings", trainings(args.run, manifest)),
        ("HANS (Table 4 shape)", hans_compact(args.run, manifest)),
        ("Datasets and their z-statistics", datasets(args.run, manifest)),
        ("Top features (Table 12 shape)", top_features(args.run, manifest, args.top)),
        ("Generated data", generated(args.run, manifest, args.examples, args.seed)),
        ("Shortcut-breaking cells", targeted(args.run, manifest, args.seed)),
        (
            "Hand labels",
            hand_labels(args.run, manifest, args.hand_labels, args.data)
            if args.hand_labels
            else [],
        ),
        ("Counterfactuals", counterfactuals(args.run, manifest, args.examples, args.seed)),
        ("Time per stage", timings(manifest)),
    ]
    for title, lines in sections:
        if lines:
            print(f"## {title}\n")
            print("\n".join(lines))


if __name__ == "__main__":
    main()
