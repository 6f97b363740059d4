"""Reliance on shortcuts in evaluate and compare: accuracy per slice of a shortcut split, the
gap aligned − conflicting per run and over runs, and its t-test between methods."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as scipy_stats

from zdebias.data.schema import Record
from zdebias.data.writers import write_records
from zdebias.errors import ConfigError
from zdebias.evaluation import reliance
from zdebias.evaluation.reliance import GAP, MEANING, read_split
from zdebias.evaluation.significance import compare_results
from zdebias.evaluation.suites import Suite
from zdebias.evaluation.tables import render_markdown

LABELS = ("negative", "positive")
#: per fake model: which aligned and which conflicting rows (by index) it gets right
RIGHT = {
    "A0": (range(4), [0]),
    "A1": (range(4), [1]),
    "A2": (range(4), [0, 1]),
    "B0": (range(4), [0, 1, 2]),
    "B1": ([0, 1, 2], range(4)),
    "B2": (range(4), [1, 2, 3]),
}


class _Fake:
    """A classifier whose right answers are fixed by its name (:data:`RIGHT`)."""

    input = "text"

    def __init__(self, name: str) -> None:
        self.name = Path(name).name
        self.labels = list(LABELS)

    def predict_each(self, sets: list[list[Record]], **_: Any) -> list[np.ndarray]:
        out = []
        for records in sets:
            probs = np.zeros((len(records), 2))
            for i, r in enumerate(records):
                kind, index = r.id.split("-")
                right = RIGHT[self.name][0 if kind == "a" else 1]
                ok = kind == "f" or int(index) in right
                gold = LABELS.index(r.label)
                probs[i, gold if ok else 1 - gold] = 1.0
            out.append(probs)
        return out


@pytest.fixture
def split_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "split"
    parts = {"aligned": "a", "conflicting": "c", "free": "f"}
    sizes = {"aligned": 4, "conflicting": 4, "free": 2}
    for name, kind in parts.items():
        rows = [
            Record(f"{kind}-{i}", LABELS[i % 2], text=f"{kind} w{i}") for i in range(sizes[name])
        ]
        write_records(rows, folder / f"{name}.jsonl")
    summary = {"by": "features", "counts": sizes, "warnings": ["only 4 conflicting rows"]}
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def _evaluate(method: str, split_dir: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    import zdebias.classify.on_ray as on_ray

    monkeypatch.setattr(on_ray, "classifier_for", lambda model, *a, **k: _Fake(str(model)))
    extra = split_dir / "aligned.jsonl"  # any user suite beside the split
    return reliance.evaluate_with_split(
        [f"{method}{s}" for s in range(3)],
        [Suite("plain", str(extra), format="jsonl")],
        split_dir,
        name=method,
        progress=False,
    )


def test_evaluate_reports_accuracy_per_slice_and_the_gap(
    split_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = _evaluate("A", split_dir, monkeypatch)
    assert [s["name"] for s in doc["suites"]] == [
        "plain",
        "shortcut-aligned",
        "shortcut-conflicting",
        "shortcut-free",
    ]
    assert [r["reliance"] for r in doc["runs"]] == [
        {"aligned": 1.0, "conflicting": 0.25, "free": 1.0, "gap": 0.75},
        {"aligned": 1.0, "conflicting": 0.25, "free": 1.0, "gap": 0.75},
        {"aligned": 1.0, "conflicting": 0.5, "free": 1.0, "gap": 0.5},
    ]
    gap = doc["summary"][GAP]
    assert gap["values"] == [0.75, 0.75, 0.5]
    assert gap["mean"] == pytest.approx(2 / 3) and gap["std"] == pytest.approx(0.1443376)
    assert doc["shortcut_split"]["counts"] == {"aligned": 4, "conflicting": 4, "free": 2}
    assert doc["shortcut_split"]["meaning"] == MEANING
    text = render_markdown(doc)
    # worst group first (none has 20 rows here: –), conflicting, aligned, the gap, free
    assert "| A | – | 33.33±14.43 | 100.00±0.00 | 66.67±14.43 | 100.00±0.00 |" in text
    assert MEANING in text and "Warning: only 4 conflicting rows" in text


def test_compare_t_tests_the_gap_between_methods(
    split_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _evaluate("A", split_dir, monkeypatch)
    b = _evaluate("B", split_dir, monkeypatch)
    assert b["summary"][GAP]["values"] == [0.25, -0.25, 0.25]
    comparison = compare_results([a, b])
    test = comparison["comparisons"][0]["tests"][GAP]
    # the fake runs have no seeds: they do not pair, so Welch's test (issue 55.4)
    expected = scipy_stats.ttest_ind([0.25, -0.25, 0.25], [0.75, 0.75, 0.5], equal_var=False)
    assert test["difference"] == pytest.approx(1 / 12 - 2 / 3)
    assert test["t"] == pytest.approx(float(expected.statistic))
    assert test["p"] == pytest.approx(float(expected.pvalue))
    text = reliance.reliance_markdown([a, b], comparison)
    # worst group (none has 20 rows: –), conflicting, aligned, the gap beside them, free
    assert "| B | – | 83.33±14.43 | 91.67±14.43 | 8.33±28.87 | 100.00±0.00 | -58.33 |" in text
    # the gap is Holm-adjusted with the other secondary metrics (macro-F1 ...), never below p
    assert "| p | p (Holm) |" in text and test["family"] == "secondary"
    assert test["p_holm"] >= test["p"] and f"| {test['p_holm']:.4f}" in text


def test_compare_files_shows_the_reliance_table(
    split_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from zdebias.evaluation.significance import compare_files

    paths = []
    for method in ("A", "B"):
        path = tmp_path / f"{method}.json"
        path.write_text(json.dumps(_evaluate(method, split_dir, monkeypatch)))
        paths.append(str(path))
    result, text = compare_files(paths)
    assert GAP in result["comparisons"][0]["tests"]
    assert "gap (aligned − conflicting)" in text and MEANING in text


def test_a_folder_without_a_split_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a shortcut split"):
        read_split(tmp_path)


def test_recipe_split_then_evaluate_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shortcut-split stage feeds an evaluate stage: the table holds the slices, the
    results their reliance rows, table.md the gap and what it means."""
    import zdebias.classify.on_ray as on_ray
    from zdebias.pipeline.loader import recipe_from_dict
    from zdebias.pipeline.runner import run_recipe

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(on_ray, "classifier_for", lambda model, *a, **k: _Fake(str(model)))
    train = [Record(f"g{i}", "positive", text="good film") for i in range(40)]
    train += [Record(f"b{i}", "negative", text="bad film") for i in range(40)]
    write_records(train, tmp_path / "train.jsonl")
    # a-0..a-3 carry their label's word; c-0..c-3 the other label's (and each its own name:
    # a model reads the text, so rows with one text would get one prediction)
    word = {True: "good", False: "bad"}
    test = [Record(f"a-{i}", LABELS[i % 2], text=f"{word[i % 2 == 1]} a{i}") for i in range(4)]
    test += [Record(f"c-{i}", LABELS[i % 2], text=f"{word[i % 2 == 0]} c{i}") for i in range(4)]
    write_records(test, tmp_path / "test.jsonl")
    recipe = recipe_from_dict(
        {
            "name": "s",
            "task": "sentiment",
            "data": {"train": "train.jsonl", "test": "test.jsonl"},
            "stages": {
                "split": {
                    "stage": "shortcut-split",
                    "train": "train",
                    "test": "test",
                    "features": ["unigrams"],
                },
                "eval": {
                    "stage": "evaluate",
                    "classifiers": {"A": "A0", "B": "B1"},
                    "suites": {"test": "test"},
                    "shortcut_split": "split.summary",
                },
            },
        }
    )
    manifest = run_recipe(recipe, tmp_path / "run")
    stages = {s["name"]: s for s in manifest["stages"]}
    assert stages["split"]["rows_out"] == {"aligned": 4, "conflicting": 4, "free": 0}
    results = json.loads((tmp_path / "run" / "eval" / "results.json").read_text())
    assert results["table"]["columns"] == ["test", "shortcut-aligned", "shortcut-conflicting"]
    rows = {row["name"]: row["cells"] for row in results["reliance"]}
    # the split's summary records its test rows: the recipe's suite 'test' is that set
    split = results["documents"][0]["shortcut_split"]
    assert split["suite"] == "test"
    assert [line.split(":")[0] for line in split["warnings"]] == ["only 4 conflicting rows"]
    assert rows["A"]["gap"]["mean"] == 0.75 and rows["B"]["gap"]["mean"] == -0.25
    table = (tmp_path / "run" / "eval" / "table.md").read_text()
    assert MEANING in table and "| B | – | 100.00 | 75.00 | -25.00 | – |" in table
    from html import escape as html_escape

    from zdebias.report.html import build_report

    html = build_report(tmp_path / "run")
    assert html_escape(MEANING) in html and "gap (aligned − conflicting)" in html
    # worst group (–: no group of 20 rows), conflicting 100, aligned 75, as in table.md
    assert (
        '<td>B</td><td class="num">–</td><td class="num">100.00</td><td class="num">75.00</td>'
        in html
    )


def test_evaluate_cli_with_a_shortcut_split(
    split_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    import zdebias.classify.on_ray as on_ray
    from zdebias.cli import app

    monkeypatch.setattr(on_ray, "classifier_for", lambda model, *a, **k: _Fake(str(model)))
    out = tmp_path / "A.json"
    args = ["evaluate", "A0", "A1", "--suite", f"plain={split_dir / 'free.jsonl'}"]
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--shortcut-split", str(split_dir)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["summary"][GAP]["values"] == [0.75, 0.75]
    assert MEANING in out.with_suffix(".md").read_text()
