"""The infiller's HF ``Trainer``: only ``compute_loss`` changes (MLE + α·UL, as in trl)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from transformers import Trainer, TrainingArguments

from zdebias.counterfactual.infill import infill_loss


@dataclass
class InfillTrainingArguments(TrainingArguments):
    """``TrainingArguments`` plus the infilling settings."""

    alpha: float = field(default=1.0, metadata={"help": "weight of the unlikelihood term"})
    infill_arch: str = field(default="seq2seq", metadata={"help": "seq2seq|bert2bert|causal"})


class InfillTrainer(Trainer):
    """HF ``Trainer`` with the label-controlled infilling loss; logs both terms."""

    loss_is_scaled_for_ga = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._parts: dict[str, list[float]] = {"mle": [], "ul": []}

    def compute_loss(
        self,
        model: Any,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> Any:
        loss, mle, ul, outputs = infill_loss(
            model, inputs, arch=self.args.infill_arch, alpha=self.args.alpha
        )
        if model.training:
            self._parts["mle"].append(float(mle.detach()))
            self._parts["ul"].append(float(ul.detach()))
        return (loss, outputs) if return_outputs else loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        for key, values in self._parts.items():
            if values and "loss" in logs:
                logs[key] = round(sum(values) / len(values), 4)
                values.clear()
        super().log(logs, start_time)
