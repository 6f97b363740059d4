"""Recipe plugin for the pipeline integration tests (``plugins: [pipeline_fake_sampler]``).

A tiny random generator writes no well-formed samples, so with ``ZD_FAKE_SAMPLER=1`` this
module swaps the HF sampling backend for :class:`FakeBackend`: each round returns demo-grammar
samples drawn from the round's seed (so runs are reproducible and resumable exactly like real
sampling), after sleeping ``ZD_FAKE_SAMPLE_SLEEP`` seconds (so a test can kill it mid-way).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from zdebias.data.demo import make_demo_corpus
from zdebias.generation import trained as trained_mod
from zdebias.generation.format import GeneratorFormat


class FakeBackend:
    """Stands in for ``HFBackend``: token ids of (premise, label token, hypothesis, EOS)."""

    def __init__(self, generator: Path, fmt: GeneratorFormat, settings: Any, **_: Any) -> None:
        from transformers import AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(generator)
        self.fmt = fmt

    def generate(self, batch_size: int, seed: int) -> list[list[int]]:
        time.sleep(float(os.environ.get("ZD_FAKE_SAMPLE_SLEEP", "0")))
        corpus = make_demo_corpus(seed=seed % 2**31, n_train=max(30, batch_size), n_dev=3, n_test=3)
        out = []
        for r in corpus["train"][:batch_size]:
            ids = self.tok(r.premise, add_special_tokens=False)["input_ids"]
            ids.append(self.fmt.label_token_ids[r.label])
            ids += self.tok(r.hypothesis, add_special_tokens=False)["input_ids"]
            ids.append(self.fmt.eos_token_id)
            out.append(ids)
        return out


if os.environ.get("ZD_FAKE_SAMPLER") == "1":
    trained_mod.BACKENDS["hf"] = FakeBackend  # type: ignore[assignment]
