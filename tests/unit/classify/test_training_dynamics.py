"""Training dynamics (issue 30): recording them leaves the trained weights exactly as they
were, and what is recorded is the gold label's probability of the training forward pass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from test_classify_train import FAST, toy_nli

import zdebias.classify.train as train_module
from zdebias.classify.train import train_classifier
from zdebias.data.schema import Record

DYNAMICS = "training_dynamics.jsonl"


def _rows(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / DYNAMICS).read_text().splitlines()]


@pytest.mark.slow
def test_capture_leaves_the_weights_bit_for_bit(
    tiny_model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tiny_model("bert", head="encoder")  # dropout on, batches grouped by length
    train = toy_nli(20, seed=3)
    kw = dict(model=base, epochs=2, seed=4, device="cpu", **FAST)
    with_capture = train_classifier(train, None, tmp_path / "with", **kw)
    encode = train_module._encode  # the rows without their index column: nothing recorded
    monkeypatch.setattr(
        train_module, "_encode", lambda *a, **k: encode(*a, **{**k, "index": False})
    )
    without = train_classifier(train, None, tmp_path / "without", **kw)
    assert with_capture["training_dynamics"]["values"] == 40  # 20 examples x 2 epochs
    assert without["training_dynamics"]["values"] == 0
    a = load_file(tmp_path / "with" / "model.safetensors")
    b = load_file(tmp_path / "without" / "model.safetensors")
    assert a.keys() == b.keys() and [k for k in a if not torch.equal(a[k], b[k])] == []
    assert with_capture["train_loss"] == without["train_loss"]
    rows = _rows(tmp_path / "with")
    assert [r["id"] for r in rows] == [r.id for r in train]
    assert all(r["epochs"] == 2 and len(r["gold_probs"]) == 2 for r in rows)
    saved = json.loads((tmp_path / "with" / "metrics.json").read_text())
    assert saved["training_dynamics"]["file"] == DYNAMICS


def _no_dropout(folder: Path) -> Path:
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _gold_probs(folder: Path, records: list[Record]) -> np.ndarray:
    """p(gold) of each record under the weights in ``folder`` (one forward pass)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    net = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    enc = tok([r.premise for r in records], [r.hypothesis for r in records], padding=True,
              truncation=True, max_length=128, return_tensors="pt")  # fmt: skip
    with torch.no_grad():
        probs = torch.softmax(net(**enc).logits.float(), -1).numpy()
    gold = [net.config.label2id[r.label] for r in records]
    return probs[np.arange(len(records)), gold]


@pytest.mark.slow
def test_recorded_probabilities_are_the_training_forward_pass(
    tiny_model: Any, tmp_path: Path
) -> None:
    # no dropout, one step per epoch (the batch is every row): epoch e's values are the
    # model before its e-th step, i.e. the base model, then the model after one step
    base = _no_dropout(tiny_model("bert"))  # with its classification head: no random init
    train = toy_nli(12, seed=6)
    kw = dict(model=base, batch_size=12, learning_rate=5e-3, warmup_steps=0, device="cpu",
              progress=False)  # fmt: skip
    train_classifier(train, None, tmp_path / "two", epochs=2, **kw)
    train_classifier(train, None, tmp_path / "one", epochs=1, **kw)
    rows = _rows(tmp_path / "two")
    recorded = np.array([r["gold_probs"] for r in rows])
    assert recorded.shape == (12, 2)
    np.testing.assert_allclose(recorded[:, 0], _gold_probs(base, train), atol=1e-5)
    np.testing.assert_allclose(recorded[:, 1], _gold_probs(tmp_path / "one", train), atol=1e-5)
    assert np.abs(recorded[:, 1] - recorded[:, 0]).max() > 1e-4  # the step moved them
    correct = np.array([r["correct"] for r in rows])
    conf = recorded.mean(axis=1)
    assert [r["confidence"] for r in rows] == pytest.approx(conf.tolist())
    assert [r["variability"] for r in rows] == pytest.approx(recorded.std(axis=1).tolist())
    assert [r["correctness"] for r in rows] == pytest.approx(correct.mean(axis=1).tolist())
