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
from zdebias.errors import ConfigError

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

    # PoE's frozen bias expert with --bias-out-of-fold: the training rows' out-of-fold
    # probabilities, the model's own for a row it was not cross-fitted on
    from zdebias.classify.train import aligned_probs, out_of_fold_probs

    rows = [*train[:3], other[0]]
    fold_probs = {r.id: r.meta["hypo_only_probs"] for r in read_records(out / CROSS_FIT_FILE)}
    got = aligned_probs(out, rows, LABELS, what="bias model", out_of_fold=True)
    for row, r in zip(got[:3], train[:3], strict=True):
        want_row = np.array([fold_probs[r.id][name] for name in LABELS])
        assert row == pytest.approx(want_row / want_row.sum(), abs=1e-6)
    own = aligned_probs(out, rows, LABELS, what="bias model")
    assert got[3] == pytest.approx(own[3], abs=1e-6)
    assert not np.allclose(got[:3], own[:3], atol=1e-4)  # in-sample differs from out-of-fold
    with pytest.raises(ConfigError, match=r"no cross_fit_predictions\.jsonl.*--cross-fit K"):
        out_of_fold_probs(tmp_path, rows, LABELS, what="bias model")
