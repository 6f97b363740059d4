"""Rationale selection: top π of words, min score, adjacent words merged, confidence filter."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from zdebias.classify.predict import load_classifier, predict_proba
from zdebias.counterfactual.rationales import (
    extract_rationales,
    merge_adjacent,
    pick_rationales,
    random_rationales,
    random_spans,
    read_spans,
    select_rationale_words,
)
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError
from zdebias.features.tokenize import word_spans

PREMISE = "A man is sleeping on a bench in the park."
HYPOTHESIS = "The man is sleeping outside."


def test_select_top_share_then_min_score() -> None:
    scores = [0.1, 0.9, 0.5, 0.2, 1.0, 0.35, 0.31]
    # k = round_half_up(0.5 * 7) = 4 → 1.0, 0.9, 0.5, 0.35
    assert select_rationale_words(scores, ratio=0.5, min_score=0.3) == [1, 2, 4, 5]
    # k = round_half_up(0.3 * 7 = 2.1) = 2 → 1.0, 0.9
    assert select_rationale_words(scores, ratio=0.3, min_score=0.3) == [1, 4]
    # the min score drops picked words: k = 4 but 0.35 and 0.5 fall under 0.6
    assert select_rationale_words(scores, ratio=0.5, min_score=0.6) == [1, 4]
    # half-up rounding: 0.3 * 15 = 4.5 → 5 words
    assert len(select_rationale_words([1.0] * 15, ratio=0.3, min_score=0.0)) == 5
    # ties go to the earlier word; at least one word
    assert select_rationale_words([0.5] * 4, ratio=0.5, min_score=0.0) == [0, 1]
    assert select_rationale_words([0.7], ratio=0.3, min_score=0.3) == [0]
    assert select_rationale_words([], ratio=0.3) == []


def test_merge_adjacent_words_into_spans() -> None:
    assert merge_adjacent([5, 0, 1, 3, 6, 7]) == [(0, 2), (3, 4), (5, 8)]
    assert merge_adjacent([]) == []
    assert merge_adjacent([4]) == [(4, 5)]


def test_pick_rationales_ranks_over_both_fields_and_merges_per_field() -> None:
    words = {
        "premise": [(0, 1, 0.2), (2, 5, 0.9), (6, 8, 0.8), (9, 12, 0.1)],
        "hypothesis": [(0, 3, 0.7), (4, 6, 0.95), (7, 9, 0.05)],
    }
    # 7 words, k = 4: 0.95 (h1), 0.9 (p1), 0.8 (p2), 0.7 (h0); adjacent pairs merge
    assert pick_rationales(words, ratio=0.5, min_score=0.3) == {
        "premise": [(2, 8)],
        "hypothesis": [(0, 6)],
    }
    # never merged across the field boundary (p3 and h0 are not adjacent)
    assert pick_rationales(words, ratio=1.0, min_score=0.0) == {
        "premise": [(0, 12)],
        "hypothesis": [(0, 9)],
    }


def test_random_spans_are_t5_style() -> None:
    for seed in range(50):
        spans = random_spans(10, density=0.3, mean_span=2.0, rng=np.random.default_rng(seed))
        assert len(spans) == 2  # round(3 / 2)
        assert sum(e - s for s, e in spans) == 3  # round(0.3 * 10)
        assert all(0 <= s < e <= 10 for s, e in spans)
        assert spans[0][1] < spans[1][0]  # disjoint, never touching
    a = random_spans(30, rng=np.random.default_rng(7))
    assert a == random_spans(30, rng=np.random.default_rng(7))
    assert random_spans(1, rng=np.random.default_rng(0)) == [(0, 1)]
    rec = Record("r", "neutral", premise=PREMISE, hypothesis=HYPOTHESIS)
    spans = random_rationales(rec, fields="hypothesis", rng=np.random.default_rng(0))
    assert list(spans) == ["hypothesis"]
    ((s, e),) = spans["hypothesis"]  # 5 words → 2 words, 1 span
    assert len(word_spans(HYPOTHESIS[s:e])) == 2


def test_read_spans_validates() -> None:
    rec = Record(
        "r",
        "neutral",
        premise=PREMISE,
        hypothesis=HYPOTHESIS,
        meta={"rationales": {"premise": [[2, 5], [18, 20]], "hypothesis": []}},
    )
    assert read_spans(rec) == {"premise": [(2, 5), (18, 20)], "hypothesis": []}
    with pytest.raises(DataError, match="no rationales"):
        read_spans(rec.replace(meta={}), path="x.jsonl")
    with pytest.raises(DataError, match="bad span"):
        read_spans(rec.replace(meta={"rationales": {"premise": [[2, 5], [4, 8]]}}))
    with pytest.raises(DataError, match="bad span"):
        read_spans(rec.replace(meta={"rationales": {"premise": [[2, 500]]}}))
    with pytest.raises(DataError, match="not one of"):
        read_spans(rec.replace(meta={"rationales": {"text": [[0, 1]]}}))


def _records(clf) -> tuple[list[Record], str]:
    base = Record("b", "entailment", premise=PREMISE, hypothesis=HYPOTHESIS)
    (p,) = predict_proba(clf, [base])
    pred = clf.labels[int(np.argmax(p))]
    other = next(lab for lab in clf.labels if lab != pred)
    recs = [base.replace(id=f"r{i}", label=pred if i < 2 else other) for i in range(4)]
    return recs, pred


def test_only_correct_confident_examples_are_kept(tiny_model) -> None:
    clf = load_classifier(tiny_model("bert"))
    recs, _pred = _records(clf)
    p_pred = float(predict_proba(clf, recs[:1])[0].max())
    assert 0.3 < p_pred < 0.5  # random 3-way model
    kept, dropped = extract_rationales(clf, recs, min_confidence=0.3, min_score=0.0)
    assert [r.id for r in kept] == ["r0", "r1"]
    assert [r.meta["dropped_by"] for r in dropped] == ["mispredicted"] * 2
    assert dropped[0].meta["dropped_reason"].startswith("mispredicted as ")
    kept, dropped = extract_rationales(clf, recs, min_confidence=0.5, min_score=0.0)
    assert kept == []
    assert [r.meta["dropped_by"] for r in dropped] == [
        "low-confidence",
        "low-confidence",
        "mispredicted",
        "mispredicted",
    ]
    kept, dropped = extract_rationales(clf, recs[:1], min_confidence=0.0, min_score=1.01)
    assert kept == [] and dropped[0].meta["dropped_by"] == "no-rationale"
    kept, _ = extract_rationales(
        clf, recs, min_confidence=0.0, require_correct=False, min_score=0.0
    )
    assert len(kept) == 4


def test_rationale_records_carry_spans(tiny_model) -> None:
    clf = load_classifier(tiny_model("bert"))
    recs, _ = _records(clf)
    kept, _ = extract_rationales(clf, recs[:1], min_confidence=0.0, min_score=0.0)
    meta = kept[0].meta
    # 10 + 5 words, k = round_half_up(4.5) = 5 words over both fields
    n_words = sum(len(word_spans(t)) for v in meta["rationale_text"].values() for t in v)
    assert n_words == 5
    for name, spans in meta["rationales"].items():
        text = getattr(kept[0], name)
        assert [text[s:e] for s, e in spans] == meta["rationale_text"][name]
    assert [w for w, _ in meta["saliency"]["premise"]] == [
        "A",
        "man",
        "is",
        "sleeping",
        "on",
        "a",
        "bench",
        "in",
        "the",
        "park",
    ]
    only_h, _ = extract_rationales(
        clf, recs[:1], min_confidence=0.0, min_score=0.0, fields="hypothesis"
    )
    assert list(only_h[0].meta["rationales"]) == ["hypothesis"]
    # 5 hypothesis words, k = round_half_up(1.5) = 2
    assert sum(len(word_spans(t)) for t in only_h[0].meta["rationale_text"]["hypothesis"]) == 2
    hyp_only = dataclasses.replace(clf, input="hypothesis-only")
    with pytest.raises(ConfigError, match="does not see premise"):
        extract_rationales(hyp_only, recs[:1], fields="premise")
