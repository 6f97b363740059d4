"""Saliency: word = max over its sub-tokens, scores normalised by the example's max."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from zdebias.classify.predict import load_classifier
from zdebias.counterfactual.saliency import (
    SALIENCY_METHODS,
    aggregate_words,
    compute_saliency,
    get_saliency,
)
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError

REC = Record(
    "x:1", "neutral", premise="The guitarist sleeps on benches.", hypothesis="A snowman waits."
)


def test_aggregate_words_by_hand() -> None:
    # text "snowman sleeps ." words: snowman(0,7) sleeps(8,14); "." is no word
    words = [(0, 7), (8, 14), (20, 25)]
    tokens = [(0, 0), (0, 4), (4, 7), (8, 14), (15, 16), (0, 0)]
    scores = [9.0, 0.25, 0.75, 0.5, 1.0, 9.0]
    # [CLS]/[SEP] (empty spans) and "." never reach a word; (20, 25) is covered by no token
    assert aggregate_words(words, tokens, scores) == [0.75, 0.5, 0.0]
    # a token spanning two words counts for both
    assert aggregate_words([(0, 2), (3, 5)], [(0, 5)], [0.4]) == [0.4, 0.4]


def _token_norms(
    clf, record: Record
) -> tuple[list[str], list[tuple[int, int]], list[int | None], torch.Tensor]:
    """Gradient norms per token, computed independently of the module under test."""
    enc = clf.tokenizer(
        record.premise, record.hypothesis, return_offsets_mapping=True, return_tensors="pt"
    )
    offsets = [tuple(o) for o in enc.pop("offset_mapping")[0].tolist()]
    seq = enc.sequence_ids(0)
    tokens = clf.tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    emb = clf.model.get_input_embeddings()(enc["input_ids"]).detach().requires_grad_(True)
    extra = {k: v for k, v in enc.items() if k != "input_ids"}
    logits = clf.model(inputs_embeds=emb, **extra).logits
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor([clf.labels.index("neutral")]))
    loss.backward()
    return tokens, offsets, seq, emb.grad[0].norm(dim=-1)


def test_word_saliency_is_max_of_subtokens_on_tiny_bert(tiny_model) -> None:
    clf = load_classifier(tiny_model("bert"), device="cpu")
    tokens, _offsets, seq, norms = _token_norms(clf, REC)
    assert tokens[2:5] == ["guitar", "##is", "##t"]  # one word, three sub-tokens
    in_text = torch.tensor([s is not None for s in seq])
    normed = norms / norms[in_text].max()
    (ex,) = compute_saliency(clf, [REC], target="loss")  # _token_norms differentiates the loss
    premise = {w.text: w.score for w in ex.words["premise"]}
    hypothesis = {w.text: w.score for w in ex.words["hypothesis"]}
    assert list(premise) == ["The", "guitarist", "sleeps", "on", "benches"]
    assert list(hypothesis) == ["A", "snowman", "waits"]
    assert premise["guitarist"] == pytest.approx(float(normed[2:5].max()), abs=1e-5)
    i = tokens.index("snow", 8)
    assert tokens[i + 1] == "##man"
    assert hypothesis["snowman"] == pytest.approx(float(normed[i : i + 2].max()), abs=1e-5)
    j = tokens.index("on")
    assert premise["on"] == pytest.approx(float(normed[j]), abs=1e-5)
    # the maximum over the text's tokens (words or punctuation) is exactly 1
    assert max(
        [*premise.values(), *hypothesis.values(), float(normed[in_text].max())]
    ) == pytest.approx(1.0)
    assert ex.probs.sum() == pytest.approx(1.0)
    assert ex.gold == clf.labels.index("neutral")


def test_normalize_all_rescales_by_one_constant(tiny_model) -> None:
    clf = load_classifier(tiny_model("bert"), device="cpu")
    _tokens, _, seq, norms = _token_norms(clf, REC)
    (text,) = compute_saliency(clf, [REC], target="loss", normalize="text")
    (full,) = compute_saliency(clf, [REC], target="loss", normalize="all")
    in_text = torch.tensor([s is not None for s in seq])
    factor = float(norms[in_text].max() / norms.max())
    for a, b in zip(text.words["premise"], full.words["premise"], strict=True):
        assert b.score == pytest.approx(a.score * factor, abs=1e-5)


def test_methods_are_pluggable(tiny_model) -> None:
    assert {"gradient-norm", "gradient-x-input"} <= set(SALIENCY_METHODS)
    clf = load_classifier(tiny_model("bert"))
    (a,) = compute_saliency(clf, [REC], method="gradient-norm")
    (b,) = compute_saliency(clf, [REC], method="gradient-x-input")
    assert [w.score for w in a.words["premise"]] != [w.score for w in b.words["premise"]]
    with pytest.raises(ConfigError, match="gradient-norm, gradient-x-input"):
        get_saliency("lime")


def test_hypothesis_only_classifier_scores_hypothesis_words(tiny_model) -> None:
    clf = dataclasses.replace(load_classifier(tiny_model("bert")), input="hypothesis-only")
    (ex,) = compute_saliency(clf, [REC])
    assert list(ex.words) == ["hypothesis"]
    assert max(w.score for w in ex.words["hypothesis"]) <= 1.0


def test_unknown_label_fails(tiny_model) -> None:
    clf = load_classifier(tiny_model("bert", labels=("negative", "positive")))
    with pytest.raises(DataError, match="not a label of the classifier"):
        compute_saliency(clf, [Record("t:1", "neutral", text="Great film.")])


class _Linear1d(torch.nn.Module):
    """A classifier with 1-dimensional embeddings (all 0) and logits_k = Σ_t C[t, k]·e_t, so
    ∂logit_k/∂e_t = C[t, k] and, at p = (1/3, 1/3, 1/3), ∂CE(y)/∂e_t = mean_k C[t, k] − C[t, y]."""

    def __init__(self, vocab: int, coef: list[list[float]]) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, 1)
        torch.nn.init.zeros_(self.emb.weight)
        self.coef = torch.tensor(coef, dtype=torch.float32)

    def get_input_embeddings(self) -> torch.nn.Module:
        return self.emb

    def forward(self, inputs_embeds, attention_mask=None, **_: object):
        from types import SimpleNamespace

        t = inputs_embeds.shape[1]
        logits = (inputs_embeds[..., 0] * attention_mask.float()) @ self.coef[:t].float()
        return SimpleNamespace(logits=logits)


def test_saliency_target_logit_or_loss_by_hand(tiny_model) -> None:
    clf = load_classifier(tiny_model("bert"), device="cpu")
    rec = Record("x:2", clf.labels[0], premise="man sleeps", hypothesis="cat")
    tokens = clf.tokenizer.convert_ids_to_tokens(clf.tokenizer("man sleeps", "cat")["input_ids"])
    assert tokens == ["[CLS]", "man", "sleeps", "[SEP]", "cat", "[SEP]"]
    # rows: [CLS] man sleeps [SEP] cat [SEP]; gold = label 0
    coef = [[0, 0, 0], [2, 1, 0], [1, 4, 4], [0, 0, 0], [1, 1, 1], [0, 0, 0]]
    toy = dataclasses.replace(clf, model=_Linear1d(len(clf.tokenizer), coef))
    # logit: |C[t, 0]| = man 2, sleeps 1, cat 1 → / 2
    (logit,) = compute_saliency(toy, [rec], target="logit")
    # loss: |mean_k C[t, k] − C[t, 0]| = man |1 − 2| = 1, sleeps |3 − 1| = 2, cat 0 → / 2
    (loss,) = compute_saliency(toy, [rec], target="loss")
    scores = lambda ex: [w.score for f in ("premise", "hypothesis") for w in ex.words[f]]  # noqa: E731
    assert scores(logit) == pytest.approx([1.0, 0.5, 0.5], abs=1e-6)
    assert scores(loss) == pytest.approx([0.5, 1.0, 0.0], abs=1e-6)
    with pytest.raises(ConfigError, match="'logit' or 'loss'"):
        compute_saliency(toy, [rec], target="grad")
