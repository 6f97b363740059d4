"""One early-stopping policy for every trainer (classifier, infiller): best epoch by a dev metric.

:class:`EarlyStopping` is an HF ``TrainerCallback``: after each evaluation it compares the
metric with the best so far (a strict improvement is needed: a tie keeps the earlier best),
copies the weights of a new best to CPU memory, and stops training after ``patience``
evaluations in a row without improvement (``patience <= 0``: never stop early). After
``trainer.train()``, :meth:`EarlyStopping.restore_best` loads the best weights back. Its state,
best weights included, is saved with every checkpoint (:mod:`zdebias.models.checkpoints`), so a
resumed run stops and keeps the same epoch as an uninterrupted one.

>>> stop = EarlyStopping("eval_loss", greater_is_better=False, patience=3)   # doctest: +SKIP
>>> Trainer(..., callbacks=[stop]).train(); stop.restore_best(model)         # doctest: +SKIP

This module imports transformers: import it lazily (never from ``zdebias.cli``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments


class EarlyStopping(TrainerCallback):
    """Keep the best weights by ``metric`` (in memory) and stop after ``patience`` bad evaluations.

    ``record`` names the values kept in :attr:`history` for each evaluation, as
    ``{name in history: key in the evaluation metrics}`` (default: the metric under its own
    name); each row also has ``step`` and ``epoch``.
    """

    def __init__(
        self,
        metric: str,
        *,
        greater_is_better: bool,
        patience: int,
        record: Mapping[str, str] | None = None,
    ) -> None:
        self.metric = metric
        self.greater_is_better = greater_is_better
        self.patience = patience
        self.record = dict(record) if record is not None else {metric: metric}
        self.best_value: float | None = None
        self.best_state: dict[str, Any] | None = None
        self.best_step: int | None = None
        self.best_epoch: float | None = None
        self.bad_evals = 0
        self.history: list[dict[str, float]] = []
        self.stopped_early = False

    def improves(self, value: float) -> bool:
        """Whether ``value`` is strictly better than the best so far (always, for the first)."""
        if self.best_value is None:
            return True
        return value > self.best_value if self.greater_is_better else value < self.best_value

    def update(self, value: float, *, step: int, epoch: float, model: Any = None) -> bool:
        """Record one evaluation; returns whether training should stop now."""
        if self.improves(value):
            self.best_value = value
            self.best_step = step
            self.best_epoch = epoch
            if model is not None:
                self.best_state = {
                    k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()
                }
            self.bad_evals = 0
            return False
        self.bad_evals += 1
        if self.patience > 0 and self.bad_evals >= self.patience:
            self.stopped_early = True
        return self.stopped_early

    def on_evaluate(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, float] | None = None,
        model: Any = None,
        **kwargs: Any,
    ) -> TrainerControl:
        """HF hook: read ``metrics[metric]``, keep the best weights, stop when patience runs out."""
        if not metrics or self.metric not in metrics:
            return control
        epoch = round(float(state.epoch or 0.0), 4)
        row: dict[str, float] = {"step": state.global_step, "epoch": epoch}
        for name, key in self.record.items():
            row[name] = float(metrics.get(key, float("nan")))
        self.history.append(row)
        value = float(metrics[self.metric])
        if self.update(value, step=state.global_step, epoch=epoch, model=model):
            control.should_training_stop = True
        return control

    def restore_best(self, model: Any) -> bool:
        """Load the best weights into ``model``; ``False`` when there was no evaluation."""
        if self.best_state is None:
            return False
        model.load_state_dict(self.best_state)
        return True

    #: what a checkpoint keeps besides the best weights
    _SAVED = ("best_value", "best_step", "best_epoch", "bad_evals", "history", "stopped_early")
    #: the best weights' file in a checkpoint folder
    BEST_FILE = "zdebias-best-weights.pt"

    def checkpoint_state(self, folder: Path) -> dict[str, Any]:
        """The policy's state for a checkpoint; the best weights go to ``folder``."""
        import torch

        if self.best_state is not None:
            torch.save(self.best_state, folder / self.BEST_FILE)
        return {k: getattr(self, k) for k in self._SAVED}

    def load_checkpoint_state(self, state: dict[str, Any], folder: Path) -> None:
        """Back to the state :meth:`checkpoint_state` saved in ``folder``."""
        import torch

        for key in self._SAVED:
            setattr(self, key, state[key])
        best = folder / self.BEST_FILE
        self.best_state = torch.load(best, weights_only=True) if best.is_file() else None
