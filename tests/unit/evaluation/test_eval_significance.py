"""t-tests against hand-computed values."""

from __future__ import annotations

import math

import pytest

from zdebias.evaluation.significance import compare_results, comparison_markdown, ttest


def test_student_t_matches_hand_computation() -> None:
    # means 2 and 5, both variances 1 → pooled sd 1, se = sqrt(2/3), t = 3 / sqrt(2/3)
    out = ttest([1, 2, 3], [4, 5, 6])
    t = 3 / math.sqrt(2 / 3)
    assert out["t"] == pytest.approx(t)
    # two-tailed p for 4 degrees of freedom: 1 − 1.5·√q + 0.5·q^1.5 with q = t² / (t² + 4)
    q = t * t / (t * t + 4)
    assert out["p"] == pytest.approx(1 - 1.5 * math.sqrt(q) + 0.5 * q**1.5, rel=1e-9)
    assert out["significant"] is True and out["df"] == 4.0


def test_welch_and_degenerate_cases() -> None:
    welch = ttest([1, 2, 3], [4, 5, 6], equal_var=False)
    assert welch["test"] == "welch" and welch["t"] == pytest.approx(3 / math.sqrt(2 / 3))
    one = ttest([0.5], [0.6, 0.7])
    assert one["p"] is None and "two runs" in one["reason"] and one["significant"] is False
    flat = ttest([0.5, 0.5], [0.5, 0.5])
    assert flat["p"] is None and "zero variance" in flat["reason"]
    not_sig = ttest([0.80, 0.82, 0.84], [0.81, 0.83, 0.85])
    assert not_sig["significant"] is False and not_sig["p"] > 0.05


def _doc(name: str, values: dict[str, list[float]]) -> dict:
    n = len(next(iter(values.values())))
    runs = [
        {"model": f"{name}/{i}", "metrics": {k: v[i] for k, v in values.items()}} for i in range(n)
    ]
    return {
        "kind": "zdebias-evaluation",
        "name": name,
        "runs": runs,
        "suites": [{"name": k} for k in values if "/" not in k],
    }


def test_compare_results_per_suite_and_average() -> None:
    base = _doc("base", {"snli-hard": [0.1, 0.2, 0.3], "hans": [0.5, 0.5, 0.6]})
    other = _doc("seq-z", {"snli-hard": [0.4, 0.5, 0.6], "hans": [0.5, 0.6, 0.5]})
    cmp = compare_results([base, other], average=True)
    assert cmp["baseline"] == "base"
    tests = cmp["comparisons"][0]["tests"]
    assert list(tests) == ["snli-hard", "hans", "Avg."]
    assert tests["snli-hard"]["t"] == pytest.approx(0.3 / math.sqrt(2 * 0.01 / 3))
    assert tests["snli-hard"]["difference"] == pytest.approx(0.3)
    assert tests["snli-hard"]["significant"] is True
    assert tests["hans"]["difference"] == pytest.approx(0.0) and not tests["hans"]["significant"]
    # per-run averages: base (0.3, 0.35, 0.45), other (0.45, 0.55, 0.55)
    assert tests["Avg."]["baseline"]["mean"] == pytest.approx((0.3 + 0.35 + 0.45) / 3)
    text = comparison_markdown(cmp)
    assert "| seq-z | snli-hard | 20.00±10.00 | 50.00±10.00 | +30.00 |" in text
    with pytest.raises(ValueError, match="baseline and at least one"):
        compare_results([base])
