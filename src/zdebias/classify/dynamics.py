"""Training dynamics of a classifier training (dataset cartography, Swayamdipta et al. 2020):
for every training example and epoch, the gold label's probability and whether the argmax
was right, taken from the logits of the training forward passes themselves (training mode,
dropout on, as the paper does; no extra forward pass).

:class:`DynamicsRecorder` is a ``TrainerCallback``; ``ClassifierTrainer.compute_loss`` hands it
each training batch's logits, labels and example indices (the ``zdebias_index`` column the
collator carries and the loss never sees). It reads tensors only, so the weights are the same
with and without it. With several processes (DDP) each records its own batches and the epochs
are merged (every process the same) when an epoch ends, a checkpoint is saved and training
ends; an example a process saw twice in one epoch (the sampler's padding) keeps its first
value. A checkpoint keeps the epochs recorded so far (``zdebias-dynamics.npz``), so a resumed
run writes every epoch. With PoE and the other debiasing losses, the main model's logits are
recorded (not the ensemble's).

This module imports torch and transformers: import it lazily.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from zdebias.data.writers import atomic_open
from zdebias.models.distributed import world_size
from zdebias.stats.dynamics import DYNAMICS_FILE, dynamics_rows

#: the column that carries each training example's position through the collator
INDEX_COLUMN = "zdebias_index"
#: the recorder's file inside a checkpoint
CHECKPOINT_FILE = "zdebias-dynamics.npz"


class DynamicsRecorder(TrainerCallback):
    """Per-example, per-epoch gold-label probabilities and correctness of ``n`` examples."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.epoch = 0
        self.probs: dict[int, np.ndarray] = {}
        self.correct: dict[int, np.ndarray] = {}
        self._pending: list[tuple[int, torch.Tensor, torch.Tensor, torch.Tensor]] = []

    # ------------------------------------------------------------------ recording

    def _arrays(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        if epoch not in self.probs:
            self.probs[epoch] = np.full(self.n, np.nan, dtype=np.float64)
            self.correct[epoch] = np.full(self.n, np.nan, dtype=np.float64)
        return self.probs[epoch], self.correct[epoch]

    @torch.no_grad()
    def record(self, index: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor) -> None:
        """One training batch: ``index`` ``[B]`` rows, ``logits`` ``[B, L]``, ``labels`` ``[B]``.

        The values stay on the device until :meth:`flush` (an epoch's end, a checkpoint, the
        end of training): copying them to the host every step would make each step wait for
        the GPU."""
        probs = torch.softmax(logits.detach().float(), dim=-1)
        gold = probs.gather(1, labels.view(-1, 1)).squeeze(1)
        right = probs.argmax(dim=-1) == labels
        self._pending.append((self.epoch, index.detach(), gold, right))

    def flush(self) -> None:
        """Copy the batches recorded on the device into the per-epoch arrays, in order."""
        pending, self._pending = self._pending, []
        for epoch, index, gold, right in pending:
            p, c = self._arrays(epoch)
            rows = index.cpu().numpy().astype(np.int64)
            gold_np = gold.cpu().numpy().astype(np.float64)
            right_np = right.cpu().numpy().astype(np.float64)
            for k, row in enumerate(rows.tolist()):
                if math.isnan(p[row]):  # a repeat in the same epoch (DDP padding) keeps the first
                    p[row], c[row] = gold_np[k], right_np[k]

    # ------------------------------------------------------------------ HF hooks

    def on_epoch_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: Any,
    ) -> TrainerControl:
        """The epoch now trained: 0, 1, ...; a run resumed inside epoch e goes on with e."""
        self.epoch = math.floor(float(state.epoch or 0) + 1e-9)
        return control

    def on_epoch_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: Any,
    ) -> TrainerControl:
        self.merge()
        return control

    def on_save(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: Any,
    ) -> TrainerControl:
        self.merge()  # before the checkpoint's own state is written (main process)
        return control

    def on_train_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: Any,
    ) -> TrainerControl:
        self.merge()
        return control

    def merge(self) -> None:
        """With several processes: every process gets every process's values (first rank
        first for an example two processes saw in one epoch)."""
        self.flush()
        if world_size() < 2:
            return
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return
        gathered: list[Any] = [None] * world_size()
        dist.all_gather_object(gathered, (self.probs, self.correct))
        for probs, correct in gathered:
            for epoch, values in probs.items():
                p, c = self._arrays(epoch)
                fill = np.isnan(p) & ~np.isnan(values)
                p[fill] = values[fill]
                c[fill] = correct[epoch][fill]

    # ------------------------------------------------------------------ checkpoints

    def checkpoint_state(self, folder: Path) -> dict[str, Any]:
        """The epochs recorded so far, saved into the checkpoint ``folder``."""
        self.flush()
        epochs = sorted(self.probs)
        arrays: dict[str, Any] = {f"probs_{e}": self.probs[e] for e in epochs}
        arrays.update({f"correct_{e}": self.correct[e] for e in epochs})
        with atomic_open(folder / CHECKPOINT_FILE, "wb") as fh:  # never a torn file to resume
            np.savez(fh, **arrays)
        return {"file": CHECKPOINT_FILE, "epochs": epochs, "n": self.n}

    def load_checkpoint_state(self, state: dict[str, Any], folder: Path) -> None:
        with np.load(folder / state["file"]) as saved:
            self.probs = {int(e): saved[f"probs_{e}"].copy() for e in state["epochs"]}
            self.correct = {int(e): saved[f"correct_{e}"].copy() for e in state["epochs"]}

    # ------------------------------------------------------------------ results

    def matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """``(gold_probs, correct)``, each ``[N, E]`` over the epochs that recorded anything."""
        self.flush()
        epochs = [e for e in sorted(self.probs) if not np.all(np.isnan(self.probs[e]))]
        if not epochs:
            return np.zeros((self.n, 0)), np.zeros((self.n, 0))
        return (
            np.stack([self.probs[e] for e in epochs], axis=1),
            np.stack([self.correct[e] for e in epochs], axis=1),
        )

    def write(
        self, folder: Path, ids: Sequence[str], labels: Sequence[str | None]
    ) -> dict[str, Any]:
        """Write :data:`DYNAMICS_FILE` into ``folder``; what the training summary says of it."""
        probs, correct = self.matrices()
        seen = ~np.isnan(probs)
        trained = np.flatnonzero(seen.sum(axis=1) > 0)  # a run cut early may miss some
        rows = dynamics_rows(
            [ids[i] for i in trained.tolist()],
            [labels[i] for i in trained.tolist()],
            probs[trained],
            correct[trained],
        )
        with atomic_open(folder / DYNAMICS_FILE) as fh:
            for row in rows:
                fh.write(_line(row))
        return {
            "file": DYNAMICS_FILE,
            "n": len(rows),
            "epochs": int(probs.shape[1]),
            "values": int(seen.sum()),
            "examples_never_trained_on": self.n - len(rows),
            "recorded": "gold-label probability and argmax correctness of the main model, "
            "from the training forward passes (training mode)",
        }


def _line(row: dict[str, Any]) -> str:
    import json

    return json.dumps(row, ensure_ascii=False) + "\n"


__all__ = ["CHECKPOINT_FILE", "INDEX_COLUMN", "DynamicsRecorder"]
