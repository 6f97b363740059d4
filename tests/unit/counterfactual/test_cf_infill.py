"""Infilling format, MLE + α·UL loss (hand-computed on a 3-token vocabulary), training."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch

from zdebias.counterfactual.format import (
    Encoded,
    encode_example,
    encode_target,
    mask_record,
    rebuild,
    sentinel_ids,
    source_text,
    target_text,
)
from zdebias.counterfactual.losses import infill_loss, token_nll, token_unlikelihood
from zdebias.counterfactual.model import INFO_FILE, detect_arch, load_infiller
from zdebias.counterfactual.trainer import InfillCollator, train_infiller
from zdebias.data.schema import Record

NLI = ["entailment", "neutral", "contradiction"]
REC = Record(
    "r1",
    "contradiction",
    premise="A man is sleeping on a bench.",
    hypothesis="The man is not outside.",
)
SPANS = {"premise": [(6, 8), (23, 28)], "hypothesis": [(11, 14)]}


def test_mask_source_target_rebuild_by_hand() -> None:
    masked, fillers = mask_record(REC, SPANS)
    assert masked == {
        "hypothesis": "The man is <extra_id_0> outside.",
        "premise": "A man <extra_id_1> sleeping on a <extra_id_2>.",
    }
    assert fillers == ["not", "is", "bench"]
    assert source_text("neutral", masked) == (
        "neutral hypothesis: The man is <extra_id_0> outside. "
        "premise: A man <extra_id_1> sleeping on a <extra_id_2>."
    )
    assert target_text(fillers) == "<extra_id_0> not<extra_id_1> is<extra_id_2> bench"
    new = rebuild(REC, SPANS, ["", "was", "sofa"])
    assert (new.hypothesis, new.premise) == ("The man is outside.", "A man was sleeping on a sofa.")
    text = Record("t", "positive", text="A wonderful, moving film.")
    masked, fillers = mask_record(text, {"text": [(2, 11)]})
    assert source_text("negative", masked) == "negative sentence: A <extra_id_0>, moving film."
    assert rebuild(text, {"text": [(2, 11)]}, ["dull"]).text == "A dull, moving film."
    assert rebuild(text, {"text": [(2, 11)]}, [""]).text == "A, moving film."


def test_losses_on_a_three_token_vocabulary() -> None:
    logits = torch.log(torch.tensor([[[1.0, 2.0, 1.0], [1.0, 1.0, 2.0], [1.0, 1.0, 2.0]]]))
    labels = torch.tensor([[1, 0, 2]])
    mask = torch.tensor([[True, True, False]])
    # p = .5 and .25: -log(1 - .5) = ln 2, -log(1 - .25) = ln 4/3
    assert float(token_unlikelihood(logits, labels, mask)) == pytest.approx(
        (math.log(2) + math.log(4 / 3)) / 2, abs=1e-6
    )
    assert float(token_nll(logits, labels, mask)) == pytest.approx(
        (math.log(2) + math.log(4)) / 2, abs=1e-6
    )
    # p(label) = 1 stays finite
    sure = torch.tensor([[[0.0, 60.0, 0.0]]])
    assert math.isfinite(
        float(token_unlikelihood(sure, torch.tensor([[1]]), torch.tensor([[True]])))
    )


class _StubSeq2Seq(torch.nn.Module):
    """Returns fixed logits; vocabulary 0 = EOS, 1 = <extra_id_0>, 2 = a rationale word."""

    def __init__(self, probs: torch.Tensor) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(torch.log(probs))

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return labels.clamp_min(0)

    def forward(self, **kwargs: torch.Tensor) -> SimpleNamespace:
        return SimpleNamespace(logits=self.logits)


def test_unlikelihood_touches_only_rationale_tokens() -> None:
    probs = torch.tensor(
        [
            # original label: target <extra_id_0> x x EOS
            [[0.25, 0.5, 0.25], [0.25, 0.25, 0.5], [0.5, 0.25, 0.25], [0.5, 0.25, 0.25]],
            # wrong label 1: sentinel and EOS probabilities must not count
            [[0.2, 0.6, 0.2], [0.25, 0.25, 0.5], [0.1, 0.1, 0.8], [0.9, 0.05, 0.05]],
            # wrong label 2, shorter target (padding)
            [[0.2, 0.6, 0.2], [0.25, 0.0, 0.75], [0.3, 0.3, 0.4], [0.3, 0.3, 0.4]],
        ]
    )
    batch = {
        "input_ids": torch.zeros(3, 2, dtype=torch.long),
        "attention_mask": torch.ones(3, 2, dtype=torch.long),
        "labels": torch.tensor([[1, 2, 2, 0], [1, 2, 2, 0], [1, 2, -100, -100]]),
        "ul_mask": torch.tensor([[0, 1, 1, 0], [0, 1, 1, 0], [0, 1, 0, 0]]),
        "is_original": torch.tensor([True, False, False]),
    }
    model = _StubSeq2Seq(probs)
    loss, mle, ul, _ = infill_loss(model, batch, arch="seq2seq", alpha=1.0)
    # MLE on all 4 target tokens of row 0: -ln(.5) - ln(.5) - ln(.25) - ln(.5), mean
    assert float(mle.detach()) == pytest.approx(5 * math.log(2) / 4, abs=1e-6)
    # UL on the three x tokens of rows 1-2: -ln(1-.5), -ln(1-.8), -ln(1-.75)
    assert float(ul.detach()) == pytest.approx(math.log(40) / 3, abs=1e-6)
    assert float(loss.detach()) == pytest.approx(5 * math.log(2) / 4 + math.log(40) / 3, abs=1e-6)
    loss_03, *_ = infill_loss(model, batch, arch="seq2seq", alpha=0.3)
    assert float(loss_03.detach()) == pytest.approx(
        5 * math.log(2) / 4 + 0.3 * math.log(40) / 3, abs=1e-6
    )
    loss.backward()
    # the sentinel / EOS positions of the wrong-label rows get no gradient at all
    assert torch.all(model.logits.grad[1, [0, 3]] == 0)
    assert torch.all(model.logits.grad[2, [0, 2, 3]] == 0)
    assert torch.any(model.logits.grad[1, 1] != 0)


def test_causal_loss_is_shifted() -> None:
    class Causal(torch.nn.Module):
        def __init__(self, logits: torch.Tensor) -> None:
            super().__init__()
            self.logits = logits

        def forward(self, **kwargs: torch.Tensor) -> SimpleNamespace:
            return SimpleNamespace(logits=self.logits)

    torch.manual_seed(0)
    logits = torch.randn(2, 5, 3)
    labels = torch.tensor([[-100, -100, 1, 2, 0], [-100, -100, 1, 2, 0]])
    ul_mask = torch.tensor([[0, 0, 0, 1, 0], [0, 0, 0, 1, 0]])
    batch = {
        "input_ids": labels.clamp_min(0),
        "attention_mask": torch.ones_like(labels),
        "labels": labels,
        "ul_mask": ul_mask,
        "is_original": torch.tensor([True, False]),
    }
    _, mle, ul, _ = infill_loss(Causal(logits), batch, arch="causal", alpha=1.0)
    logp = torch.log_softmax(logits, -1)
    # position t predicts token t + 1
    assert float(mle) == pytest.approx(
        -float(logp[0, 1, 1] + logp[0, 2, 2] + logp[0, 3, 0]) / 3, abs=1e-6
    )
    assert float(ul) == pytest.approx(-math.log(1 - math.exp(float(logp[1, 2, 2]))), abs=1e-6)


def test_encoding_masks_sentinels_eos_and_prompt(tiny_model) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model("t5"))
    sent = sentinel_ids(tok)
    assert len(sent) == 20
    ids, mask = encode_target(tok, ["not", "is", "bench"], 64)
    assert ids[-1] == tok.eos_token_id
    for t, m in zip(ids, mask, strict=True):
        assert m == (0 if t in sent or t in (tok.eos_token_id, tok.pad_token_id) else 1)
    assert [t for t in ids if t in sent] == sent[:3]
    assert tok.decode([t for t, m in zip(ids, mask, strict=True) if m]).split() == [
        "not",
        "is",
        "bench",
    ]
    variants = encode_example(tok, "seq2seq", REC, SPANS, NLI)
    assert isinstance(variants, list) and len(variants) == 3
    masked, _ = mask_record(REC, SPANS)
    for enc, label in zip(variants, ["contradiction", "entailment", "neutral"], strict=True):
        assert enc.input_ids == tok(source_text(label, masked))["input_ids"]
        assert enc.labels == ids and enc.ul_mask == mask
    assert len(encode_example(tok, "seq2seq", REC, SPANS, NLI, wrong_labels=False)) == 1
    assert encode_example(tok, "seq2seq", REC, {}, NLI) == "no spans"
    assert (
        encode_example(tok, "seq2seq", REC, SPANS, NLI, max_source_length=8)
        == "a span lies beyond max_source_length"
    )
    # a long source is cut after its last sentinel (hypothesis spans come first)
    hyp_only = {"hypothesis": [(11, 14)]}
    full = encode_example(tok, "seq2seq", REC, hyp_only, NLI)[0].input_ids
    cut = encode_example(tok, "seq2seq", REC, hyp_only, NLI, max_source_length=14)[0].input_ids
    assert len(full) > 14 == len(cut) and cut[:13] == full[:13]
    assert cut[-1] == tok.eos_token_id and sent[0] in cut
    end = tok("\nfillers:", add_special_tokens=False)["input_ids"]
    limit = full.index(sent[0]) + 2 + len(end)
    cut = encode_example(tok, "causal", REC, hyp_only, NLI, max_source_length=limit)[0]
    assert cut.labels.count(-100) == limit and cut.input_ids[limit - len(end) : limit] == end
    assert sent[0] in cut.input_ids[:limit]
    causal = encode_example(tok, "causal", REC, SPANS, NLI)
    n_prompt = sum(1 for v in causal[0].labels if v == -100)
    assert causal[0].labels[n_prompt:] == ids
    assert causal[0].ul_mask == [0] * n_prompt + mask


def test_collator_pads_and_flags_originals() -> None:
    feats = [
        {"variants": [Encoded([5, 6, 7], [1, 2, 0], [0, 1, 0]), Encoded([5], [1, 0], [0, 0])]},
        {"variants": [Encoded([8, 9], [1, 2, 2, 0], [0, 1, 1, 0])]},
    ]
    batch = InfillCollator(pad_id=3)(feats)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [5, 3, 3], [8, 9, 3]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]]
    assert batch["labels"].tolist() == [[1, 2, 0, -100], [1, 0, -100, -100], [1, 2, 2, 0]]
    assert batch["ul_mask"].tolist() == [[0, 1, 0, 0], [0, 0, 0, 0], [0, 1, 1, 0]]
    assert batch["is_original"].tolist() == [True, False, True]


@pytest.mark.parametrize(
    ("kind", "options", "arch"),
    [
        ("t5", {}, "seq2seq"),
        ("bert", {"head": "encoder"}, "bert2bert"),
        ("gpt2", {}, "causal"),
    ],
)
def test_train_tiny_infiller(tiny_model, tmp_path, kind, options, arch) -> None:
    from transformers import AutoConfig

    base = tiny_model(kind, **options)
    assert detect_arch(AutoConfig.from_pretrained(base)) == arch
    recs = [REC.replace(id=f"r{i}") for i in range(4)]
    summary = train_infiller(
        recs,
        tmp_path / "inf",
        model=base,
        labels=NLI,
        spans=[SPANS] * 4,
        epochs=1,
        batch_size=2,
        learning_rate=1e-3,
        progress=False,
    )
    assert summary["arch"] == arch
    assert summary["alpha"] == 1.0  # NLI default
    assert summary["n_train"] == 4 and summary["n_skipped"] == 0
    assert summary["parameters_changed"] is True
    assert math.isfinite(summary["train_loss"])
    info = json.loads((tmp_path / "inf" / INFO_FILE).read_text())
    assert info["labels"] == NLI and info["arch"] == arch
    loaded = load_infiller(tmp_path / "inf")
    assert loaded.arch == arch and loaded.labels == NLI
    assert len(sentinel_ids(loaded.tokenizer)) >= 3


@pytest.mark.slow
def test_sentiment_alpha_default_and_dev(tiny_model, tmp_path) -> None:
    text = Record("t", "positive", text="A wonderful and moving film.")
    spans = {"text": [(2, 11)]}
    summary = train_infiller(
        [text] * 3,
        tmp_path / "inf",
        model=tiny_model("t5"),
        labels=["negative", "positive"],
        spans=[spans] * 3,
        dev=[text],
        dev_spans=[spans],
        epochs=2,
        batch_size=2,
        learning_rate=1e-3,
        progress=False,
    )
    assert summary["alpha"] == 0.3
    assert summary["n_dev"] == 1 and math.isfinite(summary["eval_loss"])
    assert not (tmp_path / "inf" / "checkpoints").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_train_refuses_a_foreign_out_folder_before_training(tmp_path) -> None:
    from zdebias.errors import ConfigError

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="busy holds files zdebias did not write"):
        train_infiller([REC], busy, model=tmp_path / "no-model", labels=NLI, spans=[SPANS])
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
