"""Tables shaped like GD-NLI Tables 2-5, exact Markdown."""

from __future__ import annotations

import pytest

from zdebias.evaluation.significance import compare_results
from zdebias.evaluation.tables import (
    group_markdown,
    group_table,
    render_markdown,
    summary_table,
    table_markdown,
    unlearned_lines,
)


def _run(model: str, seed: int, snli: float, hard: float) -> dict:
    return {
        "model": model,
        "seed": seed,
        "metrics": {"snli": snli, "snli-hard": hard},
        "results": {},
    }


def _doc(name: str, runs: list[dict]) -> dict:
    return {
        "kind": "zdebias-evaluation",
        "name": name,
        "runs": runs,
        "suites": [{"name": "snli"}, {"name": "snli-hard"}],
    }


BASE = _doc("baseline", [_run("b1", 1, 0.9045, 0.8000), _run("b2", 2, 0.9045, 0.8068)])
SEQZ = _doc(
    "Seq-Z",
    [_run("s1", 1, 0.8808, 0.8282), _run("s2", 2, 0.8808, 0.8310), _run("s3", 3, 0.8808, 0.8254)],
)


def test_summary_table_markdown_like_table_2() -> None:
    text = table_markdown(summary_table([BASE, SEQZ]))
    assert text == (
        "| Method | snli | snli-hard |\n"
        "|---|---:|---:|\n"
        "| baseline | 90.45±0.00 | 80.34±0.48 |\n"
        "| Seq-Z | 88.08±0.00 | 82.82±0.28 |"
    )


def test_average_column_and_significance_marks() -> None:
    cmp = compare_results([BASE, SEQZ], average=True)
    table = summary_table([BASE, SEQZ], average=True, comparison=cmp)
    row = table["rows"][1]
    assert row["cells"]["snli-hard"]["significant"] is True
    assert row["cells"]["snli"]["significant"] is False  # zero variance on both sides
    assert row["average"]["mean"] == pytest.approx(
        (0.8808 + 0.8282 + 0.8808 + 0.8310 + 0.8808 + 0.8254) / 6
    )
    text = table_markdown(table)
    assert text.splitlines()[0] == "| Method | snli | snli-hard | Avg. |"
    assert "| Seq-Z | 88.08±0.00 | 82.82±0.28* | 85.45±0.14 |" in text


def test_single_run_cells_have_no_plus_minus() -> None:
    one = _doc("poe", [_run("p", 1, 0.9025, 0.8292)])
    assert table_markdown(summary_table([one])).splitlines()[2] == "| poe | 90.25 | 82.92 |"


def _hans_run(ent_ok: int, non_ok: int) -> dict:
    groups = {
        "lexical_overlap": {
            "entailment": {"n": 10, "n_correct": ent_ok, "accuracy": ent_ok / 10},
            "non-entailment": {"n": 10, "n_correct": non_ok, "accuracy": non_ok / 10},
            "all": {"n": 20, "n_correct": ent_ok + non_ok, "accuracy": (ent_ok + non_ok) / 20},
        }
    }
    return {
        "model": "m",
        "metrics": {"hans": (ent_ok + non_ok) / 20},
        "results": {"hans": {"groups": groups}},
    }


def test_hans_group_table_with_counts() -> None:
    doc = {"name": "m", "suites": [{"name": "hans"}], "runs": [_hans_run(9, 2)]}
    table = group_table(doc, "hans")
    assert table["columns"] == ["entailment", "non-entailment", "all"]
    assert group_markdown(table) == (
        "| heuristic | entailment | non-entailment | all |\n"
        "|---|---:|---:|---:|\n"
        "| lexical_overlap | 90.00 (9/10) | 20.00 (2/10) | 55.00 (11/20) |\n"
        "| **hans overall** |  |  | 55.00 |"
    )
    two = {"name": "m", "suites": [{"name": "hans"}], "runs": [_hans_run(9, 2), _hans_run(7, 4)]}
    cell = group_table(two, "hans")["rows"][0]["cells"]["entailment"]
    assert cell["mean"] == 0.8 and cell["counts"] == [
        {"n": 10, "n_correct": 9},
        {"n": 10, "n_correct": 7},
    ]
    report = render_markdown(two)
    assert "### hans by heuristic and gold label" in report
    assert "| lexical_overlap | 80.00±14.14 | 30.00±14.14 | 55.00±0.00 |" in report
    assert "### runs" in report
    assert group_table(BASE, "snli") is None


def test_runs_that_did_not_learn_are_said_and_kept_in_the_means() -> None:
    flat = {**_run("s3", 3, 0.3516, 0.3569), "did_not_learn": "training loss ended at 1.098"}
    doc = _doc("Seq-Z", [_run("s1", 1, 0.6992, 0.5866), _run("s2", 2, 0.6857, 0.6041), flat])
    table = summary_table([BASE, doc])
    assert "did_not_learn" not in table["rows"][0] and table["rows"][1]["did_not_learn"] == 1
    assert table["rows"][1]["cells"]["snli"]["mean"] == pytest.approx(
        (0.6992 + 0.6857 + 0.3516) / 3
    )
    assert table_markdown(table).splitlines()[3] == "| Seq-Z | 57.88±19.69 | 51.59±13.79 |"
    assert unlearned_lines(table) == ["Seq-Z: 1 of 3 runs did not learn (kept in the means)"]
    text = render_markdown(doc)
    assert (
        "Runs that did not learn (kept in the means above):\n\n- s3: training loss ended at "
        in text
    )


def test_evaluation_reads_why_a_run_did_not_learn(tmp_path) -> None:
    """From the folder's metrics.json: its own reason, or computed for an older summary."""
    import json

    from zdebias.evaluation.suites import _run_info

    old = {"seed": 3, "loss": "ce", "train_label_counts": {"a": 5, "b": 5}}
    old["log_history"] = [{"loss": 0.69}]  # ln 2 = 0.693
    (tmp_path / "metrics.json").write_text(json.dumps(old))
    assert _run_info(str(tmp_path))["did_not_learn"].startswith("training loss ended at 0.690")
    (tmp_path / "metrics.json").write_text(json.dumps({**old, "did_not_learn": None}))
    assert "did_not_learn" not in _run_info(str(tmp_path))
