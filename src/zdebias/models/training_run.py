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
        result = trainer.train(resume_from_checkpoint=run.resume())
        run.publish(trainer, net.save_pretrained)

This module imports transformers (through :mod:`zdebias.models.checkpoints`): import it lazily.
"""

from __future__ import annotations

import logging
import shutil
import sys
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

    def __enter__(self) -> TrainingRun:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is not None:
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

    def resume(self, **states: Stateful) -> str | None:
        """The checkpoint to hand to ``trainer.train(resume_from_checkpoint=...)``: this
        run's last complete one, with ``states`` (what a checkpoint keeps beyond HF's own, by
        name: early stopping, the trainer's counters) restored from it; ``None`` to start
        over."""
        self.checkpoints.states.update(states)
        resume = self.checkpoints.resume_point()
        self.checkpoints.restore(resume)
        return resume

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


def _shown(logs: dict[str, Any]) -> dict[str, Any]:
    """A log line as HF shows it: floats to 4 digits, without ``total_flos``."""
    return {
        k: f"{v:.4g}" if isinstance(v, float) else v for k, v in logs.items() if k != "total_flos"
    }


__all__ = ["TrainingRun", "route_logs"]
