"""The terminal end-of-run summary and the report template, on a small hand-made run folder
(exact text), and the summary against the command's own printer on a real run."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from rich.console import Console

from zdebias.report.html import build_report
from zdebias.report.summary import print_run_summary

FIELDS = ("z", "n", "p", "rank")


def _stats(tracked: dict[str, dict[str, tuple]], top: dict[str, list[tuple]]) -> dict[str, Any]:
    return {
        "labels": ["entailment", "neutral", "contradiction"],
        "z_critical": 4.5,
        "n_examples": 1234,
        "n_features": 900,
        "n_significant": 12,
        "tracked": {
            f: {lab: dict(zip(FIELDS, v, strict=True)) for lab, v in per.items()}
            for f, per in tracked.items()
        },
        "top": {
            lab: [dict(zip(("feature", *FIELDS[:3]), r, strict=True)) for r in rows]
            for lab, rows in top.items()
        },
    }


def _cell(mean: float, std: float = 0.0, runs: int = 2, **extra: Any) -> dict[str, Any]:
    return {"mean": mean, "std": std, "n_runs": runs, **extra}


def make_run(root: Path) -> Path:
    """A run folder with planted artifacts, two stats stages and an evaluation (with an
    average column, a missing cell, a significant one and a HANS-style group table)."""
    files: dict[str, Any] = {
        "corpus/artifacts.json": {
            "planted": [
                {"feature": "sleeping@hypothesis", "label": "contradiction", "description": "cue"},
                {"feature": "tall@hypothesis", "label": "neutral", "description": "a 'tall' <b>"},
                {"feature": "full-lex-overlap", "label": "entailment", "description": 'say "x"'},
            ]
        },
        "before/stats.json": _stats(
            {
                "sleeping@hypothesis": {"contradiction": (17.73, 213, 0.91, 1)},
                "tall@hypothesis": {"neutral": (16.26, 1177, 0.9, 2)},
                "full-lex-overlap": {"entailment": (3.04, 226, 0.5, 30)},
            },
            {"entailment": [("full-lex-overlap", 3.04, 226, 0.5)], "neutral": []},
        ),
        "after/stats.json": _stats(
            {
                "sleeping@hypothesis": {"contradiction": (1.24, 100, 0.4, 40)},
                "full-lex-overlap": {"entailment": (5.5, 120, 0.7, 1)},
            },
            {"entailment": [("full-lex-overlap", 5.5, 120, 0.7), ("a&b", 4.0, 2000, 0.66)]},
        ),
        "evaluate/results.json": {
            "table": {
                "columns": ["dev", "test-hard"],
                "average": True,
                "rows": [
                    {
                        "name": "w/ D0",
                        "n_runs": 2,
                        "cells": {"dev": _cell(0.91, 0.01), "test-hard": _cell(0.635, 0.025)},
                        "average": _cell(0.7725, 0.0175),
                    },
                    {
                        "name": "w/ Seq-Z <long name>",
                        "n_runs": 1,
                        "cells": {"dev": None, "test-hard": _cell(0.7, runs=1, significant=True)},
                        "average": None,
                    },
                ],
            },
            "groups": [
                {
                    "method": "w/ D0",
                    "suite": "hans",
                    "columns": ["entailment", "all"],
                    "rows": [
                        {
                            "name": "lexical_overlap",
                            "cells": {"entailment": _cell(0.9, 0.05), "all": None},
                        }
                    ],
                }
            ],
        },
    }
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(json.dumps(data), encoding="utf-8")

    def stage(name: str, kind: str, output: str, **extra: Any) -> dict[str, Any]:
        path = {"path": f"{name}/{output}.json", "kind": "json"}
        return {"name": name, "stage": kind, "status": "done", "outputs": {output: path}, **extra}

    manifest = {
        "name": "hand-made",
        "status": "complete",
        "task": "nli",
        "seed": 5,
        "seconds": 12.25,
        "finished": None,
        "versions": {"zdebias": "0.1.0"},
        "config": {"description": "A <small> run", "stages": {}},
        "stages": [
            stage("corpus", "demo-data", "artifacts", rows_out={"train": 1500}, seconds=0.5),
            stage("before", "stats", "stats", rows_in={"input": 1500}),
            stage("after", "stats", "stats", resumed=True, notes=["one", "two & three"]),
            stage("evaluate", "evaluate", "results", seconds=3),
        ],
    }
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return root


def _printed(run_dir: Path, printer: Any = print_run_summary) -> str:
    out = io.StringIO()
    printer(Console(file=out, highlight=False, soft_wrap=True), run_dir)
    return out.getvalue()


def test_run_summary_exact_text(tmp_path: Path) -> None:
    assert _printed(make_run(tmp_path)) == (
        "planted artifacts (z for the label they give away):\n"
        "  sleeping@hypothesis    → contradiction  z   17.7 →    1.2  (found, gone)\n"
        "  tall@hypothesis        → neutral        z   16.3 →      –  (found, gone)\n"
        "  full-lex-overlap       → entailment     z    3.0 →    5.5  "
        "(NOT found, still significant)\n"
        "evaluate (accuracy %):\n"
        "  method                    dev  test-hard\n"
        "  w/ D0                   91.00      63.50\n"
        "  w/ Seq-Z <long name>        –      70.00\n"
    )


def test_runs_that_did_not_learn_are_said_under_the_tables(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    path = run / "evaluate/results.json"
    results = json.loads(path.read_text(encoding="utf-8"))
    results["table"]["rows"][0]["did_not_learn"] = 1
    path.write_text(json.dumps(results), encoding="utf-8")
    line = "w/ D0: 1 of 2 runs did not learn (kept in the means)"
    assert _printed(run).endswith(f"  w/ Seq-Z <long name>        –      70.00\n  {line}\n")
    html = re.sub(r"\n\s*", "", build_report(run))
    assert f"</table><p class='bad'>{line}</p>" in html
    assert "<tr><td>w/ D0 <span class='muted'>(2 runs)</span></td>" in html


def test_report_template_lays_out_every_section(tmp_path: Path) -> None:
    text = build_report(make_run(tmp_path))
    html = re.sub(r"\n\s*", "", text)  # the template's line breaks between tags
    assert text.startswith("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>")
    assert text.endswith("</body></html>\n")
    assert "<title>zdebias run: hand-made</title>" in html
    assert "<p>A &lt;small&gt; run</p>" in html
    assert "last invocation 12.2 s · finished –" in html
    # artifacts: escaped descriptions, missing after-cells, both verdicts
    assert "<td>a &#x27;tall&#x27; &lt;b&gt;</td>" in html and "<td>say &quot;x&quot;</td>" in html
    assert (
        '<td class="num">16.3</td><td class="num">1,177</td><td class="num">#2</td>'
        '<td class="num">–</td><td class="num">–</td><td class="num">–</td>'
        '<td><span class="ok">found</span> · <span class="ok">gone</span></td></tr>'
    ) in html
    assert '<span class="bad">not found</span> · <span class="bad">still significant</span>' in html
    assert "(before: 4.50, after: 4.50)" in html
    # top features: the after side is longer than the before side
    assert (
        '<tr><td></td><td></td><td class="num"></td><td class="num"></td><td class="num"></td>'
        '<td><code>a&amp;b</code></td><td class="num">4.0</td><td class="num">2,000</td>'
        '<td class="num">0.66</td></tr>'
    ) in html
    # evaluation: average column, missing and significant cells, group table
    assert "<th>Method (model w/ data)</th><th>dev</th><th>test-hard</th><th>Avg.</th>" in html
    assert (
        "<tr><td>w/ D0 <span class='muted'>(2 runs)</span></td><td class=\"num\">91.00±1.00</td>"
        '<td class="num">63.50±2.50</td><td class="num">77.25±1.75</td></tr>'
    ) in html
    assert (
        '<tr><td>w/ Seq-Z &lt;long name&gt;</td><td class="num">–</td>'
        '<td class="num"><u>70.00</u></td><td class="num">–</td></tr>'
    ) in html
    assert "<p>w/ D0 on hans, by heuristic and gold label:</p><table><tr><th>heuristic</th>" in html
    assert (
        '<tr><td>lexical_overlap</td><td class="num">90.00±5.00</td><td class="num">–</td>' in html
    )
    # stages: resumed, notes, seconds
    assert (
        "<span class='ok'>done</span> <span class='muted'>(resumed)</span></td>"
        '<td class="num">–</td><td></td><td></td><td>one<br>two &amp; three</td></tr>'
    ) in html
    assert '<td class="num">3</td>' in html
