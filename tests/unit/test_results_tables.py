"""scripts/results_tables.py reads the numbers docs/results.md prints: per-cell counts and hand
labels from a small run folder written here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers.script_module import load_script


@pytest.fixture(scope="module")
def tables() -> Any:
    return load_script("results_tables")


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _row(i: int, label: str, hypothesis: str, cell: str, **meta: Any) -> dict[str, Any]:
    return {
        "id": f"gen-s1:{i}",
        "premise": f"premise {i}",
        "hypothesis": hypothesis,
        "label": label,
        "meta": {"cell": cell, **meta},
    }


@pytest.fixture
def run(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A sample stage (4 rows, 2 cells), its judge (keeps 2), and an unrelated judge of another
    sample stage whose rows reuse the same ids (as `sample` stages do)."""
    cell_a, cell_b = "lex-overlap>0.7→neutral", "to@hypothesis→entailment"
    samples = [
        _row(0, "neutral", "h0", cell_a),
        _row(1, "neutral", "h1", cell_a),
        _row(2, "entailment", "h2", cell_b),
        _row(3, "entailment", "h3", cell_b),
    ]
    _jsonl(tmp_path / "s/samples.jsonl", samples)
    cells = {
        "n_cells": 2,
        "asked": 8,
        "fired": 4,
        "short": 4,
        "n_skipped": 1,
        "rows": [
            {
                "cell": cell_a,
                "steer": "copy",
                "asked": 4,
                "generated": 9,
                "fired": 2,
                "z_before": 36.88,
                "z_after": 29.85,
            },
            {
                "cell": cell_b,
                "steer": "prefix",
                "asked": 4,
                "generated": 5,
                "fired": 2,
                "z_before": 24.59,
                "z_after": 21.4,
            },
        ],
    }
    (tmp_path / "s/summary.json").write_text(json.dumps({"cells": cells}))
    kept = [dict(samples[0], meta={**samples[0]["meta"], "confidence": 0.61, "delta_p": 0.3})]
    kept.append(dict(samples[2], meta={**samples[2]["meta"], "confidence": 0.7, "delta_p": 0.26}))
    rejected = [
        dict(samples[1], meta={**samples[1]["meta"], "confidence": 0.2, "delta_p": -0.1}),
        dict(samples[3], meta={**samples[3]["meta"], "confidence": 0.1, "delta_p": 0.01}),
    ]
    _jsonl(tmp_path / "j/kept.jsonl", kept)
    _jsonl(tmp_path / "j/rejected.jsonl", rejected)
    per_cell = {cell_a: {"n": 2, "kept": 1}, cell_b: {"n": 2, "kept": 1}}
    (tmp_path / "j/summary.json").write_text(json.dumps({"per_cell": per_cell}))
    # another stage's kept rows: same ids, other hypotheses
    _jsonl(tmp_path / "o/kept.jsonl", [_row(0, "neutral", "other", cell_a)])
    (tmp_path / "o/summary.json").write_text(json.dumps({"per_cell": {}}))

    def out(path: str) -> dict[str, str]:
        return {"path": path}

    manifest = {
        "stages": [
            {
                "name": "samples_targeted",
                "stage": "sample",
                "status": "done",
                "outputs": {"data": out("s/samples.jsonl"), "summary": out("s/summary.json")},
            },
            {
                "name": "judged",
                "stage": "confidence-filter",
                "status": "done",
                "outputs": {
                    "data": out("j/kept.jsonl"),
                    "rejected": out("j/rejected.jsonl"),
                    "summary": out("j/summary.json"),
                },
            },
            {
                "name": "other",
                "stage": "confidence-filter",
                "status": "skipped",
                "outputs": {"data": out("o/kept.jsonl"), "summary": out("o/summary.json")},
            },
        ]
    }
    return tmp_path, manifest


def test_cells_table_reads_counts_judges_and_z(tables: Any, run: tuple[Path, Any]) -> None:
    folder, manifest = run
    lines = tables.targeted(folder, manifest, 0)
    assert lines[0] == (
        "`samples_targeted`: 2 cells, 8 rows asked, 4 written with their feature, 4 short; "
        "1 cells skipped."
    )
    assert "| kept by `judged` |" in lines[2] and "other" not in lines[2]
    assert "| lex-overlap>0.7→neutral | copy | 4 | 9 | 2 | 1/2 | 36.9 → 29.9 |" in lines
    assert "| to@hypothesis→entailment | prefix | 4 | 5 | 2 | 1/2 | 24.6 → 21.4 |" in lines
    examples = [line for line in lines if "| kept |" in line or "| rejected |" in line]
    assert len(examples) == 4  # one kept and one rejected per cell
    assert "| lex-overlap>0.7→neutral | kept | premise 0 | h0 | 0.61 | +0.30 |" in examples


def test_a_judge_of_another_sample_stage_with_the_same_cells_is_not_counted(
    tables: Any, run: tuple[Path, Any]
) -> None:
    """Judges are matched to their sample stage by the recipe's ``input`` (config.yaml); a
    judge of another stage that shares the cells is left out (and without config.yaml, the
    shared cells are all there is to go by)."""
    folder, manifest = run
    per_cell = {"lex-overlap>0.7→neutral": {"n": 5, "kept": 4}}
    (folder / "o/summary.json").write_text(json.dumps({"per_cell": per_cell}))
    manifest["stages"][2]["outputs"]["rejected"] = {"path": "o/kept.jsonl"}
    assert "| kept by `judged` | kept by `other` |" in tables.targeted(folder, manifest, 0)[2]
    config = "stages:\n  judged: {input: samples_targeted}\n  other: {input: samples_premised}\n"
    (folder / "config.yaml").write_text(config)
    lines = tables.targeted(folder, manifest, 0)
    assert "| kept by `judged` | z before" in lines[2]
    assert "| lex-overlap>0.7→neutral | copy | 4 | 9 | 2 | 1/2 | 36.9 → 29.9 |" in lines


def test_hand_labels_count_right_garbled_and_each_judges_hits(
    tables: Any, run: tuple[Path, Any]
) -> None:
    folder, manifest = run
    hand = folder / "hand.json"
    labels = {"gen-s1:0": "neutral", "gen-s1:1": None, "gen-s1:2": "contradiction"}
    hand.write_text(json.dumps({"stage": "s", "labels": labels}))
    lines = tables.hand_labels(folder, manifest, hand)
    assert lines[0] == (
        f"3 rows of `s` labelled by hand ({hand}): 1 carry the label the labeller gave, "
        "1 too garbled to label, 1 readable with another label."
    )
    assert "| entailment | 1 | 0 |" in lines and "| neutral | 2 | 1 |" in lines
    # the judge kept gen-s1:0 (right) and gen-s1:2 (wrong); `other` kept another gen-s1:0
    assert "| `judged` | 2 | 1 |" in lines
    assert not any("`other`" in line for line in lines)


def test_hand_labels_of_unknown_rows_are_refused(tables: Any, run: tuple[Path, Any]) -> None:
    folder, manifest = run
    hand = folder / "hand.json"
    hand.write_text(json.dumps({"stage": "s", "labels": {"gen-s1:9": "neutral"}}))
    with pytest.raises(
        SystemExit, match=r"hand\.json: 1 ids not in .*samples.jsonl, e.g. 'gen-s1:9'"
    ):
        tables.hand_labels(folder, manifest, hand)
    hand.write_text(json.dumps({"labels": {}}))
    with pytest.raises(SystemExit, match=r"hand\.json: expected"):
        tables.hand_labels(folder, manifest, hand)


def test_hand_labels_of_other_samples_with_the_same_ids_are_refused(
    tables: Any, run: tuple[Path, Any]
) -> None:
    """A rerun writes new samples under the same ids: labels kept with their texts are
    checked against the run's rows, not silently counted against other text."""
    folder, manifest = run
    hand = folder / "hand.json"
    labels = {"gen-s1:0": "neutral", "gen-s1:2": "contradiction"}
    texts = {
        "gen-s1:0": ["premise 0", "h0", "neutral"],
        "gen-s1:2": ["premise 2", "h2", "entailment"],
    }
    hand.write_text(json.dumps({"stage": "s", "labels": labels, "texts": texts}))
    assert tables.hand_labels(folder, manifest, hand)[0].endswith(
        "1 carry the label the labeller gave, 0 too garbled to label, "
        "1 readable with another label."
    )
    texts["gen-s1:2"][1] = "an older run's hypothesis"
    hand.write_text(json.dumps({"stage": "s", "labels": labels, "texts": texts}))
    with pytest.raises(
        SystemExit, match=r"hand\.json: 1 rows were labelled as other text than .*'gen-s1:2'"
    ):
        tables.hand_labels(folder, manifest, hand)


def test_hand_labels_texts_may_name_a_source_row_instead_of_copying_it(
    tables: Any, run: tuple[Path, Any], tmp_path: Path
) -> None:
    """A premise drawn from a shared data file is kept as its row there, read from --data."""
    folder, manifest = run
    source = [{"id": "d:0", "premise": "premise 0", "hypothesis": "x", "label": "neutral"}]
    _jsonl(tmp_path / "data" / "src.jsonl", source)
    hand = folder / "hand.json"
    labels = {"gen-s1:0": "neutral"}
    texts = {
        "gen-s1:0": {"premise_from": ["d:0", "premise"], "hypothesis": "h0", "label": "neutral"}
    }
    doc = {"stage": "s", "labels": labels, "source": "src.jsonl", "texts": texts}
    hand.write_text(json.dumps(doc))
    with pytest.raises(SystemExit, match=r"hand\.json: its texts name rows of 'src\.jsonl'"):
        tables.hand_labels(folder, manifest, hand)
    lines = tables.hand_labels(folder, manifest, hand, tmp_path / "data")
    assert lines[0].endswith(
        "1 carry the label the labeller gave, 0 too garbled to label, "
        "0 readable with another label."
    )
    texts["gen-s1:0"]["premise_from"] = ["d:0", "hypothesis"]  # another text: refused
    hand.write_text(json.dumps(doc))
    with pytest.raises(SystemExit, match=r"1 rows were labelled as other text"):
        tables.hand_labels(folder, manifest, hand, tmp_path / "data")


def test_trainings_counts_the_runs_that_did_not_learn(tables: Any, tmp_path: Path) -> None:
    """One row per train-classifier stage: its seeds, steps, best dev accuracy as mean±std over
    seeds (sample std), and the runs that did not learn; the total under the table."""

    def runs(accs: list[float], bad: int) -> dict[str, Any]:
        out = []
        for i, acc in enumerate(accs):
            row = {"seed": i + 1, "steps": 300 + i, "best": {"dev_accuracy": acc}}
            if i < bad:
                row["did_not_learn"] = "best dev accuracy 33.0% is no better than ..."
            out.append(row)
        return {"runs": out}

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a/runs.json").write_text(json.dumps(runs([0.70, 0.74], 0)))
    (tmp_path / "b/runs.json").write_text(json.dumps(runs([0.33, 0.60, 0.63], 1)))
    stages = [
        {"name": n, "stage": "train-classifier", "status": "done"} for n in ("clf_a", "clf_b")
    ]
    for stage, folder in zip(stages, ("a", "b"), strict=True):
        stage["outputs"] = {"runs": {"path": f"{folder}/runs.json"}}
    lines = tables.trainings(tmp_path, {"stages": [*stages, {"name": "x", "stage": "stats"}]})
    assert lines[2] == "| clf_a | 1, 2 | 300, 301 | 72.0±2.8 | 0 |"
    # mean 52.0; sample std sqrt(((−19)² + 8² + 11²) / 2) = sqrt(273) = 16.5
    assert lines[3] == "| clf_b | 1, 2, 3 | 300, 301, 302 | 52.0±16.5 | 1 |"
    assert lines[-2] == "Trainings that did not learn: 1."


def test_reliance_table_escapes_bars_in_method_names(tables: Any) -> None:
    """The split's slices and gap per method, the gap's p-value against the first method; a
    method named ``Z(pool | D0)`` keeps its bar inside the Markdown cell."""
    cell = lambda mean, std: {"mean": mean, "std": std, "n_runs": 5}  # noqa: E731
    rows = [
        {
            "name": "D0",
            "cells": {
                "aligned": cell(0.9, 0.01),
                "conflicting": cell(0.6, 0.02),
                "free": None,
                "gap": cell(0.3, 0.02),
            },
            "test": None,
        },
        {
            "name": "D0 ∪ Z(pool | D0)",
            "cells": {
                "aligned": cell(0.8, 0.01),
                "conflicting": cell(0.62, 0.0),
                "free": None,
                "gap": cell(0.18, 0.01),
            },
            "test": {"p": 0.0123},
        },
    ]
    lines = tables.reliance({"reliance": rows})
    assert lines[4] == "| D0 | 90.00±1.00 | 60.00±2.00 | – | 30.00±2.00 | – |"
    assert lines[5] == "| D0 ∪ Z(pool \\| D0) | 80.00±1.00 | 62.00±0.00 | – | 18.00±1.00 | 0.012 |"
    assert tables.reliance({}) == []


def test_differences_show_interval_and_holm_when_the_results_have_them(tables: Any) -> None:
    """Results of the Student t-test era print as before; newer ones add the 95 % interval
    and the Holm-adjusted p (issue 55.4)."""
    old = {"difference": 0.02, "p": 0.0312}
    new = {"difference": 0.02, "p": 0.0312, "p_holm": 0.0624, "ci": [0.0031, 0.0369]}
    comparison = {"comparisons": [{"name": "A", "tests": {"hans": old}}]}
    assert tables.differences(comparison, ["hans"])[2] == "| A | +2.00 (p 0.031) |"
    comparison["comparisons"][0]["tests"]["hans"] = new
    assert tables.differences(comparison, ["hans"])[2] == (
        "| A | +2.00 [+0.31, +3.69] (p 0.031, Holm 0.062) |"
    )
