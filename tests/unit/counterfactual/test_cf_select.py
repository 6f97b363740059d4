"""Parsing fillers, constrained decoding, post-selection, and the generate loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zdebias.classify.predict import load_classifier, predict_proba
from zdebias.counterfactual.format import mask_record, sentinel_ids
from zdebias.counterfactual.model import load_infiller
from zdebias.counterfactual.select import (
    REJECT_REASONS,
    SentinelConstraint,
    generate_counterfactuals,
    parse_fillers,
    post_select,
    target_labels,
)
from zdebias.data.schema import Record
from zdebias.errors import DataError

NLI = ["entailment", "neutral", "contradiction"]


def test_parse_fillers(tiny_model) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model("t5"))
    s = sentinel_ids(tok)
    eos, pad = tok.eos_token_id, tok.pad_token_id

    def ids(word: str) -> list[int]:
        return tok(word, add_special_tokens=False)["input_ids"]

    kw = {"tokenizer": tok, "sentinels": s, "eos": eos}
    good = [pad, s[0], *ids("not"), s[1], *ids("the man"), eos, pad, pad]
    assert parse_fillers(good, n_spans=2, **kw) == ["not", "the man"]
    # a closing sentinel (T5 habit) and text after EOS are ignored; empty fillers are fine
    assert parse_fillers(
        [s[0], s[1], *ids("dog"), s[2], *ids("cat"), eos, *ids("x")], n_spans=2, **kw
    ) == ["", "dog"]
    assert parse_fillers([s[0], *ids("not"), eos], n_spans=2, **kw) == "1 fillers for 2 spans"
    assert (
        parse_fillers([s[1], *ids("not"), eos], n_spans=2, **kw)
        == "sentinel 1 where 0 was expected"
    )
    assert (
        parse_fillers([*ids("not"), s[0], eos], n_spans=1, **kw) == "text before the first sentinel"
    )


def _allowed(proc: SentinelConstraint, seq: list[int], vocab: int = 12) -> list[int]:
    scores = torch.zeros(1, vocab)
    out = proc(torch.tensor([seq]), scores)
    return [i for i in range(vocab) if out[0, i] > -float("inf")]


def test_sentinel_constraint_forces_the_shape() -> None:
    # vocabulary: 0 pad (decoder start), 1 EOS, 2 banned special, 3..9 words, 10-11 sentinels
    proc = SentinelConstraint(
        sentinels=[10, 11], n_spans=[2], eos=1, banned=[0, 2], prompt_len=1, max_filler_tokens=3
    )
    words = list(range(3, 10))
    assert _allowed(proc, [0]) == [10]  # must open with sentinel 0
    assert _allowed(proc, [0, 10, 5]) == [*words, 11]  # next sentinel, no EOS yet
    assert _allowed(proc, [0, 10]) == [*words, 11]  # an empty filler is allowed
    assert _allowed(proc, [0, 10, 5, 11, 6]) == [1, *words]  # all spans open: EOS ok
    assert _allowed(proc, [0, 10, 5, 6, 7]) == [11]  # filler at its limit
    assert _allowed(proc, [0, 10, 5, 11, 6, 7, 8]) == [1]  # last filler full: EOS
    # rows are independent and use their own span counts
    two = SentinelConstraint(
        sentinels=[10, 11], n_spans=[1, 2], eos=1, banned=[0, 2], prompt_len=1, max_filler_tokens=3
    )
    out = two(torch.tensor([[0, 10, 4], [0, 10, 4]]), torch.zeros(2, 12))
    assert out[0, 1] > -float("inf") and out[0, 11] == -float("inf")
    assert out[1, 1] == -float("inf") and out[1, 11] > -float("inf")


def test_post_select_by_hand() -> None:
    labels = ["negative", "positive"]
    cands = [
        Record(f"c{i}", lab, text="x")
        for i, lab in enumerate(["positive", "positive", "negative", "negative"])
    ]
    probs = np.array([[0.2, 0.8], [0.6, 0.4], [0.55, 0.45], [0.9, 0.1]])
    kept, rejected = post_select(cands, probs, labels)
    assert [r.id for r in kept] == ["c0", "c2", "c3"]
    assert [r.id for r in rejected] == ["c1"]
    assert rejected[0].meta["rejected_by"] == "classifier"
    assert (
        rejected[0].meta["reason"]
        == "classifier predicts negative (p=0.600), not positive (p=0.400)"
    )
    assert kept[0].meta["classifier_probs"] == {"negative": 0.2, "positive": 0.8}
    kept, rejected = post_select(cands, probs, labels, min_prob=0.7)
    assert [r.id for r in kept] == ["c0", "c3"]
    assert rejected[1].meta["reason"] == "p(negative)=0.550 < 0.7"


def _nli_records() -> list[Record]:
    recs = []
    for i, (p, h, lab) in enumerate(
        [
            (
                "A man is sleeping on a bench in the park.",
                "The man is sleeping outside.",
                "entailment",
            ),
            ("Two dogs are running through the snow.", "Nobody is running.", "contradiction"),
            ("A woman is playing a guitar outside.", "The woman is a musician.", "neutral"),
        ]
    ):
        spans = {"premise": [[2, 5]], "hypothesis": [[len(h) - 8, len(h) - 1]]}
        recs.append(Record(f"r{i}", lab, premise=p, hypothesis=h, meta={"rationales": spans}))
    return recs


@pytest.mark.slow
def test_generate_accounts_for_every_output(tiny_model) -> None:
    clf = load_classifier(tiny_model("bert"))
    inf = load_infiller(tiny_model("t5"))  # untrained: the FlipDA-like baseline
    recs = _nli_records()
    kept, rejected, summary = generate_counterfactuals(inf, clf, recs, n=3, seed=1, targets="all")
    assert summary["n_outputs"] == 3 * 2 * 3 == summary["n_parsed"]  # constrained: all parse
    assert len(kept) + len(rejected) == 18 == summary["n_kept"] + summary["n_rejected"]
    assert sum(summary["rejected_by"].values()) == len(rejected)
    assert set(summary["rejected_by"]) == set(REJECT_REASONS)
    assert len({r.id for r in kept + rejected}) == 18
    by_source = {r.id: r for r in recs}
    for r in kept + rejected:
        meta = r.meta
        src = by_source[meta["source_id"]]
        assert meta["type"] == "counterfactual" and r.label == meta["target_label"] != src.label
        assert meta["original_label"] == src.label
        assert (
            len(meta["fillers"]) == 2
            and meta["original_fillers"]
            == mask_record(
                src, {k: [tuple(s) for s in v] for k, v in src.meta["rationales"].items()}
            )[1]
        )
        assert r.premise.startswith(src.premise[:2]) and r.hypothesis.startswith(
            src.hypothesis[: len(src.hypothesis) - 8]
        )
        assert not any(lab in f.lower() for f in meta["fillers"] for lab in NLI)
    # the stored decisions agree with a fresh classifier run
    judged = kept + [r for r in rejected if r.meta["rejected_by"] == "classifier"]
    probs = predict_proba(clf, judged)
    for r, p in zip(judged, probs, strict=True):
        assert (clf.labels[int(np.argmax(p))] == r.label) == (r in kept)
        assert r.meta["classifier_probs"][r.label] == pytest.approx(
            p[clf.labels.index(r.label)], abs=1e-5
        )
    flips = sum(r.meta["classifier_label"] == r.label for r in kept + rejected)
    assert summary["flip_rate"] == pytest.approx(flips / 18, abs=1e-6)


@pytest.mark.slow
def test_random_spans_and_free_decoding(tiny_model) -> None:
    clf = load_classifier(tiny_model("bert"))
    inf = load_infiller(tiny_model("t5"))
    plain = [r.replace(meta={}) for r in _nli_records()]
    with pytest.raises(DataError, match="no rationales"):
        generate_counterfactuals(inf, clf, plain)
    kept, rejected, summary = generate_counterfactuals(
        inf, clf, plain, spans="random", n=2, targets="all"
    )
    assert summary["n_outputs"] == 12 == len(kept) + len(rejected)
    assert all(r.meta["spans"] == "random" for r in kept + rejected)
    kept, rejected, summary = generate_counterfactuals(
        inf, clf, _nli_records(), n=2, constrained=False, targets="all"
    )
    assert len(kept) + len(rejected) == 12
    malformed = [r for r in rejected if r.meta["rejected_by"] == "malformed"]
    assert summary["n_parsed"] == 12 - len(malformed)
    for r in malformed:  # original text kept, reason given
        assert "fillers" not in r.meta and r.meta["reason"]


def test_target_labels_one_or_all_by_hand() -> None:
    recs = _nli_records()  # r0 entailment, r1 contradiction, r2 neutral
    assert [target_labels(r, NLI, "all", 0) for r in recs] == [
        ["neutral", "contradiction"],
        ["entailment", "neutral"],
        ["entailment", "contradiction"],
    ]
    # others[crc32("SEED:ID") % 2]: crc32("0:r0") = 3275975715 (odd), crc32("0:r1") =
    # 3024379061 (odd), crc32("0:r2") = 760024335 (odd), crc32("1:r0") = 2080312134 (even)
    assert [target_labels(r, NLI, "one", 0) for r in recs] == [
        ["contradiction"],
        ["neutral"],
        ["contradiction"],
    ]
    assert target_labels(recs[0], NLI, "one", 1) == ["neutral"]
    # two labels: the other one, whatever the seed
    pos = Record("s", "positive", text="Great film.")
    assert target_labels(pos, ("negative", "positive"), "one", 5) == ["negative"]


def test_generate_one_target_per_example(tiny_model) -> None:
    clf = load_classifier(tiny_model("bert"))
    inf = load_infiller(tiny_model("t5"))
    kept, rejected, summary = generate_counterfactuals(inf, clf, _nli_records(), n=2, seed=0)
    assert summary["targets"] == "one" and summary["n_outputs"] == 3 * 1 * 2
    targets = {r.meta["source_id"]: r.label for r in kept + rejected}
    assert targets == {"r0": "contradiction", "r1": "neutral", "r2": "contradiction"}


def test_an_empty_rebuilt_text_is_rejected_and_reads_back(
    tiny_model, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sentence that is all rationale, filled with nothing: rejected as `empty`, keeping the
    source's text so the rejected file reads back; the metrics leave it out."""
    import zdebias.counterfactual.select as select
    from zdebias.counterfactual.metrics import counterfactual_metrics
    from zdebias.data.readers import read_records
    from zdebias.data.writers import write_records

    def empty_fillers(infiller, sources, n_spans, *, n=1, **_):
        return iter([[[""] * k for _ in range(n)] for k in n_spans])

    monkeypatch.setattr(select, "sample_fillers", empty_fillers)
    clf = load_classifier(tiny_model("bert", labels=("negative", "positive")))
    inf = load_infiller(tiny_model("t5"))
    rec = Record("s0", "positive", text="great", meta={"rationales": {"text": [[0, 5]]}})
    kept, rejected, summary = generate_counterfactuals(inf, clf, [rec], seed=0)
    assert kept == [] and {k: v for k, v in summary["rejected_by"].items() if v} == {"empty": 1}
    (out,) = rejected
    assert out.id == "s0:cf:negative:0" and out.label == "negative"
    assert out.text == "great" and out.meta["fillers"] == [""]
    write_records(rejected, tmp_path / "rejected.jsonl")
    (back,) = read_records(tmp_path / "rejected.jsonl", task="sentiment")
    assert back.text == "great" and back.meta["rejected_by"] == "empty"
    metrics = counterfactual_metrics([back])
    assert metrics["n_outputs"] == 0 and metrics["n_excluded_empty"] == 1
