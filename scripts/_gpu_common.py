"""What the GPU check scripts share (run them as ``python3 scripts/gpu_check_*.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar


def sync(torch: Any) -> None:
    """Wait for queued CUDA work, so that wall-clock timings are real."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def emit(result: dict, out: str | None, filename: str, *, quiet: bool = False) -> None:
    """Print the result as JSON and write it to ``out``, else to ``$OUT/filename`` if set.
    ``quiet``: write only (the partial result after each part, kept if a later part hangs)."""
    text = json.dumps(result, indent=2)
    if not quiet:
        print(text)
    target = out or (Path(os.environ["OUT"]) / filename if os.environ.get("OUT") else None)
    if target:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text(text + "\n")


class StepClock:
    """Wall time at the end of every optimizer step of every HF ``Trainer`` in the process
    (installed with :meth:`install`; HF's own loop reads the loss back every step, so a step
    that ended on the host has ended on the device too)."""

    times: ClassVar[list[float]] = []

    @classmethod
    def install(cls) -> None:
        import time

        from transformers import TrainerCallback, trainer

        class _Clock(TrainerCallback):
            def on_train_begin(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
                cls.times = [time.perf_counter()]

            def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
                cls.times.append(time.perf_counter())

        if _Clock not in trainer.DEFAULT_CALLBACKS:
            trainer.DEFAULT_CALLBACKS.append(_Clock)

    @classmethod
    def rates(cls, split: int) -> dict[str, float | None]:
        """Steps/s over the first ``split`` steps and over the rest."""
        t = cls.times
        first = split / (t[split] - t[0]) if len(t) > split else None
        rest = (len(t) - 1 - split) / (t[-1] - t[split]) if len(t) > split + 1 else None
        return {
            f"first_{split}_steps_per_s": None if first is None else round(first, 2),
            "later_steps_per_s": None if rest is None else round(rest, 2),
        }
