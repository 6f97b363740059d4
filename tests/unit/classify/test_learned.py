"""A training that did not learn is said, by hand-computed thresholds: dev accuracy against
always answering the most frequent dev label, and the last logged loss against the entropy of
the training labels' shares."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest

from zdebias.classify.learned import did_not_learn, prior_entropy

#: snli20k-cpu's clf_seq_z seed 3 as its metrics.json has it (dev counts added)
FLAT = {
    "loss": "ce",
    "train_label_counts": {"contradiction": 2548, "entailment": 2297, "neutral": 2533},
    "dev_label_counts": {"entailment": 800, "neutral": 790, "contradiction": 809},
    "best": {"dev_accuracy": 0.3397},
    "log_history": [{"loss": 1.0955, "step": 50}, {"loss": 1.0980, "step": 200}, {"x": 1}],
}


def test_prior_entropy_by_hand() -> None:
    assert prior_entropy({"a": 1, "b": 1, "c": 1}) == pytest.approx(math.log(3))
    # -(1/4 ln 1/4 + 3/4 ln 3/4) = 0.5623
    assert prior_entropy({"a": 1, "b": 3}) == pytest.approx(0.562335, abs=1e-6)
    assert prior_entropy({"a": 0, "b": 5}) == 0.0 and prior_entropy({}) is None


def test_a_flat_training_is_said_with_both_reasons() -> None:
    # majority: contradiction 809 / 2,399 = 33.72 %; 33.97 < 33.72 + 2
    # prior entropy of 2,548 / 2,297 / 2,533 of 7,378: 1.0978; 1.098 >= 0.98 x 1.0978 = 1.0758
    assert did_not_learn(FLAT) == (
        "best dev accuracy 34.0% is no better than always answering 'contradiction' (33.7% of "
        "dev); training loss ended at 1.098, the loss of answering the training labels' shares "
        "whatever the input is 1.098"
    )


def test_thresholds_and_what_each_test_needs() -> None:
    learned = {**FLAT, "best": {"dev_accuracy": 0.72}, "log_history": [{"loss": 0.895}]}
    assert did_not_learn(learned) is None
    # 2 points above the majority is learned; just under is not
    assert did_not_learn({**learned, "best": {"dev_accuracy": 809 / 2399 + 0.0201}}) is None
    assert "dev accuracy" in str(did_not_learn({**learned, "best": {"dev_accuracy": 0.357}}))
    # the loss test: 0.98 of the prior's entropy, plain cross-entropy only
    at = 0.98 * prior_entropy(FLAT["train_label_counts"])  # type: ignore[operator]
    assert did_not_learn({**learned, "log_history": [{"loss": at - 1e-4}]}) is None
    assert "training loss" in str(did_not_learn({**learned, "log_history": [{"loss": at}]}))
    assert did_not_learn({**learned, "loss": "poe", "log_history": [{"loss": 1.1}]}) is None
    # an older summary without dev counts: the loss test alone
    old = {k: v for k, v in FLAT.items() if k != "dev_label_counts"}
    assert str(did_not_learn(old)).startswith("training loss ended at 1.098")
    assert did_not_learn({}) is None


@pytest.mark.slow
def test_training_says_it_did_not_learn(
    tiny_model, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from test_classify_train import toy_nli

    from zdebias.classify.train import train_classifier

    base = tiny_model("bert", head="encoder")
    train, dev = toy_nli(48, seed=1), toy_nli(12, seed=2)
    opts = dict(model=base, epochs=1, batch_size=8, warmup_steps=0, progress=False, seed=3)
    # a dev set of one label: no accuracy beats always answering it (whatever the random
    # model's first guesses are on this machine)
    one = [r for r in dev if r.label == "entailment"]
    with caplog.at_level(logging.WARNING, logger="zdebias"):
        flat = train_classifier(train, one, tmp_path / "flat", learning_rate=1e-9, **opts)
    assert flat["dev_label_counts"] == {"entailment": 4}
    assert "always answering 'entailment' (100.0% of dev)" in flat["did_not_learn"]
    saved = json.loads((tmp_path / "flat" / "metrics.json").read_text())
    assert saved["did_not_learn"] == flat["did_not_learn"]
    (line,) = [r.getMessage() for r in caplog.records if "did not learn" in r.getMessage()]
    assert str(tmp_path / "flat") in line and "lower learning rate" in line
    # a recipe stage says it in its notes: the training records why, without a warning
    from zdebias.classify.learned import said_by_caller

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="zdebias"), said_by_caller():
        noted = train_classifier(train, one, tmp_path / "noted", learning_rate=1e-9, **opts)
    assert noted["did_not_learn"] == flat["did_not_learn"] and not caplog.records
    # a judge, bias model or evaluated run that did not learn is said wherever it is loaded
    from zdebias.classify.predict import load_classifier

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="zdebias"):
        load_classifier(tmp_path / "flat")
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"{tmp_path / 'flat'}: this classifier did not learn (best dev")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="zdebias"), said_by_caller():
        load_classifier(tmp_path / "flat")  # an evaluate stage notes it instead
    assert not caplog.records
    # 10 epochs: at 5 the last logged loss ended at 0.98 of ln 3, on the line of the loss test,
    # and the run fell either side of it with the CPU threads' summation order
    learned = train_classifier(
        train, dev, tmp_path / "ok", learning_rate=2e-3, **{**opts, "epochs": 10}
    )
    assert learned["best"]["dev_accuracy"] >= 0.6 and learned["did_not_learn"] is None
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="zdebias"):
        load_classifier(tmp_path / "ok")
    assert not caplog.records
