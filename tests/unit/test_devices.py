"""The numbers on another device or dtype: each operation that runs a model, against its
float32 CPU value, within a tolerance stated per dtype.

The tests that compare with hand-computed values pin the CPU (a GPU computes in other orders,
and HF would pick it on its own); these check that the GPU path gives the same numbers, with
every input on the model's device. The ``cuda`` cases skip without a CUDA GPU
(``scripts/gpu_tests.sh`` runs them); the CPU bfloat16 cases run everywhere and keep the
bfloat16 tolerance honest.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from helpers.nli_toy import toy_records

#: relative tolerance of a result against the float32 CPU value, per dtype: float32 on a GPU
#: differs only in summation order (TF32 matmuls are off by default in torch); bfloat16 keeps
#: 8 bits of mantissa (a relative step of 2^-8 = 0.4 % per rounding)
RTOL = {"float32": 1e-5, "bfloat16": 3e-2}
#: absolute tolerance of a value in [0, 1] (probabilities, normalised saliency scores)
ATOL = {"float32": 1e-5, "bfloat16": 3e-2}

CASES = [
    pytest.param("cpu", "bfloat16", id="cpu-bf16"),
    pytest.param("cuda", "float32", id="cuda-fp32", marks=pytest.mark.cuda),
    pytest.param("cuda", "bfloat16", id="cuda-bf16", marks=pytest.mark.cuda),
]


def _on(model: torch.nn.Module, device: str, dtype: str) -> torch.nn.Module:
    return model.to(device=device, dtype=getattr(torch, dtype)).eval()


@pytest.fixture
def generator(tiny_model) -> tuple:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from zdebias.generation.format import add_format_tokens

    folder = tiny_model("gpt2")
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    fmt = add_format_tokens(tok, model, "nli")
    return model.eval(), tok, fmt


def _generator_loss(model, fmt, batch: dict, tmp_path: Path, *, use_cpu: bool) -> float:
    from zdebias.generation.trainer import GeneratorTrainer, GeneratorTrainingArguments

    args = GeneratorTrainingArguments(
        output_dir=str(tmp_path), consistency_weight=0.5, use_cpu=use_cpu
    )
    trainer = GeneratorTrainer(model=model, args=args, train_dataset=[], data_collator=None)
    device = next(model.parameters()).device
    with torch.no_grad():
        moved = {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}
        return float(trainer.compute_loss(model, moved))


@pytest.mark.parametrize(("device", "dtype"), CASES)
def test_generator_loss_on_each_device(generator, tmp_path: Path, device: str, dtype: str) -> None:
    """The generator's objective (likelihood + λ·consistency unlikelihood) of one batch."""
    from zdebias.generation.format import encode_record
    from zdebias.generation.trainer import GeneratorCollator

    model, tok, fmt = generator
    items = []
    for r in toy_records()[:4]:
        enc = encode_record(r, tok, fmt)
        items.append(
            {"input_ids": enc.input_ids, "label_index": enc.label_index, "main": enc.main}
            | {"ul_mask": None}
        )
    batch = GeneratorCollator(fmt, consistency=True, seed=3)(items)
    reference = _generator_loss(model, fmt, batch, tmp_path / "cpu", use_cpu=True)
    moved = _on(model, device, dtype)
    got = _generator_loss(moved, fmt, batch, tmp_path / "dev", use_cpu=device == "cpu")
    assert got == pytest.approx(reference, rel=RTOL[dtype])


@pytest.mark.parametrize(("device", "dtype"), CASES)
def test_hypothesis_logprobs_on_each_device(generator, device: str, dtype: str) -> None:
    """log p(H | l, P) of the scorer (generation/score.py), inputs moved to the model."""
    from zdebias.generation.score import hypothesis_logprobs

    model, tok, fmt = generator
    records = toy_records()[:6]
    reference = hypothesis_logprobs(model, tok, fmt, records)
    got = hypothesis_logprobs(_on(model, device, dtype), tok, fmt, records)
    assert got == pytest.approx(reference, rel=RTOL[dtype])


@pytest.mark.parametrize(("device", "dtype"), CASES)
def test_classifier_probabilities_on_each_device(tiny_model, device: str, dtype: str) -> None:
    from zdebias.classify.predict import load_classifier, predict_proba

    clf = load_classifier(tiny_model("bert"), device="cpu")
    records = toy_records()[:8]
    reference = predict_proba(clf, records)
    moved = dataclasses.replace(clf, model=_on(clf.model, device, dtype))
    got = predict_proba(moved, records)
    assert got.ravel().tolist() == pytest.approx(reference.ravel().tolist(), abs=ATOL[dtype])


@pytest.mark.parametrize(("device", "dtype"), CASES)
def test_saliency_on_each_device(tiny_model, device: str, dtype: str) -> None:
    from zdebias.classify.predict import load_classifier
    from zdebias.counterfactual.saliency import compute_saliency

    clf = load_classifier(tiny_model("bert"), device="cpu")
    records = toy_records()[:4]

    def scores(c) -> list[float]:
        return [
            w.score
            for ex in compute_saliency(c, records, target="loss")
            for field in ex.words.values()
            for w in field
        ]

    reference = scores(clf)
    got = scores(dataclasses.replace(clf, model=_on(clf.model, device, dtype)))
    assert got == pytest.approx(reference, abs=ATOL[dtype])


@pytest.mark.cuda
def test_load_classifier_auto_takes_the_gpu(tiny_model) -> None:
    from zdebias.classify.predict import load_classifier, predict_proba

    clf = load_classifier(tiny_model("bert"))  # auto
    assert clf.device.type == "cuda"
    assert predict_proba(clf, toy_records()[:3]).shape == (3, len(clf.labels))


def test_model_device_reads_auto_and_keeps_a_named_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from zdebias.models.compute import model_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert [model_device(), model_device("auto"), model_device("cpu")] == ["cpu"] * 3
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert [model_device(None), model_device("auto")] == ["cuda", "cuda"]
    assert [model_device("cpu"), model_device("cuda:1")] == ["cpu", "cuda:1"]


def test_every_loader_takes_auto(
    tiny_model, tiny_generator: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``auto`` means the GPU when there is one, else the CPU, for each model loader (the
    infiller and generator loaders passed ``auto`` on to torch, which refused it)."""
    from zdebias.classify.predict import load_classifier
    from zdebias.counterfactual.model import load_infiller
    from zdebias.generation.score import load_generator

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    loaded = [
        next(load_generator(tiny_generator, device="auto")[0].parameters()).device,
        load_infiller(tiny_model("t5"), device="auto").model.device,
        load_classifier(tiny_model("bert"), device="auto").device,
    ]
    assert [d.type for d in loaded] == ["cpu"] * 3
