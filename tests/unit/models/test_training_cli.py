"""The four training commands share checkpoints, ``--report-to`` and ``--set KEY=VALUE``:
``--set`` reaches ``TrainingArguments``; a bad key or tracker fails before any training."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from zdebias.cli import app
from zdebias.errors import ConfigError

#: where each trainer's ``make_arguments`` is called, the training run they share (patched to
#: catch the arguments, then stop)
MODULES = {
    "train-classifier": "zdebias.models.training_run",
    "train-generator": "zdebias.models.training_run",
    "debias-generator": "zdebias.models.training_run",
    "counterfactual train": "zdebias.models.training_run",
}


class Caught(Exception):
    """Raised by the patched ``make_arguments`` once it has the ``TrainingArguments``."""


def _data(tmp_path: Path) -> Path:
    rows = [
        {"premise": "A man sleeps.", "hypothesis": h, "label": label}
        for h, label in [
            ("A man rests.", "entailment"),
            ("A man is awake.", "contradiction"),
            ("A man dreams of cats.", "neutral"),
        ]
        * 4
    ]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _args(command: str, tmp_path: Path, tiny_model: Callable[..., Path]) -> list[str]:
    data, out = str(_data(tmp_path)), str(tmp_path / "out")
    if command == "train-classifier":
        bert = str(tiny_model("bert"))
        return ["train-classifier", "--train", data, "--out", out, "--model", bert]
    if command == "train-generator":
        return ["train-generator", "--train", data, "--out", out, "--model", "x"]
    if command == "debias-generator":
        return ["debias-generator", "--train", data, "--out", out, "--generator", "g"]
    t5 = str(tiny_model("t5"))
    return [
        "counterfactual",
        "train",
        "--train",
        data,
        "--out",
        out,
        "--model",
        t5,
        "--spans",
        "random",
    ]


@pytest.fixture
def caught(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    import importlib

    from zdebias.generation.format import GeneratorFormat
    from zdebias.models import checkpoints

    seen: dict[str, Any] = {}

    def make_arguments(cls: type, values: dict[str, Any]) -> Any:
        seen["args"] = checkpoints.make_arguments(cls, values)
        raise Caught

    for module in set(MODULES.values()):
        monkeypatch.setattr(importlib.import_module(module), "make_arguments", make_arguments)
    monkeypatch.setattr(GeneratorFormat, "is_generator", staticmethod(lambda path: True))
    return seen


def _invoke(args: list[str]) -> Any:
    return CliRunner().invoke(app, [*args, "-q"])


@pytest.mark.parametrize("command", list(MODULES))
def test_set_reaches_the_training_arguments(
    command: str, tmp_path: Path, tiny_model: Callable[..., Path], caught: dict[str, Any]
) -> None:
    base = _args(command, tmp_path, tiny_model)
    sets = ["--set", "max_grad_norm=0.5", "--set", "logging_steps=7"]
    result = _invoke([*base, *sets, "--checkpoint-steps", "20", "--checkpoint-limit", "2"])
    assert isinstance(result.exception, Caught), result.output
    args = caught["args"]
    assert (args.max_grad_norm, args.logging_steps) == (0.5, 7)
    assert (args.save_strategy, args.save_steps, args.save_total_limit) == ("steps", 20, None)
    assert args.output_dir == str(tmp_path / ".out.checkpoints")
    assert args.report_to == []  # none
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", list(MODULES))
def test_bad_set_keys_and_trackers_fail_before_training(
    command: str, tmp_path: Path, tiny_model: Callable[..., Path], caught: dict[str, Any]
) -> None:
    base = _args(command, tmp_path, tiny_model)
    result = _invoke([*base, "--set", "max_grad_nrm=0.5"])
    assert isinstance(result.exception, ConfigError), result.output
    assert str(result.exception) == (
        "bad training setting: --set max_grad_nrm: not a TrainingArguments field; "
        "did you mean max_grad_norm?"
    )
    result = _invoke([*base, "--set", "learning_rate=1"])
    assert isinstance(result.exception, ConfigError), result.output
    assert "--set learning_rate: a zdebias setting; use --learning-rate" in str(result.exception)
    result = _invoke([*base, "--report-to", "mlflow"])
    assert result.exit_code == 2 and "'mlflow' is not one of" in result.output
    assert "args" not in caught and not list(tmp_path.glob(".out*"))


@pytest.mark.slow
def test_unknown_set_key_is_one_line_and_exit_2(tmp_path: Path) -> None:
    data = _data(tmp_path)
    cmd = [sys.executable, "-m", "zdebias.cli", "train-classifier", "--train", str(data)]
    cmd += ["--out", str(tmp_path / "clf"), "--set", "warmup_stepz=3"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: bad training setting: --set warmup_stepz: not a TrainingArguments field; "
        "did you mean warmup_steps?"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.jsonl"]


def test_a_command_run_again_into_the_same_out_resumes(
    tmp_path: Path, tiny_model: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from zdebias.models import checkpoints

    original = checkpoints.Checkpointing.on_save

    def cut(self: Any, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        original(self, args, state, control, **kwargs)
        raise KeyboardInterrupt  # a kill right after the first checkpoint

    data, out = _data(tmp_path), tmp_path / "gen"
    args = ["train-generator", "--train", str(data), "--out", str(out), "--model"]
    args += [str(tiny_model("gpt2")), "--max-steps", "4", "--batch-size", "4"]
    args += ["--checkpoint-steps", "2", "--json", "-q"]
    monkeypatch.setattr(checkpoints.Checkpointing, "on_save", cut)
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 130 and not out.exists()  # interrupted, nothing published
    monkeypatch.setattr(checkpoints.Checkpointing, "on_save", original)
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout)
    assert (summary["steps"], summary["resumed_from_step"]) == (4, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gen", "model-gpt2-0", "train.jsonl"]
