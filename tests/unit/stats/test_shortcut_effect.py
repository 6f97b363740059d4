"""The effect rule of shortcut splits (docs/design.md §13, amended 2026-12-07): effects not z,
one vote per group of overlapping features, a partial-input model gated by its held-out precision,
the label-coincidence flag, what the summary records, and the synthetic set whose truth is known."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from zdebias.data.schema import Record
from zdebias.data.synthetic import make_truth_corpus
from zdebias.errors import ConfigError
from zdebias.features.keys import FeatureKey
from zdebias.stats.shortcut_split import split_records
from zdebias.stats.shortcut_votes import (
    agreement,
    calibrate_gate,
    effect_table_from_counts,
    effect_verdicts,
    gated,
    label_coincidence,
)

SENTIMENT = ("negative", "positive")
NLI = ("entailment", "neutral", "contradiction")


def _text(i: int, text: str, label: str) -> Record:
    return Record(id=f"t{i}", label=label, text=text)


def test_effect_is_jeffreys_smoothed_log_odds_against_the_prior() -> None:
    # 9 of 10 rows positive: p = 9.5 / 11, logit = log(9.5 / 1.5) = 1.8458; prior 1/2: logit 0
    e = effect_table_from_counts(np.array([[1, 9]]), np.array([0.5, 0.5]))
    assert math.isclose(e[0, 1], math.log(9.5 / 1.5), rel_tol=1e-12)
    assert math.isclose(e[0, 0], -math.log(9.5 / 1.5), rel_tol=1e-12)
    # against a prior of 0.8 for positive the same rows are a weaker cue
    e = effect_table_from_counts(np.array([[1, 9]]), np.array([0.2, 0.8]))
    assert math.isclose(e[0, 1], math.log(9.5 / 1.5) - math.log(4), rel_tol=1e-12)


def test_a_nested_pair_votes_once() -> None:
    """``sleeping`` and ``is sleeping`` (contradiction 2.0 and 2.2) against ``outdoors``
    (entailment 3.0): summed, the pair would win (4.2); one vote per group, the stronger
    member ``is sleeping`` speaks and ``outdoors`` wins. The overlap thresholds likewise."""
    keys = [
        FeatureKey.ngram("sleeping@hypothesis", "hypothesis", ["sleeping"]),
        FeatureKey.ngram("is sleeping@hypothesis", "hypothesis", ["is", "sleeping"]),
        FeatureKey.ngram("outdoors@hypothesis", "hypothesis", ["outdoors"]),
        *FeatureKey.many(["lex-overlap>0.5", "lex-overlap>0.9", "full-lex-overlap"], "overlap"),
        FeatureKey.ngram("sleeping@premise", "premise", ["sleeping"]),
    ]
    effects = np.array(
        [
            [-1.0, 2.0],  # label 0 entailment, label 1 contradiction
            [-1.1, 2.2],
            [3.0, -1.5],
            [1.0, -0.5],
            [1.5, -0.7],
            [1.9, -1.0],
            [-0.5, 1.2],
        ]
    )
    rows = np.array(
        [
            [1, 1, 1, 0, 0, 0, 0],  # the nested pair against outdoors
            [1, 1, 0, 0, 0, 0, 0],  # the nested pair alone
            [0, 0, 0, 1, 1, 1, 0],  # three overlap thresholds: one vote, 1.9
            [1, 0, 0, 0, 0, 0, 1],  # sleeping in two fields: two groups
        ]
    )
    votes = effect_verdicts(sp.csr_matrix(rows), effects, np.ones(7, dtype=bool), keys)
    assert votes.verdict.tolist() == [0, 1, 0, 1]
    assert votes.speakers == [[1, 2], [1], [5], [0, 6]]
    assert np.allclose(votes.sums[0], [1.9, 0.7]) and np.allclose(votes.sums[2], [1.9, -1.0])
    assert np.allclose(votes.sums[3], [-1.5, 3.2])
    # a feature that may not vote (z below critical) neither votes nor speaks for its group
    voting = np.array([True, False, True, True, True, True, True])
    votes = effect_verdicts(sp.csr_matrix(rows), effects, voting, keys)
    assert votes.speakers[0] == [0, 2] and np.allclose(votes.sums[0], [2.0, 0.5])


def test_a_rare_strong_feature_beats_a_frequent_weak_one() -> None:
    """``the`` on 2,000 rows, 55 % positive: z = 0.05 / √(0.25/2000) = 4.472, effect
    logit(1100.5/2001) = 0.2007; ``awful`` on 20 rows, 19 negative: z = 0.45 / √(0.25/20) =
    4.025, effect logit(19.5/21) = 2.5649. Summed z calls ``the awful`` positive; effects call
    it negative."""
    rows = [("the", "positive")] * 1100 + [("the", "negative")] * 900
    rows += [("awful", "negative")] * 19 + [("awful", "positive")]
    train = [_text(i, t, lab) for i, (t, lab) in enumerate(rows)]
    test = [_text(9000, "the awful", "negative")]
    old = split_records(train, test, features=["unigrams"], labels=SENTIMENT, rule="sum-z")
    new = split_records(train, test, features=["unigrams"], labels=SENTIMENT)
    assert old.summary["n_significant"] == new.summary["n_significant"] == 2
    assert [r.id for r in old.conflicting] == ["t9000"]
    assert old.rows[0].meta["shortcut"]["label"] == "positive"
    assert [r.id for r in new.aligned] == ["t9000"]
    info = new.rows[0].meta["shortcut"]
    assert info["label"] == "negative"
    assert info["features"] == [
        {"feature": "awful@text", "label": "negative", "effect": 2.5649, "z": 4.0249}
    ]
    assert math.isclose(math.log(19.5 / 1.5), 2.5649, abs_tol=1e-4)
    assert new.summary["used"]["rule"] == "effect" and old.summary["used"]["rule"] == "sum-z"


def test_the_gate_threshold_calibrated_on_hand_made_out_of_fold_predictions() -> None:
    """80 predictions of entailment at 0.40-0.48 right one time in three, 120 at 0.80-0.92
    all right: bins of 40 rows; the two low bins' Wilson lower bound (27/80 right) is below
    1/3 + 0.1, every high bin's (40/40: 0.912) above it, so predictions above the low bins'
    most confident one (0.479) vote."""
    low = [[0.40 + 0.001 * i, 0.35, 0.25 - 0.001 * i] for i in range(80)]
    high = [[0.80 + 0.001 * i, 0.10, 0.10 - 0.001 * i] for i in range(120)]
    proba = np.array(low + high)
    gold = np.array([i % 3 for i in range(80)] + [0] * 120)
    gate = calibrate_gate(proba, gold, np.full(3, 1 / 3), NLI)
    assert gate["entailment"] == {
        "prior": 0.3333,
        "n_predicted": 200,
        "threshold": 0.479,
        "precision": 1.0,
        "n": 120,
    }
    assert gate["neutral"]["threshold"] is None and gate["neutral"]["n_predicted"] == 0
    # a low-confidence row is free (-1), a confident one keeps its prediction
    rows = np.array([[0.479, 0.321, 0.2], [0.6, 0.3, 0.1], [0.2, 0.7, 0.1]])
    assert gated(rows, gate, NLI).tolist() == [-1, 0, -1]
    # every prediction right: every bin passes, so any prediction but a uniform one votes
    all_right = calibrate_gate(proba[80:], np.zeros(120, dtype=int), np.full(3, 1 / 3), NLI)
    assert all_right["entailment"]["threshold"] == 0.333333
    assert all_right["entailment"]["n"] == 120
    # at chance everywhere: the label never votes
    chance = calibrate_gate(proba[:80], gold[:80], np.full(3, 1 / 3), NLI)
    assert chance["entailment"]["threshold"] is None


def _pairs() -> tuple[list[Record], list[Record]]:
    words = {"entailment": "outdoors", "neutral": "tall", "contradiction": "sleeping"}
    train = [
        Record(f"r{i}", lab, "A man walks in a park.", f"A man is {words[lab]} here {i % 7}.")
        for i, lab in enumerate(NLI[i % 3] for i in range(300))
    ]
    test = [
        Record("a", "contradiction", "A woman sits.", "The woman is sleeping."),
        Record("b", "neutral", "A woman sits.", "The woman is sleeping."),
        Record("c", "neutral", "A dog barks.", "Dogs bark loudly."),  # no word it learnt
    ]
    return train, test


def test_a_low_confidence_partial_input_row_is_free() -> None:
    """The hypothesis-only model has no evidence on ``Dogs bark loudly.``: its top
    probability is near 1/3, below the calibrated threshold, so the row is free; the old rule
    gives it the model's argmax."""
    train, test = _pairs()
    new = split_records(train, test, by="hypothesis-only", features=["unigrams"], labels=NLI)
    assert [r.id for r in new.aligned] == ["a"] and [r.id for r in new.conflicting] == ["b"]
    assert [r.id for r in new.free] == ["c"]
    assert new.rows[2].meta["shortcut"]["hypothesis_only"] is None
    gate = new.summary["gate"]
    assert gate["test_votes"] == 2 and gate["train_votes"] == 300
    assert gate["per_label"]["contradiction"]["precision"] == 1.0
    assert gate["test_precision"] == 0.5  # a right, b wrong; c abstains
    assert new.summary["hypothesis_only_accuracy"] == pytest.approx(1 / 3)  # argmax, c too
    old = split_records(
        train, test, by="hypothesis-only", features=["unigrams"], labels=NLI, rule="sum-z"
    )
    assert [r.id for r in old.free] == []


def test_the_summary_records_what_the_split_used() -> None:
    train, test = _pairs()
    split = split_records(train, test, by="both", labels=NLI)
    used = split.summary["used"]
    assert used["rule"] == "effect" and used["label_prior"] == "uniform"
    assert used["features"] == [
        "ngrams",
        "hypo-len",
        "len-ratio",
        "lex-overlap",
        "hypo-only",
        "null",
    ]
    bias = used["bias_model"]
    assert bias["family"] == "hypo-only-nb" and bias["gated"] is True
    assert (bias["folds"], bias["seed"]) == (5, split.summary["used"]["bias_model"]["seed"])
    assert len(bias["predictions_digest"]) == 64 and len(bias["train_digest"]) == 64
    lr = split_records(train, test, by="both", labels=NLI, bias_model="ngram-lr")
    lr_bias = lr.summary["used"]["bias_model"]
    assert lr_bias["family"] == "ngram-lr" and lr_bias["seed"] == bias["seed"] + 1
    assert lr_bias["predictions_digest"] != bias["predictions_digest"]
    assert lr_bias["train_digest"] == bias["train_digest"]
    old = split_records(train, test, by="both", labels=NLI, rule="sum-z")
    assert old.summary["used"]["bias_model"]["family"] == "hypo-only-nb"
    assert old.summary["used"]["bias_model"]["gated"] is False
    text = split_records(
        [_text(i, "good", "positive") for i in range(3)] + [_text(9, "bad", "negative")],
        [_text(10, "good", "positive")],
        labels=SENTIMENT,
    )
    assert text.summary["used"]["bias_model"] is None
    # a trained classifier's labels cannot be gated: said, not silently used
    with pytest.raises(ConfigError, match="cannot gate it"):
        split_records(train, test, by="both", labels=NLI, hypo_only_model="some/dir")


def test_a_label_coincident_split_is_flagged() -> None:
    codes, gold = np.array([0, 0, 1, 2]), np.array([1, 1, 0, 1])
    assert label_coincidence(np.array([1, 1, 1, -1]), codes, gold, SENTIMENT) == (
        "LABEL-COINCIDENT SPLIT: 100.0% of the verdicts say positive and 100.0% of the aligned "
        "rows are positive: the slices are the label mix, not a shortcut, so the gap measures "
        "how the model does per label; try --label-prior empirical, --keep-features or "
        "another feature set"
    )  # fmt: skip
    assert (
        label_coincidence(np.array([0, 1]), np.array([0, 0]), np.array([0, 1]), SENTIMENT) is None
    )
    # every test row carries only `good`: every verdict says positive
    rows = [("good", "positive")] * 40 + [("bad", "negative")] * 40
    train = [_text(i, t, lab) for i, (t, lab) in enumerate(rows)]
    test = [_text(100 + i, "good", SENTIMENT[i % 2]) for i in range(6)]
    split = split_records(train, test, features=["unigrams"], labels=SENTIMENT)
    assert split.summary["label_coincident"] is True
    assert any(w.startswith("LABEL-COINCIDENT SPLIT: 100.0% of the verdicts say positive")
               for w in split.summary["warnings"])  # fmt: skip
    mixed = [_text(200, "good", "positive"), _text(201, "bad", "negative")]
    fine = split_records(train, mixed, features=["unigrams"], labels=SENTIMENT)
    assert fine.summary["label_coincident"] is False


def test_agreement_of_two_splits() -> None:
    a = agreement(np.array([0, 0, 1, 1, 2, 2]), np.array([0, 0, 1, 2, 2, 2]))
    # observed 5/6; chance (2·2 + 2·1 + 2·3)/36 = 1/3; kappa (5/6 − 1/3) / (2/3) = 0.75
    assert (a["n"], a["same"], a["share"], a["kappa"]) == (6, 5, 0.8333, 0.75)
    assert a["crosstab"] == [[2, 0, 0], [0, 1, 1], [0, 0, 2]]
    with pytest.raises(ConfigError, match="not the same rows"):
        agreement(np.array([0]), np.array([0, 1]))


def _scores(split: object, test: list[Record]) -> dict[str, tuple[float, float]]:
    got = {r.id: r.meta["shortcut"]["slice"] for r in split.rows}  # type: ignore[attr-defined]
    truth = {r.id: r.meta["truth"] for r in test}
    out = {}
    for name in ("aligned", "conflicting", "free"):
        pred = {i for i, s in got.items() if s == name}
        true = {i for i, s in truth.items() if s == name}
        out[name] = (len(pred & true) / max(1, len(pred)), len(pred & true) / len(true))
    return out


def test_the_synthetic_truth_set_lands_where_it_was_planted() -> None:
    """Labels independent of every filler word; ``zebra``, ``violin`` and ``comet`` planted.
    The effect rule: aligned and conflicting precision and recall ≥ 90 %, and ≥ 90 % of the
    rows with no planted word free (measured: aligned 97.7 / 100, conflicting 93.8 / 100,
    free 95.5 %); the summed-z rule leaves no row free."""
    corpus = make_truth_corpus(seed=0)
    test = corpus["test"]
    truths = [r.meta["truth"] for r in test]
    assert [truths.count(s) for s in ("aligned", "conflicting", "free")] == [300, 300, 600]
    new = _scores(split_records(corpus["train"], test, labels=NLI, by="both"), test)
    for name in ("aligned", "conflicting"):
        precision, recall = new[name]
        assert precision >= 0.9 and recall >= 0.9, (name, new[name])
    assert new["free"][1] >= 0.9, new["free"]
    old = _scores(split_records(corpus["train"], test, labels=NLI, rule="sum-z"), test)
    assert old["free"][1] == 0.0 and old["conflicting"][0] < 0.5
    lr = _scores(
        split_records(corpus["train"], test, labels=NLI, by="both", bias_model="ngram-lr"), test
    )
    assert all(min(lr[name]) >= 0.9 for name in ("aligned", "conflicting")), lr
    assert lr["free"][1] >= 0.9, lr["free"]


def test_compare_with_another_split_of_the_same_rows(tmp_path: Path) -> None:
    """``--compare-with``: the summary's agreement with another split's folder (rows matched
    by text and label), and the text output says it."""
    from typer.testing import CliRunner

    from zdebias.cli import app
    from zdebias.data.writers import write_records

    rows = [("the", "positive")] * 1100 + [("the", "negative")] * 900
    rows += [("awful", "negative")] * 19 + [("awful", "positive")]
    write_records([_text(i, t, lab) for i, (t, lab) in enumerate(rows)], tmp_path / "train.jsonl")
    test = [_text(9000, "the awful", "negative"), _text(9001, "the", "positive")]
    test.append(_text(9002, "awful", "negative"))
    write_records(test, tmp_path / "test.jsonl")
    args = ["shortcut-split", "--train", str(tmp_path / "train.jsonl"), "--test"]
    args += [str(tmp_path / "test.jsonl"), "--features", "unigrams"]
    old = CliRunner().invoke(app, [*args, "--rule", "sum-z", "--out", str(tmp_path / "old")])
    assert old.exit_code == 0, old.output
    new = CliRunner().invoke(
        app, [*args, "--out", str(tmp_path / "new"), "--compare-with", str(tmp_path / "old")]
    )
    assert new.exit_code == 0, new.output
    summary = json.loads((tmp_path / "new" / "summary.json").read_text())
    agree = summary["agreement"]
    # t9000: aligned (effect) vs conflicting (summed z); the other two agree (both aligned)
    assert (agree["n"], agree["same"], agree["n_unmatched"]) == (3, 2, 0)
    assert agree["crosstab"] == [[2, 1, 0], [0, 0, 0], [0, 0, 0]]
    assert agree["kappa"] == 0.0  # this split is all aligned: chance agreement is 2/3
    assert "agreement with" in new.output and "2 of 3 rows in the same slice" in new.output
    assert summary["used"]["rule"] == "effect"


def test_a_recipe_splits_with_an_independent_bias_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tiny recipe: two shortcut-split stages of the same test set, the default model and
    ``bias_model: ngram-lr``; the summaries record each family, the same training rows, and
    ``rule: sum-z`` hashes as a stage that does not name the rule did before it existed."""
    from zdebias.data.writers import write_records
    from zdebias.pipeline.digests import stage_hash
    from zdebias.pipeline.loader import recipe_from_dict
    from zdebias.pipeline.runner import run_recipe

    monkeypatch.chdir(tmp_path)
    corpus = make_truth_corpus(seed=2, n_train=900, n_test=120)
    write_records(corpus["train"], tmp_path / "train.jsonl")
    write_records(corpus["test"], tmp_path / "test.jsonl")
    split = {"stage": "shortcut-split", "train": "train", "test": "test", "by": "both"}
    recipe = recipe_from_dict(
        {
            "name": "independent",
            "task": "nli",
            "data": {"train": "train.jsonl", "test": "test.jsonl"},
            "stages": {
                "own": split,
                "lr": {**split, "bias_model": "ngram-lr", "compare_with": "own.summary"},
            },
        }
    )
    run_recipe(recipe, tmp_path / "run")
    own = json.loads((tmp_path / "run" / "own" / "summary.json").read_text())["used"]
    lr = json.loads((tmp_path / "run" / "lr" / "summary.json").read_text())["used"]
    assert (
        own["bias_model"]["family"] == "hypo-only-nb" and lr["bias_model"]["family"] == "ngram-lr"
    )
    assert own["bias_model"]["train_digest"] == lr["bias_model"]["train_digest"]
    assert own["rule"] == lr["rule"] == "effect"
    agree = json.loads((tmp_path / "run" / "lr" / "summary.json").read_text())["agreement"]
    assert agree["n"] == 120 and agree["n_unmatched"] == 0 and agree["kappa"] is not None
    assert agree["same"] == sum(agree["crosstab"][i][i] for i in range(3))

    def hashed(**settings: object) -> str:
        stage = {**split, **settings}
        r = recipe_from_dict(
            {"name": "r", "task": "nli", "data": {"train": "a.jsonl", "test": "b.jsonl"},
             "stages": {"s": stage}}
        )  # fmt: skip
        return stage_hash(r, "s", r.stages["s"], {})

    # sum-z and the default bias model are left out of the hash; effect is in it
    assert hashed(rule="sum-z") == hashed(rule="sum-z", bias_model="hypo-only")
    assert hashed() != hashed(rule="sum-z") and hashed() == hashed(rule="effect")
    assert hashed(bias_model="ngram-lr") != hashed()
    assert hashed(compare_with=None) == hashed()


def test_the_gated_model_is_the_hypo_only_feature_s_model() -> None:
    """docs/design.md §13: the ``hypo-only-pred`` feature *is* the partial-input model. The gate's
    probabilities (same folds, seed and naive Bayes) give the feature's prediction on every
    row, out of fold on the training rows and fold-averaged on the test rows."""
    from zdebias.features.extract import extract_features
    from zdebias.stats import shortcut_votes as sv

    corpus = make_truth_corpus(seed=3, n_train=600, n_test=80)
    train, test = corpus["train"], corpus["test"]
    rows = [*train, *test]
    fm = extract_features(rows, ["hypo-only"], labels=NLI, hypo_only_fit=np.arange(600), seed=0)
    feature = np.asarray(fm.matrix.todense()).argmax(axis=1).ravel()
    y = np.array([NLI.index(r.label) for r in train])
    proba = sv.cross_fitted_proba(sv.hypothesis_matrix(rows, {"seed": 0}), y, 600, 3, seed=0)
    assert proba.shape == (680, 3) and np.allclose(proba.sum(axis=1), 1.0)
    assert (proba.argmax(axis=1) == feature).all()
