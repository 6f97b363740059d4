"""A real run: the packaged MiniLM encoder fine-tuned on 2,000 SNLI examples learns NLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from zdebias.classify.predict import CLASSIFIER_INFO
from zdebias.classify.train import train_classifier
from zdebias.data.readers import read_records


def _sample(records: list, n: int, seed: int) -> list:
    idx = np.sort(np.random.default_rng(seed).choice(len(records), size=n, replace=False))
    return [records[i] for i in idx]


@pytest.mark.real_model
def test_minilm_on_2000_snli_examples_beats_chance(tmp_path: Path, data_dir: Path) -> None:
    # the files are sorted by label: sample at random
    train = _sample(read_records(data_dir / "snli_20k" / "train.jsonl"), 2000, seed=0)
    dev = _sample(read_records(data_dir / "snli_20k" / "dev.jsonl"), 300, seed=0)
    out = tmp_path / "minilm-snli"
    metrics = train_classifier(
        train,
        dev,
        out,
        model="minilm",
        learning_rate=1e-4,
        batch_size=32,
        epochs=1,
        warmup_steps=6,
        min_steps=0,  # one epoch exactly: 63 steps, not the packaged schedule's floor of 300
        max_length=64,
        seed=0,
        progress=False,
    )
    assert metrics["steps"] == 63 and metrics["n_train"] == 2000
    dev_acc = metrics["best"]["dev_accuracy"]
    print(
        f"minilm, 2000 SNLI examples, 1 epoch: dev accuracy {dev_acc:.4f} "
        f"({metrics['train_samples_per_second']:.1f} train examples/s)"
    )
    assert dev_acc > 0.5  # chance is 1/3 (the dev sample is near balanced)
    info = json.loads((out / CLASSIFIER_INFO).read_text())
    assert info["base_model"] == "minilm" and info["input"] == "pair"
