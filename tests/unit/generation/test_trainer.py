"""The generator trainer: Table 7 defaults, batches, the loss against HF's, and that the
consistency and debiasing losses do what they are for on a tiny model."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import torch

from helpers.nli_toy import toy_records
from zdebias.errors import ConfigError
from zdebias.generation.format import encode_record
from zdebias.generation.losses import IGNORE_INDEX
from zdebias.generation.score import hypothesis_logprobs, load_generator
from zdebias.generation.trainer import (
    GeneratorCollator,
    GeneratorTrainer,
    GeneratorTrainingArguments,
    train_generator,
)

LABELS = ("entailment", "neutral", "contradiction")


def test_defaults_are_table_7(tmp_path: Path) -> None:
    args = GeneratorTrainingArguments(output_dir=str(tmp_path))
    assert args.learning_rate == 1e-5
    assert args.per_device_train_batch_size == 24
    assert args.num_train_epochs == 5
    assert (args.adam_epsilon, args.adam_beta1, args.adam_beta2) == (1e-6, 0.9, 0.999)
    assert (
        str(
            args.lr_scheduler_type.value
            if hasattr(args.lr_scheduler_type, "value")
            else args.lr_scheduler_type
        )
        == "constant"
    )
    assert args.max_length == 128
    assert (args.consistency_weight, args.debias_alpha) == (0.5, 1.0)
    assert args.weight_decay == 0.0 and args.remove_unused_columns is False


def _items(tok, fmt, records, masks=None):
    out = []
    for i, r in enumerate(records):
        enc = encode_record(r, tok, fmt)
        out.append(
            {
                "input_ids": enc.input_ids,
                "label_index": enc.label_index,
                "main": enc.main,
                "ul_mask": masks[i] if masks else None,
            }
        )
    return out


def test_collator_pads_and_perturbs_only_the_label(nli_tokenizer) -> None:
    tok, fmt = nli_tokenizer
    records = toy_records()[:3]
    items = _items(tok, fmt, records)
    batch = GeneratorCollator(fmt, consistency=True, seed=0)(items)
    lengths = [len(it["input_ids"]) for it in items]
    assert batch["input_ids"].shape == (3, max(lengths))
    for i, it in enumerate(items):
        n = lengths[i]
        assert batch["attention_mask"][i].tolist() == [1] * n + [0] * (max(lengths) - n)
        assert batch["labels"][i, 0] == IGNORE_INDEX  # the start token is never a target
        assert batch["labels"][i, 1:n].tolist() == it["input_ids"][1:]
        assert (batch["labels"][i, n:] == IGNORE_INDEX).all()
        diff = (batch["perturbed_input_ids"][i] != batch["input_ids"][i]).nonzero().flatten()
        assert diff.tolist() == [it["label_index"]]
        wrong = int(batch["perturbed_input_ids"][i, it["label_index"]])
        assert wrong in fmt.label_token_ids.values() and wrong != it["input_ids"][it["label_index"]]
        start, end = it["main"]
        targets = batch["perturbed_labels"][i]
        assert (targets != IGNORE_INDEX).nonzero().flatten().tolist() == list(range(start, end))
    assert not batch["negative"].any()


def test_label_tokens_start_from_the_newline_embedding(tiny_lm) -> None:
    model, tok, fmt = tiny_lm
    emb = model.get_input_embeddings().weight
    newline = tok.encode("\n", add_special_tokens=False)
    assert len(newline) == 1 and fmt.info["label_init_source"] == "Ċ"
    for i in fmt.label_token_ids.values():
        gap = (emb[i] - emb[newline[0]]).norm() / emb[newline[0]].norm()
        assert 0 < float(gap.detach()) < 0.3


def _trainer(model, fmt, tmp_path: Path, **kw) -> GeneratorTrainer:
    # on the CPU, as the batches and the references: with a GPU visible, Trainer would move
    # the model there (the CUDA variant is test_compute_loss_on_cuda_matches_cpu)
    kw.setdefault("use_cpu", True)
    args = GeneratorTrainingArguments(output_dir=str(tmp_path), **kw)
    return GeneratorTrainer(model=model, args=args, train_dataset=[], data_collator=None)


def test_compute_loss_equals_hf_causal_lm_loss(tiny_lm, tmp_path: Path) -> None:
    model, tok, fmt = tiny_lm
    records = toy_records()[:4]
    batch = GeneratorCollator(fmt, consistency=False)(_items(tok, fmt, records))
    with torch.no_grad():
        reference = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            labels=batch["labels"],
        ).loss
    trainer = _trainer(model, fmt, tmp_path, consistency_weight=0.0)
    with torch.no_grad():
        got = float(trainer.compute_loss(model, batch))
    assert got == pytest.approx(float(reference), 1e-5)
    # Z⁻ examples with an all-ones mask are plain likelihood, weighted by α
    ones = [[1.0] * len(encode_record(r, tok, fmt).input_ids) for r in records]
    neg = GeneratorCollator(fmt, consistency=False)(_items(tok, fmt, records, ones))
    trainer = _trainer(model, fmt, tmp_path, consistency_weight=0.0, debias_alpha=2.0)
    with torch.no_grad():
        got = float(trainer.compute_loss(model, neg))
    assert got == pytest.approx(2 * float(reference), 1e-5)


def test_compute_loss_adds_lambda_times_unlikelihood(tiny_lm, tmp_path: Path) -> None:
    model, tok, fmt = tiny_lm
    records = toy_records()[:4]
    batch = GeneratorCollator(fmt, consistency=True, seed=3)(_items(tok, fmt, records))
    with torch.no_grad():
        mle = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            labels=batch["labels"],
        ).loss
        logits = model(
            input_ids=batch["perturbed_input_ids"], attention_mask=batch["attention_mask"]
        ).logits
    probs = logits[:, :-1].softmax(-1)
    targets = batch["perturbed_labels"][:, 1:]
    ul = 0.0
    for b, t in (targets != IGNORE_INDEX).nonzero().tolist():
        ul += -float(torch.log(1 - probs[b, t, targets[b, t]]))
    n_tokens = int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())
    trainer = _trainer(model, fmt, tmp_path, consistency_weight=0.5)
    with torch.no_grad():
        got = float(trainer.compute_loss(model, batch))
    assert got == pytest.approx(float(mle) + 0.5 * ul / n_tokens, rel=1e-5)


def _wrong_label_logprob(folder: Path) -> tuple[float, float]:
    model, tok, fmt = load_generator(folder, device="cpu")
    records = toy_records()
    gold = hypothesis_logprobs(model, tok, fmt, records)
    pairs = [(r, lab) for r in records for lab in LABELS if lab != r.label]
    wrong = hypothesis_logprobs(
        model, tok, fmt, [r for r, _ in pairs], labels=[lab for _, lab in pairs]
    )
    return statistics.mean(gold), statistics.mean(wrong)


@pytest.mark.slow
def test_consistency_loss_lowers_p_hypothesis_given_wrong_label(tiny_model, tmp_path: Path) -> None:
    """Same tiny model, data, seed and steps; only λ differs. Training seeds 0-3 give gaps of
    3.4-10.6 nats in log p(H | P, wrong label) (mean over the 24 wrong pairs; seed 0: 4.8), and
    the gold-minus-wrong margin grows in each (4.1-4.9 → 6.6-13.3)."""
    base = tiny_model("gpt2")
    common = {
        "max_steps": 80,
        "learning_rate": 1e-2,
        "batch_size": 12,
        "seed": 0,
        "progress": False,
        "logging_steps": 1000,  # not a setting: a TrainingArguments field, passed through
    }
    train_generator(toy_records(), base, tmp_path / "mle", consistency_weight=0.0, **common)
    train_generator(toy_records(), base, tmp_path / "ul", consistency_weight=0.5, **common)
    mle_gold, mle_wrong = _wrong_label_logprob(tmp_path / "mle")
    ul_gold, ul_wrong = _wrong_label_logprob(tmp_path / "ul")
    assert ul_wrong < mle_wrong - 2.0
    # the gold label still explains the hypothesis better than a wrong one, by more
    assert ul_gold - ul_wrong > mle_gold - mle_wrong


@pytest.mark.slow
def test_debias_unlikelihood_lowers_the_masked_token_only(tiny_model, tmp_path: Path) -> None:
    """One record in Z⁻ with its hypothesis word "sleeping" masked: after training, the
    word is much less likely than after training the same record as an ordinary one (seeds
    0-3: 3.2-6.4 nats lower; seed 0: 6.4), while its other tokens stay as likely (±0.1)."""
    base = tiny_model("gpt2")
    records = toy_records()
    target = next(r for r in records if r.hypothesis == "Nobody is sleeping.")
    rest = [r for r in records if r is not target]
    rejected = target.replace(meta={"rejected_by": ["sleeping@hypothesis"]})
    common = {
        "max_steps": 40,
        "learning_rate": 1e-2,
        "batch_size": 12,
        "seed": 0,
        "progress": False,
        "logging_steps": 1000,  # not a setting: a TrainingArguments field, passed through
        "consistency_weight": 0.0,
    }
    summary = train_generator(rest, base, tmp_path / "neg", negatives=[rejected], **common)
    train_generator(records, base, tmp_path / "pos", **common)
    assert summary["mask"]["biased_tokens_by_kind"] == {"ngram": 1}
    assert summary["objective"] == "debias"

    def token_logprobs(folder: Path) -> list[float]:
        model, tok, fmt = load_generator(folder, device="cpu")
        enc = encode_record(target, tok, fmt)
        ids = torch.tensor([enc.input_ids])
        with torch.no_grad():
            logp = model(input_ids=ids).logits[0, :-1].log_softmax(-1)
        return [float(logp[t - 1, enc.input_ids[t]]) for t in range(*enc.main)]

    neg, pos = token_logprobs(tmp_path / "neg"), token_logprobs(tmp_path / "pos")
    _, tok, fmt = load_generator(tmp_path / "neg", device="cpu")
    enc = encode_record(target, tok, fmt)
    hyp_pieces = tok.convert_ids_to_tokens(enc.input_ids[slice(*enc.main)])
    assert hyp_pieces == ["N", "o", "bod", "y", "Ġis", "Ġsleeping", "."]
    k = hyp_pieces.index("Ġsleeping")
    assert neg[k] < pos[k] - 2.0  # the masked word: unlikelihood
    others = [i for i in range(len(pos)) if i != k]
    assert statistics.mean(neg[i] for i in others) > statistics.mean(pos[i] for i in others) - 0.5


def test_bad_settings_fail_clearly(tiny_model, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="bad training setting"):
        train_generator(toy_records(), tiny_model("gpt2"), tmp_path / "g", no_such_option=1)
    with pytest.raises(ConfigError, match="no training records"):
        train_generator([], tiny_model("gpt2"), tmp_path / "g")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="busy holds files zdebias did not write"):
        train_generator(
            toy_records(), tiny_model("gpt2"), tmp_path / "busy", max_steps=1, progress=False
        )
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's choice")
@pytest.mark.parametrize(
    ("precision", "fast", "dtype"),
    [("auto", True, "bfloat16"), ("fp32", True, "float32"), ("auto", False, "float32")],
)
def test_summary_records_the_device_and_dtype_used(
    tiny_model,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    precision: str,
    fast: bool,
    dtype: str,
) -> None:
    """What `auto` chose on this machine, and where: in the summary (and train_summary.json)."""
    import json

    from zdebias.generation import settings as generation_settings

    monkeypatch.setattr(generation_settings, "fast_bf16", lambda: fast)
    out = tmp_path / "g"
    summary = train_generator(
        toy_records(), tiny_model("gpt2"), out, max_steps=1, precision=precision, progress=False
    )
    assert summary["compute"] == {
        "device": "cpu",
        "dtype": dtype,
        "setting": precision,
        "bf16_by_auto": dtype == "bfloat16",
        "torch": torch.__version__,
    }
    assert json.loads((out / "train_summary.json").read_text())["compute"] == summary["compute"]
