"""The generator trainer near the hardware (issue 28): the loss parts are the old ones bit for
bit, a step reads nothing back from the device, length-grouped batches deal every row once
an epoch (seeded, resumable), and the summary reports throughput."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from test_losses import LOGITS, TARGETS, P
from test_trainer import _items

from helpers.nli_toy import toy_records
from zdebias.generation.format import encode_record
from zdebias.generation.losses import (
    IGNORE_INDEX,
    masked_unlikelihood_loss,
    mle_loss,
    objective_parts,
    unlikelihood_loss,
)
from zdebias.generation.settings import GeneratorSettings
from zdebias.generation.trainer import (
    GeneratorCollator,
    GeneratorTrainer,
    GeneratorTrainingArguments,
    train_generator,
)
from zdebias.models.batching import LengthGroupedSampler, padding_share
from zdebias.models.throughput import PEAK_ENV, flop_parameters, throughput


@contextlib.contextmanager
def _no_host_reads() -> Iterator[None]:
    """Any read of a tensor's value by the host (what makes a GPU step wait) raises."""

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("a tensor was read back to the host")

    names = ("item", "tolist", "__bool__", "__float__", "__int__", "cpu", "numpy")
    saved = {name: getattr(torch.Tensor, name) for name in names}
    try:
        for name in names:
            setattr(torch.Tensor, name, refuse)
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch.Tensor, name, fn)


def _old_parts(logits, targets, negative, mask, p_logits, p_targets, alpha, lam):
    """The trainer's loss parts as main's compute_loss composed them (one call per part)."""
    ignore = torch.full_like(targets, IGNORE_INDEX)
    rows = negative.unsqueeze(1)
    parts = {"mle": mle_loss(logits, torch.where(rows, ignore, targets), reduction="sum")}
    if bool(negative.any()) and alpha > 0:
        parts["negative"] = alpha * masked_unlikelihood_loss(
            logits, torch.where(rows, targets, ignore), mask, reduction="sum"
        )
    if lam > 0:
        parts["consistency"] = lam * unlikelihood_loss(p_logits, p_targets, reduction="sum")
    return parts


def test_objective_parts_by_hand_on_a_three_token_vocabulary() -> None:
    # row 0 is a Z row (likelihood), row 1 a Z⁻ row with mask [1, 0, 1]; the perturbed copy
    # of row 0 has its last two positions as hypothesis targets
    logits = torch.tensor([LOGITS, LOGITS])
    targets = torch.tensor([TARGETS, TARGETS])
    negative = torch.tensor([False, True])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0]])
    p_targets = torch.tensor([[IGNORE_INDEX, 2, 0]])
    parts = objective_parts(
        logits, targets, negative, mask, logits[:1], p_targets, alpha=2.0, consistency_weight=0.5
    )
    mle = -sum(math.log(p) for p in P)
    neg = 2.0 * -(math.log(P[0]) + math.log(1 - P[1]) + math.log(P[2]))
    cons = 0.5 * -(math.log(1 - P[1]) + math.log(1 - P[2]))
    assert float(parts["mle"]) == pytest.approx(mle, abs=1e-5)
    assert float(parts["negative"]) == pytest.approx(neg, abs=1e-5)
    assert float(parts["consistency"]) == pytest.approx(cons, abs=1e-5)
    assert sorted(parts) == ["consistency", "mle", "negative"]


@pytest.mark.parametrize("alpha,lam", [(1.0, 0.5), (0.0, 0.5), (1.0, 0.0)])
def test_objective_parts_equal_the_old_composition_bit_for_bit(alpha: float, lam: float) -> None:
    g = torch.Generator().manual_seed(0)
    b, t, v = 4, 7, 11
    logits = torch.randn(b, t, v, generator=g) * 3
    targets = torch.randint(0, v, (b, t), generator=g)
    targets[:, :2] = IGNORE_INDEX
    targets[3, 5:] = IGNORE_INDEX  # padding
    negative = torch.tensor([False, True, False, True])
    mask = (torch.rand(b, t, generator=g) > 0.4).float()
    p_logits = torch.randn(b, t, v, generator=g)
    p_targets = torch.where(torch.rand(b, t, generator=g) > 0.5, targets, IGNORE_INDEX)

    def run(fn: Any) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
        a, c = logits.clone().requires_grad_(), p_logits.clone().requires_grad_()
        parts = fn(a, targets, negative, mask, c, p_targets, alpha, lam)
        sum(parts.values()).backward()
        return {k: x.detach() for k, x in parts.items()}, a.grad, c.grad

    def new(a, tg, neg, m, c, pt, al, la):  # type: ignore[no-untyped-def]
        return objective_parts(a, tg, neg, m, c, pt, alpha=al, consistency_weight=la)

    old_parts, old_grad, old_pgrad = run(_old_parts)
    new_parts, new_grad, new_pgrad = run(new)
    assert old_parts.keys() == new_parts.keys()
    assert all(torch.equal(old_parts[k], new_parts[k]) for k in old_parts)
    assert torch.equal(old_grad, new_grad)
    assert (old_pgrad is None and new_pgrad is None) or torch.equal(old_pgrad, new_pgrad)


def test_objective_parts_read_nothing_back_from_the_device() -> None:
    logits = torch.randn(2, 3, 5)
    targets = torch.tensor([[1, 2, 0], [3, IGNORE_INDEX, 4]])
    negative = torch.tensor([False, True])
    mask = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 1.0]])
    with _no_host_reads():
        parts = objective_parts(
            logits, targets, negative, mask, logits, targets, alpha=1.0, consistency_weight=0.5
        )
    assert sorted(parts) == ["consistency", "mle", "negative"]


class _Frozen(torch.nn.Module):
    """Stands in for the model: returns precomputed outputs (the model's own forward may read
    values back; the step's own code must not)."""

    def __init__(self, outputs: Any) -> None:
        super().__init__()
        self.outputs = outputs

    def forward(self, **kw: Any) -> Any:
        return self.outputs


def test_a_training_step_reads_nothing_back_and_counts_tokens_on_the_host(
    tiny_lm, tmp_path: Path
) -> None:
    model, tok, fmt = tiny_lm
    records = toy_records()[:4]
    masks = [None, None] + [[0.0] * len(encode_record(r, tok, fmt).input_ids) for r in records[2:]]
    items = _items(tok, fmt, records)
    items[2:] = _items(tok, fmt, records[2:], masks[2:])
    batch = GeneratorCollator(fmt, consistency=True, seed=1)(items)
    ids = torch.cat([batch["input_ids"], batch["perturbed_input_ids"]])
    attn = torch.cat([batch["attention_mask"], batch["attention_mask"]])
    outputs = model(input_ids=ids, attention_mask=attn)
    args = GeneratorTrainingArguments(output_dir=str(tmp_path), consistency_weight=0.5)
    trainer = GeneratorTrainer(model=model, args=args, train_dataset=[], data_collator=None)
    frozen = _Frozen(outputs).train()
    with _no_host_reads():
        loss = trainer.compute_loss(frozen, batch)
    real = sum(len(it["input_ids"]) for it in items)
    assert (trainer.tokens_seen, trainer.model_tokens) == (real, 2 * real)
    assert trainer.padded_tokens == ids.numel()
    assert batch["has_negative"] is True and batch["n_tokens"] == real
    assert sorted(trainer._parts) == ["consistency", "mle", "negative"]
    assert torch.isfinite(loss)


def test_length_grouped_sampler_deals_every_row_once_per_epoch_seeded() -> None:
    rng = np.random.default_rng(3)
    lengths = rng.integers(5, 60, size=203).tolist()
    s = LengthGroupedSampler(lengths, 8, seed=7, group=4)
    epoch0 = list(s)
    assert sorted(epoch0) == list(range(203))  # every row exactly once
    assert list(LengthGroupedSampler(lengths, 8, seed=7, group=4)) == epoch0  # seeded
    s.set_epoch(1)
    epoch1 = list(s)
    assert sorted(epoch1) == list(range(203)) and epoch1 != epoch0
    s.set_epoch(0)
    assert list(s) == epoch0  # depends on (seed, epoch) only, not on the global RNG
    torch.manual_seed(123)
    np.random.seed(5)
    assert list(s) == epoch0
    batches = s.batches()
    assert [len(b) for b in batches] == [8] * 25 + [3]  # the one short batch last
    # less padding than the same rows in random order
    shuffled = rng.permutation(203).tolist()
    random_batches = [shuffled[i : i + 8] for i in range(0, 203, 8)]
    assert padding_share(lengths, batches) < 0.5 * padding_share(lengths, random_batches)
    # batches are not dealt longest-first (HF's sampler does so within each group)
    maxima = [max(lengths[i] for i in b) for b in batches[:-1]]
    assert maxima != sorted(maxima, reverse=True)


def test_group_by_length_setting_auto_is_on_with_a_gpu_only() -> None:
    assert GeneratorSettings().group_by_length == "auto"
    assert GeneratorSettings().grouped("cuda") and not GeneratorSettings().grouped("cpu")
    assert GeneratorSettings(group_by_length=True).grouped("cpu")
    assert not GeneratorSettings(group_by_length="off").grouped("cuda")
    # unset, it is left out of a stage's hash (runs hashed before it stay done)
    assert "group_by_length" not in GeneratorSettings().model_dump()
    assert GeneratorSettings(group_by_length="on").model_dump()["group_by_length"] == "on"


def test_collator_pads_to_a_multiple_when_asked(nli_tokenizer) -> None:
    tok, fmt = nli_tokenizer
    items = _items(tok, fmt, toy_records()[:3])
    plain = GeneratorCollator(fmt, consistency=True)(items)
    eight = GeneratorCollator(fmt, consistency=True, pad_to_multiple_of=8)(items)
    width = plain["input_ids"].shape[1]
    assert eight["input_ids"].shape[1] == -(-width // 8) * 8
    assert torch.equal(eight["input_ids"][:, :width], plain["input_ids"])
    assert int((eight["labels"] != IGNORE_INDEX).sum()) == int(
        (plain["labels"] != IGNORE_INDEX).sum()
    )


def test_throughput_reports_mfu_against_a_stated_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PEAK_ENV, raising=False)
    cpu = throughput(1_000_000, 2_000, 2.0, "cpu")
    assert cpu["tokens_per_s"] == 1000.0 and cpu["achieved_tflops"] == 0.006
    assert cpu["mfu"] is None and cpu["peak_tflops"] is None
    monkeypatch.setenv(PEAK_ENV, "0.012")
    assert throughput(1_000_000, 2_000, 2.0, "cpu")["mfu"] == 0.5
    monkeypatch.delenv(PEAK_ENV)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    h200 = throughput(10**9, 10**5, 1.0, "cuda:0")
    assert h200["peak_tflops"] == 989.0 and h200["mfu"] == round(600 / 989, 4)


def test_flop_parameters_count_a_tied_embedding_once(tiny_model) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model("gpt2"))
    total = sum(p.numel() for p in model.parameters())
    tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
    expected = total if tied else total - model.get_input_embeddings().weight.numel()
    assert flop_parameters(model) == expected


@pytest.mark.slow
def test_grouped_runs_train_every_row_and_resume_identically(
    tiny_model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from safetensors.torch import load_file

    from zdebias.models import checkpoints as ck

    gpt = tiny_model("gpt2")
    records = toy_records()
    kw: dict[str, Any] = dict(
        epochs=2, batch_size=4, learning_rate=1e-3, checkpoint_steps=1, use_cpu=True, progress=False
    )
    default = train_generator(records, gpt, tmp_path / "d", **kw)
    off = train_generator(records, gpt, tmp_path / "off", group_by_length="off", **kw)
    on = train_generator(records, gpt, tmp_path / "on", group_by_length="on", **kw)
    w = {k: load_file(tmp_path / k / "model.safetensors") for k in ("d", "off", "on")}
    # auto is off on a CPU: the weights of the old trainer's order
    assert all(torch.equal(w["d"][k], w["off"][k]) for k in w["d"])
    assert (default["settings"]["group_by_length"], on["settings"]["group_by_length"]) == (
        False,
        True,
    )
    # grouped: the same rows each epoch (same token count), another order
    assert on["train_tokens"] == off["train_tokens"] and on["steps"] == off["steps"] == 6
    assert any(not torch.equal(w["on"][k], w["off"][k]) for k in w["on"])
    t = on["throughput"]
    assert t["model_tokens"] == 2 * on["train_tokens"]  # λ = 0.5: the perturbed copies too
    assert 0 <= t["padding_share"] < 1 and t["mfu"] is None and t["achieved_tflops"] > 0

    # cut after step 3 (mid-epoch 2) and resume: the same weights as uninterrupted
    original = ck.Checkpointing.on_save

    def on_save(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        out = original(self, args, state, control, **kwargs)
        if state.global_step >= 4:
            monkeypatch.setattr(ck.Checkpointing, "on_save", original)
            raise KeyboardInterrupt
        return out

    monkeypatch.setattr(ck.Checkpointing, "on_save", on_save)
    with pytest.raises(KeyboardInterrupt):
        train_generator(records, gpt, tmp_path / "r", group_by_length="on", **kw)
    resumed = train_generator(records, gpt, tmp_path / "r", group_by_length="on", **kw)
    assert resumed["resumed_from_step"] == 4
    wr = load_file(tmp_path / "r" / "model.safetensors")
    assert all(torch.equal(wr[k], w["on"][k]) for k in wr)
    assert resumed["train_tokens"] == on["train_tokens"]
