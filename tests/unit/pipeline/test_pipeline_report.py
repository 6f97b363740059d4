"""The HTML report: built from a run's saved JSON only, self-contained, exact numbers."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from zdebias.data.demo import artifact_subsets
from zdebias.data.readers import read_records
from zdebias.data.writers import write_json
from zdebias.errors import ConfigError
from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.runner import run_recipe
from zdebias.report.html import (
    artifact_summary,
    build_report,
    load_run,
    sizes_rows,
    write_report,
)

TRACK = ["sleeping@hypothesis", "tall@hypothesis", "full-lex-overlap"]
FEATURES = ["ngrams", "lex-overlap", "null"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run on the demo corpus (stats, filter, stats) plus a saved evaluation."""
    run = tmp_path_factory.mktemp("report") / "run"
    recipe = recipe_from_dict(
        {
            "name": "report-test",
            "seed": 13,
            "stages": {
                "corpus": {"stage": "demo-data", "n_train": 900, "n_dev": 30, "n_test": 30},
                "before": {
                    "stage": "stats",
                    "input": "corpus.train",
                    "features": FEATURES,
                    "track": TRACK,
                },
                "zf": {
                    "stage": "filter",
                    "input": "corpus.train",
                    "features": FEATURES,
                    "top_k": 10,
                    "batch_size": 25,
                },
                "after": {"stage": "stats", "input": "zf", "features": FEATURES, "track": TRACK},
            },
        }
    )
    manifest = run_recipe(recipe, run, progress=False)
    # a saved evaluation, as the evaluate stage writes it
    table = {
        "columns": ["dev", "test"],
        "average": False,
        "rows": [
            {
                "name": "w/ D0",
                "n_runs": 2,
                "cells": {
                    "dev": {"mean": 0.91, "std": 0.01, "n_runs": 2},
                    "test": {"mean": 0.6350, "std": 0.0250, "n_runs": 2},
                },
            },
            {
                "name": "w/ Seq-Z",
                "n_runs": 2,
                "cells": {
                    "dev": {"mean": 0.80, "std": 0.02, "n_runs": 2},
                    "test": {"mean": 0.7, "std": 0.0, "n_runs": 2, "significant": True},
                },
            },
        ],
    }
    write_json(
        {"table": table, "groups": [], "comparison": None, "documents": []},
        run / "evaluate" / "results.json",
    )
    manifest["stages"].append(
        {
            "name": "evaluate",
            "stage": "evaluate",
            "status": "done",
            "seconds": 1.0,
            "outputs": {"results": {"path": "evaluate/results.json", "kind": "json"}},
        }
    )
    write_json(manifest, run / "manifest.json")
    return run


def _stats(run: Path, name: str) -> dict:
    return json.loads((run / name / "stats.json").read_text())


def test_planted_artifacts_are_found_and_gone(run_dir: Path) -> None:
    rows = artifact_summary(load_run(run_dir))
    assert [r["feature"] for r in rows] == TRACK
    before, after = _stats(run_dir, "before"), _stats(run_dir, "after")
    for row in rows:
        label = row["label"]
        assert row["before"]["z"] == before["tracked"][row["feature"]][label]["z"]
        assert row["after"]["z"] == after["tracked"][row["feature"]][label]["z"]
        assert row["before"]["rank"] <= 3 and row["found"] is True
        assert row["after"]["z"] < after["z_critical"] and row["gone"] is True


def test_sizes_follow_the_manifest(run_dir: Path) -> None:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    kept = next(s for s in manifest["stages"] if s["name"] == "zf")["rows_out"]
    subsets = artifact_subsets(read_records(run_dir / "corpus" / "test.jsonl", task="nli"))
    assert [(r["what"], r["stage"], r["n"]) for r in sizes_rows(load_run(run_dir))] == [
        ("Original D0 (demo train, planted artifacts)", "corpus", 900),
        ("demo dev (planted artifacts)", "corpus", 30),
        ("demo test (artifact-free)", "corpus", 30),
        ("demo test, hard: an artifact points to another label", "corpus", len(subsets["hard"])),
        ("demo test, easy: an artifact points to the gold label", "corpus", len(subsets["easy"])),
        ("Z(D) — z-filtered", "zf", kept["kept"]),
        ("Z⁻(D) — rejected by z-filtering", "zf", kept["rejected"]),
    ]
    assert kept["kept"] + kept["rejected"] == 900


def test_the_html_is_self_contained_and_holds_the_numbers(run_dir: Path) -> None:
    html = build_report(run_dir)
    for section in (
        "Planted artifacts: found and gone",
        "z-statistics (Gardner plots)",
        "Top biased features per label",
        "Dataset sizes",
        "Evaluation",
        "Stages",
    ):
        assert f"<h2>{section}</h2>" in html
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(images) == 3  # two Gardner plots and the evaluation's bar chart
    assert html.count('<img alt="accuracy of ') == 1
    assert all(base64.b64decode(img)[:8] == b"\x89PNG\r\n\x1a\n" for img in images)
    assert not re.search(r'(src|href)="(https?:)?//', html) and "<script" not in html
    before = _stats(run_dir, "before")
    top = before["top"]["contradiction"][0]
    assert f'<code>{top["feature"]}</code></td><td class="num">{top["z"]:.1f}</td>' in html
    # evaluation cells: percent, mean±std over runs, significant ones underlined
    assert '<td class="num">91.00±1.00</td><td class="num">63.50±2.50</td>' in html
    assert '<td class="num">80.00±2.00</td><td class="num"><u>70.00±0.00</u></td>' in html
    assert html.count('<span class="ok">found</span>') == 3
    assert html.count('<span class="ok">gone</span>') == 3
    # every stats stage side by side: examples and significant features, from its stats.json
    assert "<h2>Significant features per dataset</h2>" in html
    for name, data in (("before", "corpus.train"), ("after", "zf")):
        stats = _stats(run_dir, name)
        row = (
            f"<tr><td><code>{name}</code></td><td><code>{data}</code></td>"
            f'<td class="num">{stats["n_examples"]:,}</td>'
            f'<td class="num">{stats["n_significant"]:,}</td>'
        )
        assert row in html, row


def test_write_report_and_errors(run_dir: Path, tmp_path: Path) -> None:
    path = write_report(run_dir)
    assert path == run_dir / "report.html" and path.read_text().startswith("<!DOCTYPE html>")
    other = write_report(run_dir, tmp_path / "r.html")
    assert other.read_text() == path.read_text()
    with pytest.raises(ConfigError, match="not a zdebias run folder"):
        load_run(tmp_path)


@pytest.fixture
def cells_run(run_dir: Path, tmp_path: Path) -> Path:
    """The run above plus a targeted sample stage, a judge of it and a transform stage, saved
    as the stages write them (their summaries); ``before`` / ``after`` are the stats stages."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    manifest = json.loads((run / "manifest.json").read_text())
    cells = [
        ("sleeping@hypothesis", "entailment", "contradiction", "prefix", 12, 19, 9),
        ("tall@hypothesis", "contradiction", "neutral", "prefix", 5, 6, 5),
    ]
    rows = [
        {
            "cell": f"{f}→{lab}",
            "feature": f,
            "label": lab,
            "favoured": fav,
            "steer": steer,
            "asked": asked,
            "generated": gen,
            "fired": fired,
            "missed": 0,
            "prefix_only": gen - fired,
            "malformed": 0,
            "duplicates": 0,
            "short": asked - fired,
        }
        for f, lab, fav, steer, asked, gen, fired in cells
    ]
    per_cell = {
        "sleeping@hypothesis→entailment": {"n": 9, "kept": 4, "rejected": 5, "pass_rate": 0.4444}
    }
    saved = {
        "targeted": ("sample", {"cells": {"rows": rows}}, {"generator": "g"}),
        "judge": ("confidence-filter", {"per_cell": per_cell}, {"input": "targeted"}),
        "other_judge": ("confidence-filter", {"per_cell": {}}, {"input": "elsewhere"}),
        "rules": ("transform", {"cells": {"tall@hypothesis→contradiction": 3}}, {}),
    }
    for name, (kind, summary, config) in saved.items():
        write_json(summary, run / name / "summary.json")
        manifest["stages"].append(
            {
                "name": name,
                "stage": kind,
                "status": "done",
                "outputs": {"summary": {"path": f"{name}/summary.json", "kind": "json"}},
            }
        )
        manifest["config"]["stages"][name] = {"stage": kind, **config}
    write_json(manifest, run / "manifest.json")
    return run


def test_the_report_shows_the_cells_asked_accepted_and_their_z(cells_run: Path) -> None:
    from zdebias.report.cells import feature_z
    from zdebias.report.html import report_context

    (table,) = report_context(load_run(cells_run))["cells"]
    assert (table["stage"], table["judges"], table["rules"]) == ("targeted", ["judge"], True)
    assert (table["before"], table["after"]) == ("before", "after")
    sleeping, tall = table["rows"]
    assert (sleeping["asked"], sleeping["generated"], sleeping["written"]) == (12, 19, 9)
    assert sleeping["accepted_text"] == ["4/9"] and tall["accepted_text"] == ["0/0"]
    assert (sleeping["rule_made"], tall["rule_made"]) == (0, 3)
    before, after = _stats(cells_run, "before"), _stats(cells_run, "after")
    for row in (sleeping, tall):
        tracked = {
            side: stats["tracked"][row["feature"]][row["favoured"]]
            for side, stats in (("before", before), ("after", after))
        }
        assert row["z_before"]["z"] == pytest.approx(tracked["before"]["z"], abs=1e-3)
        assert row["z_after"]["z"] == pytest.approx(tracked["after"]["z"], abs=1e-3)
        assert row["z_before"]["n"] == tracked["before"]["n"]
        assert row["z_before"]["significant"] and not row["z_after"]["significant"]
        untracked = {k: v for k, v in before.items() if k != "tracked"}  # from Gardner points
        got = feature_z(untracked, row["feature"], row["favoured"])
        assert got == {**row["z_before"], "z": pytest.approx(tracked["before"]["z"], abs=1e-3)}
        z = f"{tracked['before']['z']:.1f}* → {tracked['after']['z']:.1f}"
        assert row["z_text"] == z
    page = build_report(cells_run)
    assert "<h2>Shortcut-breaking cells</h2>" in page
    assert "<td>sleeping@hypothesis→entailment</td>" in page
    row = re.search(r"<tr><td>sleeping@hypothesis→entailment</td>.*?</tr>", page).group(0)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    assert cells[5:] == ["12", "19", "9", "4/9", "0", sleeping["z_text"]]


def test_a_run_without_targeted_sampling_has_no_cells_table(run_dir: Path) -> None:
    assert "Shortcut-breaking cells" not in build_report(run_dir)
