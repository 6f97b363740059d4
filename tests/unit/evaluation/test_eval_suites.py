"""Scoring on hand-made probability arrays: mappings, breakdowns, summaries."""

from __future__ import annotations

import numpy as np
import pytest

from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.evaluation.suites import (
    flat_metrics,
    map_predictions,
    parse_suite,
    score_predictions,
    summarize,
)

NLI = ["entailment", "neutral", "contradiction"]


def _pair(i: int, label: str, **meta: str) -> Record:
    return Record(f"r{i}", label, "a premise", "a hypothesis", None, dict(meta))


def test_binary_set_sums_neutral_and_contradiction() -> None:
    probs = np.array(
        [
            [0.40, 0.35, 0.25],  # argmax entailment, but 0.60 non-entailment → non-entailment
            [0.60, 0.30, 0.10],  # entailment
            [0.50, 0.30, 0.20],  # tie 0.5 / 0.5 → non-entailment
            [0.10, 0.10, 0.80],  # non-entailment
        ]
    )
    preds, mapping = map_predictions(probs, NLI, {"entailment", "non-entailment"})
    assert mapping == "non-entailment-sum"
    assert preds == ["non-entailment", "entailment", "non-entailment", "non-entailment"]


def test_direct_mapping_and_unreadable_sets() -> None:
    probs = np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]])
    assert map_predictions(probs, NLI, {"neutral"}) == (["neutral", "contradiction"], "direct")
    with pytest.raises(ConfigError, match="cannot be read off a model that predicts"):
        map_predictions(probs[:, :2], ["negative", "positive"], {"entailment"})


def test_score_counts_and_hans_groups() -> None:
    records = [
        _pair(0, "entailment", heuristic="lexical_overlap", subcase="ln_a"),
        _pair(1, "non-entailment", heuristic="lexical_overlap", subcase="ln_b"),
        _pair(2, "non-entailment", heuristic="lexical_overlap", subcase="ln_b"),
        _pair(3, "entailment", heuristic="subsequence", subcase="se_a"),
        _pair(4, "non-entailment", heuristic="subsequence", subcase="sn_a"),
    ]
    probs = np.array(
        [
            [0.9, 0.05, 0.05],  # entailment ✓
            [0.9, 0.05, 0.05],  # entailment ✗
            [0.3, 0.3, 0.4],  # non-entailment ✓
            [0.2, 0.2, 0.6],  # non-entailment ✗
            [0.45, 0.5, 0.05],  # non-entailment ✓
        ]
    )
    out = score_predictions(probs, NLI, records)
    assert out["n"] == 5 and out["n_correct"] == 3 and out["accuracy"] == pytest.approx(0.6)
    assert out["mapping"] == "non-entailment-sum"
    assert out["per_label"]["entailment"] == {"n": 2, "n_correct": 1, "accuracy": 0.5}
    assert out["per_label"]["non-entailment"]["n_correct"] == 2
    assert out["confusion"] == {
        "entailment": {"entailment": 1, "non-entailment": 1},
        "non-entailment": {"entailment": 1, "non-entailment": 2},
    }
    lex = out["groups"]["lexical_overlap"]
    assert lex["entailment"] == {"n": 1, "n_correct": 1, "accuracy": 1.0}
    assert lex["non-entailment"] == {"n": 2, "n_correct": 1, "accuracy": 0.5}
    assert lex["all"]["n_correct"] == 2 and lex["all"]["n"] == 3
    assert out["groups"]["subsequence"]["entailment"]["n_correct"] == 0
    assert out["subgroups"]["lexical_overlap/ln_b/non-entailment"] == {
        "n": 2,
        "n_correct": 1,
        "accuracy": 0.5,
    }
    flat = flat_metrics("hans", out)
    assert flat["hans"] == pytest.approx(0.6)
    assert flat["hans/lexical_overlap"] == pytest.approx(2 / 3)
    assert flat["hans/subsequence/non-entailment"] == 1.0
    assert len(flat) == 1 + 2 * 3


def test_score_without_groups_has_no_group_keys() -> None:
    records = [_pair(0, "neutral"), _pair(1, "contradiction")]
    out = score_predictions(np.array([[0.1, 0.8, 0.1], [0.1, 0.8, 0.1]]), NLI, records)
    assert out["accuracy"] == 0.5 and "groups" not in out
    with pytest.raises(ValueError, match="3 probability rows for 2 records"):
        score_predictions(np.ones((3, 3)) / 3, NLI, records)


def test_summarize_uses_sample_std() -> None:
    s = summarize([0.80, 0.82, 0.84])
    assert s["mean"] == pytest.approx(0.82)
    assert s["std"] == pytest.approx(0.02)  # sqrt(((.02)² + 0 + (.02)²) / 2)
    assert summarize([0.7])["std"] == 0.0 and summarize([0.7])["n_runs"] == 1


def test_parse_suite() -> None:
    s = parse_suite("mnli-m-hard=/data/mnli_hard/MNLIMatchedHardWithHardTest::test")
    assert (s.name, s.path) == ("mnli-m-hard", "/data/mnli_hard/MNLIMatchedHardWithHardTest::test")
    assert parse_suite("/x/snli_1.0_test_hard.jsonl").name == "snli_1"
    with pytest.raises(ConfigError, match="expected NAME=PATH"):
        parse_suite("hans=")
    with pytest.raises(ConfigError, match="reserved"):
        parse_suite("a/b=x.jsonl")
