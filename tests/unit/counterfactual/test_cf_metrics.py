"""Metrics against hand-computed values: distinct-n, flip rate, perplexity, rationale F1."""

from __future__ import annotations

import math

import pytest
import torch

from zdebias.counterfactual.metrics import (
    counterfactual_metrics,
    distinct_n,
    flip_rate,
    highlighted_tokens,
    perplexity,
    rationale_agreement,
    read_human_rationales,
    token_f1,
)
from zdebias.data.schema import Record
from zdebias.errors import DataError


def test_distinct_n_by_hand() -> None:
    segs = [["a", "b", "a"], ["a", "b"]]
    assert distinct_n(segs, 1) == pytest.approx(2 / 5)
    assert distinct_n(segs, 2) == pytest.approx(2 / 3)  # ab, ba, ab
    assert distinct_n(segs, 3) == pytest.approx(1.0)  # aba
    assert distinct_n([["a"]], 2) == 0.0


def test_flip_rate_by_hand() -> None:
    assert flip_rate(["a", "b", "a", "c"], ["a", "a", "a", "b"]) == 0.5
    with pytest.raises(ValueError):
        flip_rate(["a"], [])


def _out(i: int, text: str, label: str, pred: str, fillers: list[str]) -> Record:
    return Record(
        f"c{i}",
        label,
        text=text,
        meta={"classifier_label": pred, "fillers": fillers, "type": "counterfactual"},
    )


def test_counterfactual_metrics_by_hand() -> None:
    recs = [
        _out(1, "The cat sat.", "positive", "positive", ["cat"]),
        _out(2, "The dog sat.", "positive", "negative", ["dog"]),
        _out(3, "The cat ran.", "negative", "negative", ["cat ran"]),
        Record("c4", "negative", text="x y", meta={"rejected_by": "malformed"}),
    ]
    m = counterfactual_metrics(recs)
    assert m["n_outputs"] == 3 and m["n_excluded_malformed"] == 1
    assert m["flip_rate"] == pytest.approx(2 / 3, abs=1e-6)
    # texts: the cat sat | the dog sat | the cat ran
    assert m["distinct_1"] == pytest.approx(5 / 9, abs=1e-6)
    assert m["distinct_2"] == pytest.approx(5 / 6, abs=1e-6)
    assert m["distinct_3"] == pytest.approx(1.0)
    # fillers: cat | dog | cat ran
    assert m["distinct_fillers_1"] == pytest.approx(3 / 4)
    assert m["distinct_fillers_2"] == pytest.approx(1.0)
    assert m["distinct_fillers_3"] == 0.0
    with pytest.raises(DataError, match="pass --classifier"):
        counterfactual_metrics([Record("a", "positive", text="x")])


def test_perplexity_matches_the_model_loss(tiny_model) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tiny_model("gpt2")
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    texts = ["A man is sleeping.", "The dogs are running through the snow today."]
    nll, n = 0.0, 0
    for text in texts:
        ids = torch.tensor([[tok.bos_token_id, *tok(text)["input_ids"]]])
        with torch.no_grad():
            loss = float(model(input_ids=ids, labels=ids).loss)
        nll += loss * (ids.shape[1] - 1)
        n += ids.shape[1] - 1
    got = perplexity(path, texts, batch_size=2)
    assert got["n_tokens"] == n
    assert got["perplexity"] == pytest.approx(math.exp(nll / n), rel=1e-4)


def test_rationale_macro_f1_against_esnli_highlights(tmp_path) -> None:
    assert highlighted_tokens("A man sleeps on the bench.", [[20, 25]]) == {5}
    assert token_f1({1, 2}, {2, 3}) == 0.5
    csv_path = tmp_path / "esnli.csv"
    csv_path.write_text(
        "pairID,gold_label,Sentence1,Sentence2,Sentence1_Highlighted_1,Sentence2_Highlighted_1\n"
        'p1,contradiction,A man sleeps on the bench.,Nobody sleeps.,"1,2",1\n'
        "p2,entailment,Dogs run.,Animals move.,{},{}\n"
        "p3,neutral,A cat sits.,The cat is fat.,{},3\n",
        encoding="utf-8",
    )
    human = read_human_rationales(csv_path)
    recs = [
        # pred {p1, h1} vs gold {p1, p2, h1}: F1 = 2·2 / (2 + 3) = 0.8 (matched by id)
        Record(
            "p1",
            "contradiction",
            premise="A man sleeps on the bench.",
            hypothesis="Nobody sleeps.",
            meta={"rationales": {"premise": [[2, 5]], "hypothesis": [[7, 13]]}},
        ),
        # no human highlight: not scored
        Record(
            "x2",
            "entailment",
            premise="Dogs run.",
            hypothesis="Animals move.",
            meta={"rationales": {"premise": [[0, 4]]}},
        ),
        # matched by text; pred {h0} vs gold {h3}: F1 = 0
        Record(
            "x3",
            "neutral",
            premise="A cat sits.",
            hypothesis="The cat is fat.",
            meta={"rationales": {"hypothesis": [[0, 3]]}},
        ),
        Record("x4", "neutral", premise="Unknown.", hypothesis="Pair.", meta={"rationales": {}}),
    ]
    got = rationale_agreement(recs, human)
    assert got == {
        "rationale_macro_f1": 0.4,
        "n_scored": 2,
        "n_unmatched": 1,
        "n_without_human_highlight": 1,
    }
    jsonl = tmp_path / "human.jsonl"
    jsonl.write_text('{"id": "p1", "highlights": {"premise": [1], "hypothesis": [1]}}\n')
    assert rationale_agreement(recs[:1], read_human_rationales(jsonl))["rationale_macro_f1"] == 1.0
    bad = tmp_path / "bad.csv"
    bad.write_text("pairID,Sentence1\n1,x\n")
    with pytest.raises(DataError, match="missing e-SNLI columns"):
        read_human_rationales(bad)
