"""The classifier schedule: the packaged MiniLM's own, GD-NLI Table 9 for any other model, and
a floor in optimizer steps that small data reaches by repeating epochs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_classify_train import toy_nli

from zdebias.classify.settings import (
    MINILM_SCHEDULE,
    PAPER_SCHEDULE,
    ClassifierSettings,
    Schedule,
)
from zdebias.classify.train import train_classifier


def test_each_model_has_its_schedule_and_given_values_win() -> None:
    assert ClassifierSettings().schedule() == MINILM_SCHEDULE  # minilm is the default model
    assert ClassifierSettings(model="bert-base-uncased").schedule() == PAPER_SCHEDULE
    assert PAPER_SCHEDULE == Schedule(1e-5, 2000, 5.0, 0)  # GD-NLI Table 9, no floor
    given = ClassifierSettings(learning_rate=3e-5, min_steps=0).schedule()
    assert given == Schedule(3e-5, MINILM_SCHEDULE.warmup_steps, MINILM_SCHEDULE.epochs, 0)


def test_the_floor_counts_optimizer_steps() -> None:
    minilm = MINILM_SCHEDULE
    # 543 rows in batches of 32: 17 steps an epoch; two epochs make 34, the floor 300
    assert minilm.total_steps(17) == max(34, minilm.min_steps) == 300
    # 19,993 rows: 625 steps an epoch, two epochs are above the floor
    assert minilm.total_steps(625) == 1250
    assert Schedule(1e-5, 0, 2.5, 0).total_steps(10) == 25  # fractional epochs round up
    assert minilm.total_steps(17, max_steps=40) == 40  # max_steps wins over everything


@pytest.mark.slow
def test_a_small_training_set_trains_to_the_floor(tiny_model, tmp_path: Path) -> None:
    base = tiny_model("bert", head="encoder")
    train, dev = toy_nli(24, seed=1), toy_nli(6, seed=2)

    def metrics(name: str, min_steps: int) -> dict:
        """24 rows in batches of 8: 3 steps an epoch, 1 epoch, and a floor of ``min_steps``."""
        fast = dict(learning_rate=1e-3, batch_size=8, warmup_steps=0, patience=0, seed=3)
        out = tmp_path / name
        train_classifier(
            train, dev, out, model=base, epochs=1, min_steps=min_steps, progress=False, **fast
        )
        return json.loads((out / "metrics.json").read_text())

    saved = metrics("clf", 30)
    assert saved["steps"] == 30
    assert saved["settings"]["floored"] is True and saved["settings"]["min_steps"] == 30
    # a floored run is evaluated every max(steps an epoch, ceil(30 / 5)) = 6 steps, not after
    # each of its ten epochs
    assert saved["settings"]["eval_steps"] == 6
    assert [h["step"] for h in saved["history"]] == [6, 12, 18, 24, 30]

    plain = metrics("plain", 0)
    assert plain["steps"] == 3 and plain["settings"]["floored"] is False
    assert [h["step"] for h in plain["history"]] == [3]


def test_warm_up_beyond_the_training_says_so(tiny_model, tmp_path: Path, capfd) -> None:
    base = tiny_model("bert", head="encoder")
    train_classifier(
        toy_nli(16, seed=1),
        None,
        tmp_path / "c",
        model=base,
        epochs=1,
        batch_size=8,
        progress=False,
    )  # the paper's schedule: 2,000 warm-up steps, 2 training steps
    assert "2000 warm-up steps >= 2 training steps" in capfd.readouterr().err


@pytest.mark.parametrize("value", [-1, -5])
def test_a_negative_floor_is_refused(value: int) -> None:
    with pytest.raises(ValueError, match="min_steps"):
        ClassifierSettings(min_steps=value)
