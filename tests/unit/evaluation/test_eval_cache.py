"""The run's prediction cache: a model's probabilities on a suite are read back, not
predicted again, and equal what predicting gives; another model, other records or another
batch size miss."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from zdebias.classify.predict import LoadedClassifier
from zdebias.data.schema import Record
from zdebias.data.writers import write_records
from zdebias.evaluation.suites import Suite, evaluate_models

LABELS = ("entailment", "neutral", "contradiction")


def _suite(path: Path, n: int, offset: int = 0) -> Suite:
    rows = [
        Record(f"r{i}", LABELS[i % 3], f"A man number {i + offset} walks.", f"He {i} walks.")
        for i in range(n)
    ]
    write_records(rows, path)
    return Suite(path.stem, str(path))


@pytest.mark.slow
def test_predictions_are_read_back_from_the_cache(
    tiny_model: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tiny_model("bert", labels=LABELS)
    suites = [_suite(tmp_path / "a.jsonl", 7), _suite(tmp_path / "b.jsonl", 5, offset=50)]
    cache = tmp_path / "cache"
    calls: list[int] = []
    predict_each = LoadedClassifier.predict_each

    def counted(self, sets, **kw):  # type: ignore[no-untyped-def]
        calls.append(len(sets))
        return predict_each(self, sets, **kw)

    monkeypatch.setattr(LoadedClassifier, "predict_each", counted)
    plain = evaluate_models([model], suites, batch_size=4, progress=False)
    first = evaluate_models([model], suites, batch_size=4, progress=False, cache_dir=cache)
    assert calls == [2, 2] and len(list(cache.glob("*.npy"))) == 2
    again = evaluate_models([model], suites, batch_size=4, progress=False, cache_dir=cache)
    assert calls == [2, 2]  # nothing predicted: both suites read back
    assert json.dumps(again, sort_keys=True) == json.dumps(first, sort_keys=True)
    assert json.dumps(first, sort_keys=True) == json.dumps(plain, sort_keys=True)
    probs = sorted(np.load(f).shape for f in cache.glob("*.npy"))
    assert probs == [(5, 3), (7, 3)]

    changed = [suites[0], _suite(tmp_path / "c.jsonl", 5, offset=100)]  # other records
    evaluate_models([model], changed, batch_size=4, progress=False, cache_dir=cache)
    assert calls == [2, 2, 1]  # only the new suite
    evaluate_models([model], suites, batch_size=2, progress=False, cache_dir=cache)
    assert calls == [2, 2, 1, 2]  # another batch size: both again
    other = tiny_model("bert", labels=LABELS)
    (other / "extra.txt").write_text("a different folder")  # other bytes: another model
    evaluate_models([other], suites, batch_size=4, progress=False, cache_dir=cache)
    assert calls == [2, 2, 1, 2, 2] and len(list(cache.glob("*.npy"))) == 7


def test_a_row_in_several_suites_is_predicted_once(
    tiny_model: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shortcut split's slices are rows of the test set: evaluated beside it, they cost no
    prediction, and score exactly what the same rows score in the test set."""
    model = tiny_model("bert", labels=LABELS)
    test = _suite(tmp_path / "test.jsonl", 9)
    part = _suite(tmp_path / "part.jsonl", 4)  # the first 4 rows of test, as their own suite
    sizes: list[list[int]] = []
    predict_each = LoadedClassifier.predict_each

    def counted(self, sets, **kw):  # type: ignore[no-untyped-def]
        sizes.append([len(s) for s in sets])
        return predict_each(self, sets, **kw)

    monkeypatch.setattr(LoadedClassifier, "predict_each", counted)
    doc = evaluate_models(
        [model], [test, part], batch_size=4, progress=False, predictions_dir=tmp_path / "p"
    )
    assert sizes == [[9]]  # the 4 rows of part were predicted with test's 9
    rows = {
        name: [
            json.loads(line)["meta"]["probs"]
            for line in (tmp_path / "p" / f"run0-{name}.jsonl").open()
        ]
        for name in ("test", "part")
    }
    assert rows["part"] == rows["test"][:4]
    alone = evaluate_models([model], [part], batch_size=4, progress=False)
    assert sizes == [[9], [4]]
    assert (
        alone["runs"][0]["results"]["part"]["accuracy"]
        == doc["runs"][0]["results"]["part"]["accuracy"]
    )
