"""Ctrl-C in a command (issue 39.6): typer exits 130 without a word; zdebias says it was
interrupted and, where the command resumes, how."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import zdebias
from helpers.cli_main import run_main
from zdebias.cli import interrupted_line


def _interrupt(*_args: object, **_kwargs: object) -> None:
    raise KeyboardInterrupt


def _data(path: Path, n: int = 30) -> Path:
    labels = ("entailment", "neutral", "contradiction")
    rows = [{"premise": f"p {i}", "hypothesis": f"h {i}", "label": labels[i % 3]} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_filter_says_it_was_interrupted_and_wrote_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from zdebias.stats.execution import operations

    monkeypatch.setattr(operations, "filter_file", _interrupt)
    code = run_main(["filter", _data(tmp_path / "d.jsonl"), "--out", tmp_path / "o"])
    assert code == 130
    err = capsys.readouterr().err
    assert err == (
        "interrupted; nothing was written (the output folder is published whole at the end); "
        "run the same command again to start over\n"
    )


def test_train_classifier_says_how_to_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from zdebias.classify.files import Files

    monkeypatch.setattr(Files, "train_classifier", _interrupt)
    data = _data(tmp_path / "d.jsonl")
    code = run_main(["-q", "train-classifier", "--train", data, "--out", tmp_path / "clf"])
    assert code == 130
    assert capsys.readouterr().err.endswith(
        "interrupted; run the same command again to resume from its last checkpoint\n"
    )


def test_each_command_gets_its_line() -> None:
    assert interrupted_line(["-q", "counterfactual", "train", "--out", "x"]).endswith(
        "resume from its last checkpoint"
    )
    assert interrupted_line(["sample", "--out", "x"]).endswith("from its last shard")
    assert interrupted_line(["stats", "d.jsonl"]) == "interrupted"


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child: POSIX")
def test_sigint_to_the_process(tmp_path: Path) -> None:
    """The real signal: a filter that reads a FIFO nobody writes waits until Ctrl-C."""
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    env = {**os.environ, "PYTHONPATH": str(Path(zdebias.__file__).resolve().parents[1])}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from zdebias.cli import main; main()", "filter", str(fifo),
         "--out", str(tmp_path / "o"), "--format", "jsonl"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # not inherited SIG_IGN
    )  # fmt: skip
    time.sleep(5)  # started, and blocked opening the FIFO
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("interrupted; nothing was written")
    assert not (tmp_path / "o").exists()


# issue 52.7: convert and evaluate said only "interrupted" on Ctrl-C


def test_convert_says_nothing_was_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from zdebias.data import writers

    def cut(*args: object, **kwargs: object) -> None:  # Ctrl-C while the rows are written
        raise KeyboardInterrupt

    monkeypatch.setattr(writers.RecordEncoder, "__call__", cut)
    out = tmp_path / "o.jsonl"
    assert run_main(["convert", _data(tmp_path / "d.jsonl"), out]) == 130
    assert capsys.readouterr().err == (
        "interrupted; nothing was written (the output is written whole at the end); run the "
        "same command again to start over\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl"]  # no temp file left


def test_evaluate_says_nothing_was_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from zdebias.evaluation import reliance

    monkeypatch.setattr(reliance, "evaluate_with_split", _interrupt)
    data = _data(tmp_path / "d.jsonl")
    args = ["evaluate", tmp_path / "model", "--suite", f"dev={data}", "--out", tmp_path / "r.json"]
    assert run_main([*args, "--predictions", tmp_path / "preds"]) == 130
    assert capsys.readouterr().err == (
        "interrupted; nothing was written (the results are written at the end, each file "
        "whole); run the same command again to start over\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl"]


def test_an_interrupt_after_an_output_is_in_place_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C between putting the output in place and the end: "nothing was written" would
    be false; the line names what was written."""
    from zdebias.commands import data as commands

    monkeypatch.setattr(commands, "emit", _interrupt)
    out = tmp_path / "o.csv"
    assert run_main(["convert", _data(tmp_path / "d.jsonl"), out]) == 130
    assert capsys.readouterr().err == f"interrupted; {out} was written (whole) before it stopped\n"
    assert len(out.read_text().splitlines()) == 31
    monkeypatch.undo()
    assert run_main(["-q", "stats", tmp_path / "d.jsonl"]) == 0  # a later command: fresh
    assert interrupted_line(["convert", "a", "b.csv"]).startswith("interrupted; nothing was")
