"""Resumable training: HF ``Trainer`` checkpoints in a folder that outlives a cut run.

A training run that publishes its model to ``OUT`` keeps its checkpoints in the hidden sibling
``.OUT.checkpoints/`` (:func:`checkpoint_root`), never inside the published folder:

    .OUT.checkpoints/
      zdebias-run.json        the run's fingerprint (settings, data, base model)
      checkpoint-500/         HF's checkpoint (weights, optimizer, scheduler, RNG, trainer
        zdebias-state.json    state) plus our own state (early stopping, counters), and, last,
        zdebias-complete.json the marker that the checkpoint is whole

:class:`Checkpointing` (an HF ``TrainerCallback``) writes our state and the marker after each
HF save, keeps the newest ``checkpoint_limit`` complete checkpoints and skips the save at the
very end (the finished model is published instead). Started again with the same fingerprint,
:meth:`Checkpointing.resume_point` names the last complete checkpoint, which the trainer hands
to ``trainer.train(resume_from_checkpoint=...)``; a different fingerprint starts over. Once the
model is published, :meth:`Checkpointing.finish` removes the folder.

Our own state: any object with ``checkpoint_state(folder) -> dict`` (JSON; it may also write
files into ``folder``) and ``load_checkpoint_state(state, folder)``, registered by name.

This module imports transformers: import it lazily (never from ``zdebias.cli``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from zdebias.data.writers import write_json
from zdebias.errors import ConfigError
from zdebias.models.distributed import barrier, is_main_process, rank, world_size
from zdebias.models.trainer_settings import TrainerSettings

log = logging.getLogger("zdebias")

RUN_FILE = "zdebias-run.json"
STATE_FILE = "zdebias-state.json"
COMPLETE = "zdebias-complete.json"
PREFIX = "checkpoint-"
EPOCH_RNG_FILE = "zdebias-epoch-rng.pt"
HF_RNG_FILE = "rng_state.pth"


class Stateful(Protocol):
    """State a resumed run needs beyond HF's own (weights, optimizer, RNG, trainer state)."""

    def checkpoint_state(self, folder: Path) -> dict[str, Any]: ...

    def load_checkpoint_state(self, state: dict[str, Any], folder: Path) -> None: ...


def checkpoint_root(out: str | Path) -> Path:
    """The checkpoint folder of a run that publishes ``out``: ``.NAME.checkpoints`` beside it."""
    path = Path(os.path.abspath(out))
    return path.parent / f".{path.name}.checkpoints"


def _json_bytes(obj: Any) -> bytes:
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)
    return text.encode("utf-8", "surrogatepass")


def fingerprint(*parts: Any) -> str:
    """A digest of JSON-able parts (settings, records as dicts, model identities)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(_json_bytes(part) + b"\0")
    return h.hexdigest()


def records_digest(records: Iterable[Any]) -> str:
    """A digest of records (``Record`` or anything with ``to_dict``), in order."""
    h = hashlib.sha256()
    for r in records:
        h.update(_json_bytes(r.to_dict() if hasattr(r, "to_dict") else r) + b"\n")
    return h.hexdigest()


def model_identity(ref: str | Path) -> Any:
    """What identifies a base model: a local folder's file names, sizes and mtimes, or the name."""
    path = Path(ref)
    if not path.exists():
        return str(ref)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [
        [
            p.relative_to(path).as_posix() if path.is_dir() else p.name,
            p.stat().st_size,
            p.stat().st_mtime_ns,
        ]
        for p in files
    ]


def _steps(folder: Path) -> int:
    try:
        return int(folder.name[len(PREFIX) :])
    except ValueError:
        return -1


class Checkpointing(TrainerCallback):
    """Checkpoints of one training run into :func:`checkpoint_root` of ``out`` (module doc)."""

    def __init__(
        self,
        out: str | Path,
        settings: TrainerSettings,
        run_fingerprint: str,
        states: Mapping[str, Stateful] | None = None,
    ) -> None:
        self.root = checkpoint_root(out)
        self.steps = settings.checkpoint_steps
        self.limit = settings.checkpoint_limit
        self.fingerprint = run_fingerprint
        self.states = dict(states or {})
        self.resumed_from: int | None = None
        self._epoch_rng: dict[str, Any] | None = None
        self._restore_rng: dict[str, Any] | None = None
        self._save_at_epoch_end = False

    # ------------------------------------------------------------------ before training

    def arguments(self) -> dict[str, Any]:
        """The ``TrainingArguments`` of checkpointing (the trainer's output folder included)."""
        out: dict[str, Any] = {"output_dir": str(self.root), "save_total_limit": None}
        if self.steps > 0:
            out.update(save_strategy="steps", save_steps=self.steps)
        else:
            out["save_strategy"] = "no"
        return out

    def resume_point(self) -> str | None:
        """The last complete checkpoint of this same run, or ``None`` (start over).

        Checkpoints of another run (different settings, data or base model) are removed, and
        so are incomplete ones (cut while saving). With several processes the main one tidies
        the folder while the others wait, then all resume from the same checkpoint.
        """
        if is_main_process():
            old = _read_json(self.root / RUN_FILE)
            foreign = self.root.exists() and (not self.root.is_dir() or self.root.is_symlink())
            if foreign or (old is None and self.root.is_dir() and any(self.root.iterdir())):
                raise ConfigError(  # not a checkpoint folder zdebias made: never removed
                    f"{self.root} holds files zdebias did not write, where the checkpoints of "
                    "this training go; move it away (or choose another --out)"
                )
            if self.root.exists() and (old or {}).get("fingerprint") != self.fingerprint:
                if any(self.root.glob(f"{PREFIX}*")):
                    log.warning(
                        "%s: checkpoints of a run with other settings or data; starting over",
                        self.root,
                    )
                shutil.rmtree(self.root, ignore_errors=True)
            self.root.mkdir(parents=True, exist_ok=True)
            write_json({"fingerprint": self.fingerprint}, self.root / RUN_FILE)
            for folder in self.root.glob(f"{PREFIX}*"):
                if not (folder.is_dir() and (folder / COMPLETE).is_file() and _steps(folder) >= 0):
                    shutil.rmtree(folder, ignore_errors=True)
        barrier()
        complete = [
            f for f in self.root.glob(f"{PREFIX}*") if (f / COMPLETE).is_file() and _steps(f) >= 0
        ]
        if not complete:
            return None
        last = max(complete, key=_steps)
        self.resumed_from = _steps(last)
        return str(last)

    def restore(self, checkpoint: str | None) -> None:
        """Load our own state saved with ``checkpoint`` (nothing when starting over)."""
        if checkpoint is None:
            return
        folder = Path(checkpoint)
        saved = _read_json(folder / STATE_FILE) or {}
        for name, holder in self.states.items():
            if name in saved:
                holder.load_checkpoint_state(saved[name], folder)
        # the random state the epoch resumed in starts with: HF's own (the checkpoint's) when
        # the checkpoint ends an epoch, else the one saved when that epoch began
        epoch = (_read_json(folder / "trainer_state.json") or {}).get("epoch") or 0
        hf_rng = HF_RNG_FILE if world_size() < 2 else f"rng_state_{rank()}.pth"
        start = hf_rng if float(epoch).is_integer() else EPOCH_RNG_FILE
        if (folder / start).is_file():
            self._restore_rng = torch_load(folder / start)
        log.info("resuming training from step %s (%s)", self.resumed_from, folder)

    # ------------------------------------------------------------------ HF hooks

    def on_epoch_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: Any,
    ) -> TrainerControl:
        """Keep the random state the epoch starts with; a resumed run starts its epoch with
        the saved one, so a sampler that shuffles with the global RNG (HF's length-grouped
        sampler) deals the same batches as the uninterrupted run."""
        if self._restore_rng is not None:
            set_rng_state(self._restore_rng)
            self._restore_rng = None
        self._epoch_rng = rng_state()
        return control

    def on_step_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: Any,
    ) -> TrainerControl:
        """No checkpoint after the last step (the finished model is published instead); one
        due at the end of an epoch waits for the epoch's evaluation (HF saves before it), so
        a run resumed there does not skip that evaluation."""
        if state.global_step >= state.max_steps:
            control.should_save = False
        elif control.should_save and float(state.epoch or 0).is_integer():
            control.should_save = False
            self._save_at_epoch_end = True
        return control

    def on_epoch_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: Any,
    ) -> TrainerControl:
        """The checkpoint deferred from the epoch's last step, after its evaluation."""
        if self._save_at_epoch_end and state.global_step < state.max_steps:
            control.should_save = True
        self._save_at_epoch_end = False
        return control

    def on_save(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: Any,
    ) -> TrainerControl:
        """Our state and the completion marker into the new checkpoint; drop older ones."""
        assert args.output_dir is not None  # HF saves checkpoints there
        out = Path(args.output_dir)
        folder = out / f"{PREFIX}{state.global_step}"
        if not state.is_world_process_zero or not folder.is_dir():
            return control  # HF saves on the main process only; so do we
        saved = {name: holder.checkpoint_state(folder) for name, holder in self.states.items()}
        if self._epoch_rng is not None:
            torch_save(self._epoch_rng, folder / EPOCH_RNG_FILE)
        write_json(saved, folder / STATE_FILE)
        write_json({"step": state.global_step}, folder / COMPLETE)
        done = sorted(
            (f for f in out.glob(f"{PREFIX}*") if (f / COMPLETE).is_file()),
            key=_steps,
        )
        for old in done[: max(0, len(done) - self.limit)]:
            shutil.rmtree(old, ignore_errors=True)
        return control

    # ------------------------------------------------------------------ after training

    def finish(self) -> None:
        """Remove the checkpoints (call once the model is published)."""
        shutil.rmtree(self.root, ignore_errors=True)

    def abandon(self) -> None:
        """After a failure: keep the folder only if it holds a checkpoint to resume from.
        Only the main process, which wrote the folder, removes it."""
        if (
            is_main_process()
            and self.root.is_dir()
            and not any(self.root.glob(f"{PREFIX}*/{COMPLETE}"))
        ):
            shutil.rmtree(self.root, ignore_errors=True)


def rng_state() -> dict[str, Any]:
    """The global random states (Python, NumPy, torch CPU and CUDA)."""
    import random

    import numpy as np
    import torch

    out = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "cpu": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def set_rng_state(state: dict[str, Any]) -> None:
    """Back to a :func:`rng_state`."""
    import random

    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        cuda = state["cuda"]
        if isinstance(cuda, torch.Tensor):  # HF's file: the current device's state
            torch.cuda.set_rng_state(cuda)
        else:
            torch.cuda.set_rng_state_all(cuda)


def torch_save(obj: Any, path: Path) -> None:
    import torch

    torch.save(obj, path)


def torch_load(path: Path) -> Any:
    """Our own checkpoint file (random states hold NumPy arrays: not weights only)."""
    import torch

    return torch.load(path, weights_only=False)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------- TrainingArguments


def check_extra(args_cls: type, settings: TrainerSettings, *, own: Sequence[str] = ()) -> None:
    """Fail before any work when a ``--set`` key is not a field of ``args_cls`` or when the
    ``report_to`` tracker is not installed. ``own``: fields zdebias adds to ``args_cls``."""
    names = {f.name for f in dataclasses.fields(args_cls) if f.init}
    for key in settings.extra:
        if key not in names or key in own:
            close = difflib.get_close_matches(key, sorted(names - set(own)), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(
                f"bad training setting: --set {key}: not a TrainingArguments field{hint}"
            )
    need = {"tensorboard": ("tensorboard", "tensorboardX"), "wandb": ("wandb",)}
    modules = need.get(settings.report_to, ())
    if modules:
        import importlib.util

        if not any(importlib.util.find_spec(m) for m in modules):
            raise ConfigError(
                f"--report-to {settings.report_to} needs the {modules[0]} package "
                f"(pip install {modules[0]})"
            )


def make_arguments(args_cls: type, values: dict[str, Any]) -> Any:
    """``args_cls(**values)``, a bad value ending in one :class:`ConfigError` line."""
    try:
        return args_cls(**values)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"bad training setting: {' '.join(str(err).split())}") from None


def tensorboard_logs(root: Path, dest: Path) -> None:
    """Copy the tensorboard event files of a run (``root/runs``) to ``dest/runs``."""
    runs = root / "runs"
    if runs.is_dir():
        with contextlib.suppress(OSError):
            shutil.copytree(runs, dest / "runs", dirs_exist_ok=True)


__all__ = [
    "COMPLETE",
    "Checkpointing",
    "Stateful",
    "check_extra",
    "checkpoint_root",
    "fingerprint",
    "make_arguments",
    "model_identity",
    "records_digest",
    "tensorboard_logs",
]
