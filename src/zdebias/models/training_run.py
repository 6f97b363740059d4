"""One training run on HF ``Trainer``, from its arguments to its published model folder.

What the classifier, generator and infiller trainers share. A run is named by a fingerprint
of its settings (:meth:`TrainerSettings.run_identity`) and of what else decides it (data
digests, base model identities, label set); it trains in a hidden work folder beside ``out``
with :class:`~zdebias.models.checkpoints.Checkpointing`, so the same run started again after
a cut resumes from its last checkpoint. The main process publishes the work folder to ``out``
atomically and removes the checkpoints; a failure removes the work folder and any checkpoint
folder that holds nothing to resume from.

Every trainer does, in this order::

    with TrainingRun(out, settings, records_digest(train), model_identity(base)) as run:
        args = run.arguments(MyTrainingArguments, {"learning_rate": 1e-5})
        trainer = MyTrainer(model=net, args=args, callbacks=[run.checkpoints])
        result = trainer.train(resume_from_checkpoint=run.resume(trainer))
        loss = run.train_loss(result)  # the whole run's, a resumed one's too
        run.publish(trainer, net.save_pretrained)

This module imports transformers (through :mod:`zdebias.models.checkpoints`): import it lazily.
"""

from __future__ import annotations

import logging
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from transformers.trainer_callback import ProgressCallback, TrainerCallback

from zdebias.data.writers import mark_owned, publish_dir, work_dir_for
from zdebias.models.checkpoints import (
    Checkpointing,
    Stateful,
    fingerprint,
    make_arguments,
    tensorboard_logs,
)
from zdebias.models.distributed import barrier
from zdebias.models.trainer_settings import TrainerSettings


class TrainingRun:
    """The checkpoints, work folder and publishing of one training run into ``out``.

    ``identity``: JSON-able parts that, with ``settings.run_identity()``, tell this run from
    another (a resumed run must match them all). Use it as a context manager: on a failure
    the work folder goes, and the checkpoint folder too unless it holds one to resume from.
    """

    def __init__(self, out: str | Path, settings: TrainerSettings, *identity: Any) -> None:
        self.out = Path(out)
        self.settings = settings
        run_id = fingerprint(settings.run_identity(), *identity)
        self.checkpoints = Checkpointing(out, settings, run_id)
        self.work = work_dir_for(out)
        self.totals = RunTotals()

    def __enter__(self) -> TrainingRun:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is not None:
            if self.totals.trainer is not None:  # no bar redrawn after the command's last line
                close_bars(self.totals.trainer)
            shutil.rmtree(self.work, ignore_errors=True)
            self.checkpoints.abandon()

    @property
    def resumed_from(self) -> int | None:
        """The step of the checkpoint this run resumed from (``None``: it started over)."""
        return self.checkpoints.resumed_from

    def arguments(self, args_cls: type, values: dict[str, Any]) -> Any:
        """``args_cls`` (a ``TrainingArguments`` dataclass) of the trainer's own ``values``,
        then checkpointing, experiment tracking and the user's ``--set`` (``extra``); a bad
        value ends in one :class:`~zdebias.errors.ConfigError` line."""
        s = self.settings
        own = {**values, **self.checkpoints.arguments(), **s.tracking_arguments(), **s.extra}
        return make_arguments(args_cls, own)

    def resume(self, trainer: Any = None, **states: Stateful) -> str | None:
        """The checkpoint to hand to ``trainer.train(resume_from_checkpoint=...)``: this
        run's last complete one, with ``states`` (what a checkpoint keeps beyond HF's own, by
        name: early stopping, the trainer's counters) restored from it; ``None`` to start
        over. ``trainer``: the HF ``Trainer`` about to train (its counters are kept as state
        ``trainer`` when it has them), whose loss and time :class:`RunTotals` carries across
        a cut."""
        if trainer is not None:
            self.totals.trainer = trainer
            if hasattr(trainer, "checkpoint_state"):
                states = {"trainer": trainer, **states}
        self.checkpoints.states.update(states, run_totals=self.totals)
        resume = self.checkpoints.resume_point()
        self.totals.known = resume is None  # a checkpoint's totals make it known
        self.checkpoints.restore(resume)
        self.totals.started = time.perf_counter()
        return resume

    def train_loss(self, result: Any) -> float:
        """The mean training loss over all the run's steps, for a resumed run too (HF's
        ``result.training_loss`` covers the steps of one ``train()`` call). A checkpoint
        written before zdebias kept totals has only its logged losses: they stand in for the
        steps before the cut (exact up to the steps after its last log line)."""
        trainer = self.totals.trainer
        if self.resumed_from is None or trainer is None:
            return float(result.training_loss)
        before = (
            self.totals.loss
            if self.totals.known
            else _logged_loss(trainer.state.log_history, self.resumed_from)
        )
        return (before + float(trainer._total_loss_scalar)) / max(trainer.state.global_step, 1)

    @property
    def seconds_before(self) -> float:
        """Seconds the run trained before the cut it resumed from (0.0: not resumed, or a
        checkpoint without totals)."""
        return self.totals.seconds if self.resumed_from is not None and self.totals.known else 0.0

    def publish(
        self,
        trainer: Any,
        save: Callable[[Path], Any],
        *,
        overwrite: bool = True,
        publish: Callable[[Path, Path], Any] | None = None,
    ) -> None:
        """The main process saves the model into the work folder (``save(folder)``, plus the
        tensorboard logs and the ownership marker), renames it to ``out`` (``publish(work,
        out)``, default :func:`~zdebias.data.writers.publish_dir`) and removes the checkpoints;
        the other processes drop their work folder. Every process returns once ``out`` is whole."""
        if trainer.is_world_process_zero():  # several processes: the main one publishes
            if self.settings.report_to == "tensorboard":
                tensorboard_logs(self.checkpoints.root, self.work)
            save(self.work)
            mark_owned(self.work, "model")  # --overwrite may replace it later
            if publish is None:
                publish_dir(self.work, self.out, overwrite=overwrite)
            else:
                publish(self.work, self.out)
            self.checkpoints.finish()
        else:
            shutil.rmtree(self.work, ignore_errors=True)
        barrier()  # the others return once OUT is whole


class RunTotals:
    """What a checkpoint keeps so that a resumed run reports the whole run: the training loss
    summed over the steps before it and the seconds they took. Reads the ``Trainer``'s running
    sums (``_total_loss_scalar``, the logged part; ``_tr_loss``, since the last log line)."""

    def __init__(self) -> None:
        self.trainer: Any = None
        self.loss = 0.0
        self.seconds = 0.0
        self.known = True
        self.started = time.perf_counter()

    def checkpoint_state(self, folder: Path) -> dict[str, Any]:
        """The sums up to this checkpoint (nothing without a trainer)."""
        t = self.trainer
        if t is None:
            return {}
        pending = getattr(t, "_tr_loss", None)
        loss = float(t._total_loss_scalar) + (float(pending.item()) if pending is not None else 0.0)
        return {
            "loss_sum": self.loss + loss,
            "seconds": self.seconds + time.perf_counter() - self.started,
        }

    def load_checkpoint_state(self, state: dict[str, Any], folder: Path) -> None:
        """Back to the sums :meth:`checkpoint_state` saved."""
        if "loss_sum" in state:
            self.loss, self.seconds, self.known = state["loss_sum"], state["seconds"], True


def _logged_loss(history: list[dict[str, Any]], step: int) -> float:
    """The loss summed over steps 1..``step`` from a run's log lines (each the mean over the
    steps since the previous one)."""
    total, last = 0.0, 0
    for row in history:
        if "loss" in row and row.get("step", 0) <= step:
            total += row["loss"] * (row["step"] - last)
            last = row["step"]
    return total


def route_logs(trainer: Any) -> None:
    """The Trainer's log lines (``{'loss': ...}``) off stdout, which carries only a command's
    result: HF prints them there (``PrinterCallback``, or under its progress bar). With
    progress bars they are written under the bar on stderr, without them logged (logger
    ``zdebias``, INFO: on stderr, silenced by ``-q``)."""
    from transformers.trainer_callback import PrinterCallback

    if trainer.pop_callback(PrinterCallback) is not None:
        trainer.add_callback(_LogLines())
    if trainer.pop_callback(ProgressCallback) is not None:
        trainer.add_callback(_StderrProgress())


class _LogLines(TrainerCallback):
    """The Trainer's log lines through ``logging`` (main process only)."""

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
        if state.is_local_process_zero and logs:
            logging.getLogger("zdebias").info("%s", _shown(logs))


class _StderrProgress(ProgressCallback):
    """HF's progress bars (on stderr), with the log lines written under them on stderr."""

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
        if not (state.is_local_process_zero and logs and self.training_bar is not None):
            return
        if logging.getLogger("zdebias").isEnabledFor(logging.INFO):
            self.training_bar.write(str(_shown(logs)), file=sys.stderr)


def close_bars(trainer: Any) -> None:
    """Close the trainer's progress bars now: a training cut short (Ctrl-C, an error) leaves
    them open, and tqdm would redraw them at exit, after the command's last line (the resume
    hint)."""
    for callback in getattr(trainer.callback_handler, "callbacks", ()):
        if isinstance(callback, ProgressCallback):
            for attr in ("training_bar", "prediction_bar"):
                bar = getattr(callback, attr, None)
                if bar is not None:
                    bar.close()
                    setattr(callback, attr, None)


def _duration(seconds: float) -> str:
    """``seconds`` for a person: ``42 s``, ``3 min 5 s``, ``2 h 10 min``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


class StepsClock(TrainerCallback):
    """The training's steps and time for the user (main process, on stderr): the planned
    optimizer steps at the start and the steps done and time taken at the end; after the
    first 5 % of the steps (1 to 20), an estimate of the time left. Each is logged (INFO:
    under the progress bar; silenced by ``-q``); ``always``: the start and end lines are
    written even with ``-q`` (a command's own training, not a recipe stage's). ``what``: the
    command's name; ``plan``: how the steps come about (``3 per epoch of 12 examples``)."""

    def __init__(
        self, what: str, plan: str = "", trainer: Any = None, *, always: bool = False
    ) -> None:
        self.what = what
        self.plan = plan
        self.always = always
        #: the trainer whose progress bar the estimate is written under
        self.trainer = trainer
        self.first = 0
        self.started = 0.0
        self.estimate_at = 0

    def _bar(self) -> Any:
        """The open training progress bar (None: none, e.g. with ``-q``)."""
        handler = getattr(self.trainer, "callback_handler", None)
        for callback in getattr(handler, "callbacks", ()):
            if isinstance(callback, ProgressCallback) and callback.training_bar is not None:
                return callback.training_bar
        return None

    def say(self, line: str, *, always: bool = False) -> None:
        """One line on stderr, under the progress bar while one is drawn; logged (INFO) unless
        ``always``."""
        bar = self._bar()
        if not always and not logging.getLogger("zdebias").isEnabledFor(logging.INFO):
            return
        if bar is not None:
            bar.write(line, file=sys.stderr)
        elif always:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        else:
            logging.getLogger("zdebias").info("%s", line)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if not state.is_world_process_zero:
            return
        self.first, self.started = state.global_step, time.perf_counter()
        left = state.max_steps - self.first
        self.estimate_at = self.first + max(1, min(20, -(-left * 5 // 100)))
        plan = f" ({self.plan})" if self.plan else ""
        resumed = f"; resuming after step {self.first:,}" if self.first else ""
        steps = f"{state.max_steps:,} optimizer step{'s' if state.max_steps != 1 else ''}"
        self.say(f"{self.what}: {steps} planned{plan}{resumed}", always=self.always)

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if not state.is_world_process_zero or state.global_step != self.estimate_at:
            return
        done = state.global_step - self.first
        if done <= 0 or state.global_step >= state.max_steps:
            return
        elapsed = time.perf_counter() - self.started
        left = elapsed / done * (state.max_steps - state.global_step)
        line = (
            f"{self.what}: step {state.global_step:,} of {state.max_steps:,} after "
            f"{_duration(elapsed)}; about {_duration(left)} left"
        )
        self.say(line)

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if not state.is_world_process_zero:
            return
        elapsed = _duration(time.perf_counter() - self.started)
        stopped = " (stopped early)" if state.global_step < state.max_steps else ""
        this_run = f", {state.global_step - self.first:,} of them in this run" if self.first else ""
        self.say(
            f"{self.what}: {state.global_step:,} of {state.max_steps:,} steps done in "
            f"{elapsed}{stopped}{this_run}",
            always=self.always,
        )


def _shown(logs: dict[str, Any]) -> dict[str, Any]:
    """A log line as HF shows it: floats to 4 digits, without ``total_flos``."""
    return {
        k: f"{v:.4g}" if isinstance(v, float) else v for k, v in logs.items() if k != "total_flos"
    }


__all__ = ["RunTotals", "StepsClock", "TrainingRun", "close_bars", "route_logs"]
