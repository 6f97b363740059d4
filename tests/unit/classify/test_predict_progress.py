"""Progress bars of prediction and embedding go to stderr: stdout stays the command's result."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from zdebias.classify.predict import load_classifier, predict_proba
from zdebias.data.schema import Record


def test_predicting_with_a_bar_prints_nothing_on_stdout(
    tiny_model: Callable[..., Path], capfd: pytest.CaptureFixture[str]
) -> None:
    clf = load_classifier(tiny_model("bert"))
    rows = [Record(f"r{i}", None, f"A man {i} walks.", "He walks.") for i in range(9)]
    capfd.readouterr()  # what building the tiny model printed
    probs = predict_proba(clf, rows, batch_size=4, progress=True)
    out, _ = capfd.readouterr()
    assert probs.shape[0] == 9
    assert out == ""  # the bar (on a terminal) is drawn on stderr
