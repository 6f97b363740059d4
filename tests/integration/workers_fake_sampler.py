"""The fake sampler of ``pipeline_fake_sampler`` with repeats, for the worker tests: the last
2 outputs of every round come from a pool of 5 seeds, so rounds (and workers) find each
other's samples. Installed as the ``hf`` backend on import when ``ZD_FAKE_SAMPLER=1``."""

from __future__ import annotations

import os

from pipeline_fake_sampler import FakeBackend

from zdebias.generation import trained as trained_mod

POOL = 5


class RepeatingBackend(FakeBackend):
    """``batch_size - 2`` outputs of the round's seed, then 2 of seed ``seed % POOL``."""

    def generate(self, batch_size: int, seed: int) -> list[list[int]]:
        return super().generate(batch_size - 2, seed) + super().generate(2, seed % POOL)


if os.environ.get("ZD_FAKE_SAMPLER") == "1":
    trained_mod.BACKENDS["hf"] = RepeatingBackend  # type: ignore[assignment]
