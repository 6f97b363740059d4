"""The training run every trainer shares: its arguments, its work folder, publishing, failure."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from zdebias.models.checkpoints import checkpoint_root
from zdebias.models.trainer_settings import TrainerSettings
from zdebias.models.training_run import TrainingRun


@dataclass
class Args:
    """The few ``TrainingArguments`` fields a run sets, and two of a trainer's own."""

    output_dir: str = ""
    save_strategy: str = "no"
    save_steps: int = 0
    save_total_limit: int | None = 3
    report_to: str = "all"
    learning_rate: float = 0.0
    logging_steps: int = 0


class MainProcess:
    def is_world_process_zero(self) -> bool:
        return True


def test_arguments_are_the_trainers_then_checkpointing_tracking_and_set(tmp_path: Path) -> None:
    settings = TrainerSettings(checkpoint_steps=20, extra={"logging_steps": 5})
    with TrainingRun(tmp_path / "out", settings, "data") as run:
        args = run.arguments(Args, {"learning_rate": 1e-5, "logging_steps": 50})
    assert args == Args(
        output_dir=str(checkpoint_root(tmp_path / "out")),
        save_strategy="steps",
        save_steps=20,
        save_total_limit=None,
        report_to="none",
        learning_rate=1e-5,
        logging_steps=5,  # --set wins over the trainer's own value
    )


def test_a_new_run_starts_over_and_publishes_its_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with TrainingRun(out, TrainerSettings(), "data") as run:
        assert run.work.parent == tmp_path and run.work.is_dir()
        assert run.resume() is None and run.resumed_from is None
        run.publish(MainProcess(), lambda folder: (folder / "model.bin").write_text("w"))
    assert (out / "model.bin").read_text() == "w"
    assert not run.work.exists() and not checkpoint_root(out).exists()


def test_a_failure_removes_the_work_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(RuntimeError), TrainingRun(out, TrainerSettings(), "data") as run:
        run.resume()
        raise RuntimeError("cut")
    assert not run.work.exists() and not out.exists()
    assert not checkpoint_root(out).exists()  # it held no checkpoint to resume from
