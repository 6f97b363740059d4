"""Length-grouped training order: batches of similar length, so padding is small, in an
order that is still random and reproducible.

:class:`LengthGroupedSampler` deals one epoch as: a permutation seeded by (seed, epoch); cut
into groups of ``group`` batches; each group sorted by length and cut into batches; the full
batches shuffled (same seed), the one short batch (if any) last. Every row comes exactly once
per epoch, and the order depends only on (lengths, batch size, seed, epoch), never on the
global random state, so a run resumed mid-epoch deals the same batches as an uninterrupted
one. HF's own ``LengthGroupedSampler`` instead keeps each group's batches in descending
length (the longest batch first): a short run then trains from long to short sequences.

This module imports torch: import it lazily.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch


class LengthGroupedSampler(torch.utils.data.Sampler[int]):
    """Row indices whose consecutive ``batch_size`` chunks have similar ``lengths``."""

    def __init__(
        self, lengths: Sequence[int], batch_size: int, *, seed: int = 0, group: int = 50
    ) -> None:
        if batch_size < 1 or group < 1:
            raise ValueError("batch_size and group must be at least 1")
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.batch_size, self.seed, self.group = batch_size, seed, group
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration deals (HF's Trainer and accelerate call this)."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.lengths)

    def batches(self) -> list[np.ndarray]:
        """This epoch's batches, in training order."""
        rng = np.random.default_rng([self.seed, self.epoch])
        order = rng.permutation(len(self.lengths))
        span = self.batch_size * self.group
        full: list[np.ndarray] = []
        short: list[np.ndarray] = []
        for start in range(0, len(order), span):
            chunk = order[start : start + span]
            chunk = chunk[np.argsort(-self.lengths[chunk], kind="stable")]
            for b in range(0, len(chunk), self.batch_size):
                batch = chunk[b : b + self.batch_size]
                (full if len(batch) == self.batch_size else short).append(batch)
        picked = rng.permutation(len(full))
        return [full[i] for i in picked] + short

    def __iter__(self) -> Iterator[int]:
        for batch in self.batches():
            yield from (int(i) for i in batch)


def padding_share(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> float:
    """Share of padded positions when each batch is padded to its longest row."""
    lengths_arr = np.asarray(lengths)
    padded = sum(len(b) * int(lengths_arr[list(b)].max()) for b in batches if len(b))
    real = sum(int(lengths_arr[list(b)].sum()) for b in batches)
    return 0.0 if padded == 0 else 1.0 - real / padded


__all__ = ["LengthGroupedSampler", "padding_share"]
