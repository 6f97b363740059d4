"""What train-classifier tells while it trains (issues 52.7, 53.5): its planned optimizer
steps at the start and the steps done and time taken at the end, also with -q; and after a
Ctrl-C the resume hint is the last line (no progress bar redrawn after it)."""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.cli_main import run_main
from zdebias.models.training_run import _duration

LABELS = ("entailment", "neutral", "contradiction")


def _data(path: Path, n: int = 12) -> Path:
    rows = [
        {"premise": f"p {i}", "hypothesis": f"h {i % 5}", "label": LABELS[i % 3]} for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.slow
def test_quiet_run_says_its_planned_steps_and_time(
    tmp_path: Path, tiny_model: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--train", _data(tmp_path / "d.jsonl"), "--model", tiny_model("bert")]
    opts = ["--max-steps", "2", "--batch-size", "4", "--warmup-steps", "0"]
    code = run_main(["-q", "train-classifier", *args, *opts, "--out", tmp_path / "clf"])
    err = capsys.readouterr().err
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("train-classifier: ")]
    assert lines[0] == (
        "train-classifier: 2 optimizer steps planned (3 per epoch of 12 examples, 4 a step)"
    )
    assert re.fullmatch(r"train-classifier: 2 of 2 steps done in \d+ s", lines[1]), lines
    assert len(lines) == 2  # no estimate with -q


def test_resume_hint_is_the_last_line(
    tmp_path: Path,
    tiny_model: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from zdebias.classify.train import ClassifierTrainer

    step = ClassifierTrainer.training_step
    calls = []

    def cut(self: ClassifierTrainer, *args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return step(self, *args, **kwargs)

    monkeypatch.setattr(ClassifierTrainer, "training_step", cut)
    args = ["--train", _data(tmp_path / "d.jsonl"), "--model", tiny_model("bert")]
    opts = ["--max-steps", "4", "--batch-size", "4", "--warmup-steps", "0"]
    assert run_main(["train-classifier", *args, *opts, "--out", tmp_path / "clf"]) == 130
    gc.collect()  # a bar left open would redraw itself when collected
    err = capsys.readouterr().err
    last = re.split(r"[\r\n]", err.rstrip())[-1]
    assert last == "interrupted; run the same command again to resume from its last checkpoint"
    assert "train-classifier: 4 optimizer steps planned" in err


def test_durations_read_as_a_person_writes_them() -> None:
    assert [_duration(s) for s in (0.4, 42, 185, 7_800)] == [
        "0 s",
        "42 s",
        "3 min 5 s",
        "2 h 10 min",
    ]


def test_a_recipe_stage_stays_quiet_with_q(
    tmp_path: Path, tiny_model: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The library call a recipe stage makes (no ``tell_steps``) only logs the lines: ``-q``
    silences them (``zdebias run -q`` prints nothing on stderr)."""
    import logging

    from zdebias.classify.train import train_classifier
    from zdebias.data.readers import read_records

    records = read_records(_data(tmp_path / "d.jsonl"))
    logger = logging.getLogger("zdebias")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        train_classifier(
            records, None, tmp_path / "clf", model=str(tiny_model("bert")), max_steps=1,
            batch_size=4, warmup_steps=0, progress=False,
        )  # fmt: skip
    finally:
        logger.setLevel(level)
    assert "train-classifier:" not in capsys.readouterr().err
