"""A cross-fitted hypothesis-only classifier as the hypo-only feature."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from zdebias.classify.hypo_only import (
    CROSS_FIT_FILE,
    out_of_fold_predictions,
    with_hypothesis_only_predictions,
)
from zdebias.classify.predict import load_classifier, predict_proba
from zdebias.classify.train import train_classifier
from zdebias.data.readers import read_records
from zdebias.data.schema import Record

LABELS = ["entailment", "neutral", "contradiction"]
CUES = {"entailment": "A person is outside.", "neutral": "They win.", "contradiction": "Nobody."}


def _records(n: int, prefix: str) -> list[Record]:
    return [
        Record(f"{prefix}{i}", LABELS[i % 3], "A man sleeps.", CUES[LABELS[i % 3]])
        for i in range(n)
    ]


@pytest.mark.slow
def test_training_records_get_out_of_fold_predictions_others_the_model(
    tiny_model, tmp_path: Path
) -> None:
    base = tiny_model("bert", head="encoder")
    train = _records(12, "t")
    out = tmp_path / "hypo"
    metrics = train_classifier(
        train,
        None,
        out,
        model=base,
        input_kind="hypothesis-only",
        cross_fit=2,
        epochs=1,
        learning_rate=5e-3,
        batch_size=4,
        warmup_steps=0,
        progress=False,
    )
    assert metrics["cross_fit"]["n"] == 12 and (out / CROSS_FIT_FILE).is_file()
    oof = {r.id: r.meta["hypo_only_pred"] for r in read_records(out / CROSS_FIT_FILE)}
    assert out_of_fold_predictions(str(out)) == {(r.id, r.hypothesis): oof[r.id] for r in train}
    # a record with the id of a training record but another hypothesis is not that record
    other = [Record("t0", "neutral", "A man sleeps.", "They win."), *_records(2, "g")]
    done = with_hypothesis_only_predictions(
        [*train, *other, train[1].replace(meta={"hypo_only_pred": "neutral"})],
        str(out),
        LABELS,
    )
    assert [r.meta["hypo_only_pred"] for r in done[:12]] == [oof[r.id] for r in train]
    clf = load_classifier(out)
    probs = predict_proba(clf, other)
    want = [clf.labels[i] for i in np.asarray(probs).argmax(axis=1)]
    assert [r.meta["hypo_only_pred"] for r in done[12:15]] == want
    assert done[15].meta["hypo_only_pred"] == "neutral"  # a prediction already there is kept
