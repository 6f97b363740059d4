"""Issue 52.7: "wrote 1 records": every count a command prints is singular for one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli_main import run_main
from zdebias.classify.settings import Schedule
from zdebias.evaluation.tables import unlearned_lines
from zdebias.report.text import train_text


def test_convert_wrote_1_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"premise": "p", "hypothesis": "h", "label": "neutral"}) + "\n")
    assert run_main(["convert", src, tmp_path / "o.csv"]) == 0
    assert capsys.readouterr().out == f"wrote 1 record to {tmp_path / 'o.csv'}\n"
    src.write_text(src.read_text() * 1001)
    assert run_main(["convert", src, tmp_path / "o2.csv"]) == 0
    assert capsys.readouterr().out == f"wrote 1,001 records to {tmp_path / 'o2.csv'}\n"


def test_texts_say_one_thing_in_the_singular() -> None:
    summary = {"n_train": 1, "steps": 1, "best": {}, "out": "clf"}
    assert train_text(summary) == "trained on 1 example: 1 step\nwrote clf"
    summary.update(n_train=2, steps=3)
    assert train_text(summary) == "trained on 2 examples: 3 steps\nwrote clf"
    rows = {"rows": [{"name": "D0", "did_not_learn": 1, "n_runs": 1}]}
    assert unlearned_lines(rows) == ["D0: 1 of 1 run did not learn (kept in the means)"]
    schedule = Schedule(learning_rate=2e-5, warmup_steps=1, epochs=1, min_steps=1)
    assert str(schedule) == "lr 2e-05, 1 warm-up step, 1 epoch, at least 1 step"
