"""The classifier trainer near the hardware (issue 28): on a GPU, batches padded to a
multiple of 8 (few distinct shapes) and copied non-blocking; the training dynamics read
nothing back per step. On the CPU nothing changes (no padding beyond the batch's longest)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from helpers.nli_toy import toy_records
from zdebias.classify.dynamics import DynamicsRecorder
from zdebias.classify.train import _Collator, _device_settings, _encode


def _rows(tokenizer: Any, hypothesis_too: bool = False) -> list[dict[str, Any]]:
    records = toy_records()[:5]
    ids = np.arange(len(records)) % 3
    return _encode(tokenizer, records, "pair", ids, 64, {}, with_hypothesis=hypothesis_too).rows


def test_collator_pads_to_a_multiple_of_8_when_asked(tiny_model: Callable[..., Path]) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model("bert"))
    rows = _rows(tokenizer, hypothesis_too=True)
    plain = _Collator(tokenizer)(rows)
    width = max(len(r["input_ids"]) for r in rows)
    assert plain["input_ids"].shape[1] == width  # CPU: as before
    eight = _Collator(tokenizer, pad_to_multiple_of=8)(rows)
    assert eight["input_ids"].shape[1] == -(-width // 8) * 8
    assert eight["hyp_input_ids"].shape[1] % 8 == 0
    assert torch.equal(eight["input_ids"][:, :width], plain["input_ids"])
    assert int(eight["attention_mask"].sum()) == int(plain["attention_mask"].sum())


def test_gpu_runs_copy_batches_non_blocking(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "accelerator_config" not in _device_settings("auto")  # no GPU here
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # one GPU for the one process
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    gpu = _device_settings("auto")
    assert gpu["accelerator_config"] == {"non_blocking": True} and gpu["bf16"] is True
    assert "accelerator_config" not in _device_settings("cpu")


def test_dynamics_record_reads_nothing_back_until_flushed(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = DynamicsRecorder(4)
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    labels = torch.tensor([0, 2])

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("read back to the host in a training step")

    with monkeypatch.context() as m:
        m.setattr(torch.Tensor, "cpu", refuse)
        m.setattr(torch.Tensor, "numpy", refuse)
        rec.record(torch.tensor([1, 3]), logits, labels)
    probs, correct = rec.matrices()  # flushed here
    expected = torch.softmax(logits, -1)
    assert probs[1, 0] == pytest.approx(float(expected[0, 0]))
    assert probs[3, 0] == pytest.approx(float(expected[1, 2]))
    assert np.isnan(probs[0, 0]) and (correct[1, 0], correct[3, 0]) == (1.0, 0.0)
