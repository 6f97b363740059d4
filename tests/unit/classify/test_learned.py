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


def _curve(losses: list[float], steps: int) -> dict[str, object]:
    """A plain-CE summary: labels as the pool experiment's D0 ∪ Z(pool | D0) (7,693 pairs),
    the loss logged every 50 steps."""
    return {
        "loss": "ce",
        "steps": steps,
        "train_label_counts": {"entailment": 2289, "neutral": 2674, "contradiction": 2730},
        "log_history": [{"step": 50 * (i + 1), "loss": v} for i, v in enumerate(losses)],
    }


def test_a_slow_start_is_found_from_the_loss_curve() -> None:
    from zdebias.classify.learned import LOSS_SHARE, slow_start

    prior = prior_entropy({"entailment": 2289, "neutral": 2674, "contradiction": 2730})
    assert prior is not None and abs(LOSS_SHARE * prior - 1.07372) < 1e-5
    # the recipe's seed 2 (length-grouped batches): at chance until step 200 of 482
    late = [1.097, 1.096, 1.086, 1.016, 1.014, 0.9, 0.843, 0.818, 0.797]
    assert slow_start(_curve(late, 482)) == {"steps": 200, "of": 482}
    # the same initialisation with random batches: below chance by step 100 (0.21 of 482)
    early = [1.094, 1.058, 0.949, 0.881, 0.825, 0.752, 0.77, 0.751, 0.757]
    assert slow_start(_curve(early, 482)) is None
    assert slow_start(_curve([1.097] * 9, 482)) is None  # never learned: did_not_learn's case
    assert slow_start({**_curve(late, 482), "loss": "poe"}) is None  # its loss is not CE's
    assert slow_start(_curve(late, 1000)) is None  # 200 of 1,000 steps: 0.2, a normal start
