"""Metrics for imbalanced sets (issue 39.5): per-label accuracy, macro-F1 and balanced
accuracy against hand computations, in the results document, the tables and compare."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zdebias.data.schema import Record
from zdebias.evaluation.metrics import flat_label_metrics, label_metrics, label_table
from zdebias.evaluation.significance import compare_results
from zdebias.evaluation.suites import score_predictions
from zdebias.evaluation.tables import render_markdown

NLI = ["entailment", "neutral", "contradiction"]


def _pair(i: int, label: str) -> Record:
    return Record(f"r{i}", label, "a premise", "a hypothesis", None, {})


def test_majority_guesser_on_imbalanced_data() -> None:
    """8 'a' and 2 'b', always 'a': accuracy 0.8 looks good; balanced accuracy 0.5 and
    macro-F1 (2·0.8·1/1.8 + 0) / 2 = 0.4444 show the missed label."""
    m = label_metrics(["a"] * 8 + ["b"] * 2, ["a"] * 10, ["a", "b"])
    assert m["balanced_accuracy"] == pytest.approx(0.5)
    assert m["macro_f1"] == pytest.approx((2 * 0.8 / 1.8) / 2)
    assert m["per_label_f1"]["a"] == {
        "n": 8,
        "n_predicted": 10,
        "recall": 1.0,
        "precision": 0.8,
        "f1": pytest.approx(16 / 18),
    }
    assert m["per_label_f1"]["b"] == {
        "n": 2,
        "n_predicted": 0,
        "recall": 0.0,
        "precision": 0.0,
        "f1": 0.0,
    }


def test_two_way_set_uses_its_own_label_space() -> None:
    """HANS-like: a 3-way model mapped to entailment / non-entailment; the metrics are over
    those two labels (neutral and contradiction are not labels of the set)."""
    records = [_pair(0, "entailment"), _pair(1, "entailment"), _pair(2, "non-entailment")]
    records += [_pair(3, "non-entailment"), _pair(4, "non-entailment")]
    probs = np.array(
        [
            [0.8, 0.1, 0.1],  # entailment ✓
            [0.2, 0.7, 0.1],  # non-entailment ✗
            [0.1, 0.1, 0.8],  # non-entailment ✓
            [0.1, 0.8, 0.1],  # non-entailment ✓
            [0.9, 0.05, 0.05],  # entailment ✗
        ]
    )
    out = score_predictions(probs, NLI, records)
    assert out["mapping"] == "non-entailment-sum" and out["accuracy"] == pytest.approx(0.6)
    assert list(out["per_label_f1"]) == ["entailment", "non-entailment"]
    # entailment: recall 1/2, precision 1/2, F1 1/2; non-entailment: recall 2/3, precision 2/3
    assert out["balanced_accuracy"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert out["macro_f1"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    flat = flat_label_metrics("hans", out)
    assert flat == pytest.approx(
        {
            "hans macro-F1": 7 / 12,
            "hans balanced accuracy": 7 / 12,
            "hans accuracy on entailment": 0.5,
            "hans F1 on entailment": 0.5,
            "hans accuracy on non-entailment": 2 / 3,
            "hans F1 on non-entailment": 2 / 3,
        }
    )
    # the accuracy per label agrees with the existing per_label cells
    assert out["per_label"]["non-entailment"]["accuracy"] == pytest.approx(2 / 3)


def test_a_prediction_outside_the_sets_labels_counts_as_wrong_only() -> None:
    """A 3-way model read directly on a set of entailment / contradiction: its 'neutral'
    lowers recall and is in no label's precision or in the macro average."""
    records = [_pair(0, "entailment"), _pair(1, "entailment"), _pair(2, "contradiction")]
    probs = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])
    out = score_predictions(probs, NLI, records)
    assert out["mapping"] == "direct" and list(out["per_label_f1"]) == NLI[::2]
    ent = out["per_label_f1"]["entailment"]
    assert (ent["recall"], ent["precision"]) == (0.5, 1.0) and ent["f1"] == pytest.approx(2 / 3)
    assert out["macro_f1"] == pytest.approx((2 / 3 + 1) / 2)
    assert out["balanced_accuracy"] == pytest.approx(0.75)


def _doc(name: str, runs: list[tuple[float, float, float]]) -> dict:
    """A results document on suite 'snli' whose runs have (accuracy, macro-F1, balanced)."""
    out = []
    for acc, f1, bal in runs:
        per_label = {
            "a": {"n": 8, "n_predicted": 8, "recall": bal, "precision": 0.5, "f1": f1},
            "b": {"n": 2, "n_predicted": 2, "recall": bal, "precision": 0.5, "f1": f1},
        }
        result = {
            "accuracy": acc,
            "macro_f1": f1,
            "balanced_accuracy": bal,
            "per_label_f1": per_label,
        }
        metrics = {"snli": acc, **flat_label_metrics("snli", result)}
        out.append({"model": f"{name}/{len(out)}", "results": {"snli": result}, "metrics": metrics})
    return {"kind": "zdebias-evaluation", "name": name, "suites": [{"name": "snli"}], "runs": out}


def test_results_tables_show_the_new_metrics() -> None:
    doc = _doc("ce", [(0.80, 0.40, 0.50), (0.82, 0.60, 0.70)])
    table = label_table(doc)
    assert table is not None and table["suites"][0]["macro_f1"]["mean"] == pytest.approx(0.5)
    text = render_markdown(doc)
    lines = text.splitlines()
    # the summary table keeps its shape: method × suite accuracy
    assert "| ce | 81.00±1.41 |" in lines
    at = lines.index("### macro-F1 and balanced accuracy")
    assert lines[at + 2 : at + 5] == [
        "| suite | accuracy | macro-F1 | balanced accuracy |",
        "|---|---:|---:|---:|",
        "| snli | 81.00±1.41 | 50.00±14.14 | 60.00±14.14 |",
    ]
    at = lines.index("### per gold label")
    assert lines[at + 2] == "| suite | gold label | n | accuracy (recall) | precision | F1 |"
    assert lines[at + 4] == "| snli | a | 8 | 60.00±14.14 | 50.00±0.00 | 50.00±14.14 |"
    # a results file written before the metrics existed renders as before
    old = _doc("old", [(0.8, 0.4, 0.5)])
    for run in old["runs"]:
        run["results"]["snli"] = {"accuracy": 0.8}
        run["metrics"] = {"snli": 0.8}
    assert label_table(old) is None and "macro-F1" not in render_markdown(old)


def test_compare_tests_macro_f1_and_balanced_accuracy() -> None:
    base = _doc("base", [(0.80, 0.40, 0.50), (0.81, 0.42, 0.52), (0.82, 0.44, 0.54)])
    other = _doc("new", [(0.80, 0.60, 0.70), (0.81, 0.62, 0.72), (0.82, 0.64, 0.74)])
    cmp = compare_results([base, other], average=True)
    tests = cmp["comparisons"][0]["tests"]
    assert list(tests) == ["snli", "snli macro-F1", "snli balanced accuracy", "Avg."]
    # same spread (sd 0.02) on both sides, means 0.2 apart: t = 0.2 / sqrt(2 · 0.0004 / 3)
    for key in ("snli macro-F1", "snli balanced accuracy"):
        assert tests[key]["difference"] == pytest.approx(0.2)
        assert tests[key]["t"] == pytest.approx(0.2 / math.sqrt(2 * 0.0004 / 3))
        assert tests[key]["significant"] is True
    assert tests["snli"]["significant"] is False and tests["snli"]["p"] == pytest.approx(1.0)
    # Avg. stays the mean of the suites' accuracies, not of the new metrics
    assert tests["Avg."]["baseline"]["mean"] == pytest.approx(0.81)
