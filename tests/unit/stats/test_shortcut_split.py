"""Shortcut splits (docs/design.md §13): verdicts from the training set's significant features
or its hypothesis-only model; aligned / conflicting / free, by hand and on the demo's planted
rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from zdebias.data.schema import Record
from zdebias.data.writers import write_records
from zdebias.errors import ConfigError, DataError
from zdebias.stats.shortcut_split import (
    MIN_CONFLICTING,
    feature_verdicts,
    reliable_gap_warning,
    slices,
    split_records,
)

SENTIMENT = ("negative", "positive")


def _text(i: int, text: str, label: str) -> Record:
    return Record(id=f"t{i}", label=label, text=text)


def _sentiment_train() -> list[Record]:
    """``good`` on 40 positive rows (z = √40 = 6.3246), ``awful`` on 40 negative ones (the
    same z for negative), ``bad`` on 30 negative and 10 positive rows (z(negative) =
    0.25 / √(0.25/40) = 3.1623); ``film`` on 50 positive and 70 negative rows (z = 1.826, not
    significant: 4 features, z_c = 2.807 at α 0.01)."""
    rows = [("good film", "positive")] * 40 + [("awful film", "negative")] * 40
    rows += [("bad film", "negative")] * 30 + [("bad film", "positive")] * 10
    return [_text(i, t, lab) for i, (t, lab) in enumerate(rows)]


def test_feature_verdicts_by_hand() -> None:
    # f0 favours label 0 (z 5), f1 label 1 (z 7), f2 label 1 but is not significant
    z = np.array([[5.0, -5.0], [-7.0, 7.0], [-9.0, 9.0], [-5.0, 5.0]])
    m = sp.csr_matrix(np.array([[1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0], [1, 0, 0, 1]]))
    verdict, tied = feature_verdicts(m, z, np.array([True, True, False, True]))
    # row 0: sums (-2, 2) → 1; row 1: 0; row 2: only a non-significant feature → none;
    # row 3: sums (0, 0) → a tie → none
    assert verdict.tolist() == [1, 0, -1, -1]
    assert tied.tolist() == [False, False, False, True]
    gold = np.array([0, 0, 1, 0])
    assert slices([verdict], gold).tolist() == [1, 0, 2, 2]


def test_slices_of_two_verdicts() -> None:
    feats = np.array([0, 0, -1, -1, 1])
    hypo = np.array([0, 1, 0, -1, -1])
    # aligned when every verdict there is names the gold label; conflicting when any names
    # another; free when neither speaks
    assert slices([feats, hypo], np.array([0, 0, 0, 0, 0])).tolist() == [0, 1, 0, 2, 1]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 30).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(-1, 2), min_size=n, max_size=n),
            st.lists(st.integers(-1, 2), min_size=n, max_size=n),
            st.lists(st.integers(0, 2), min_size=n, max_size=n),
        )
    )
)
def test_every_row_lands_in_exactly_one_slice(data: tuple[list[int], ...]) -> None:
    a, b, gold = (np.array(x) for x in data)
    for verdicts in ([a], [b], [a, b]):
        codes = slices(verdicts, gold)
        assert set(codes.tolist()) <= {0, 1, 2} and len(codes) == len(gold)
        said = np.stack(verdicts) >= 0
        other = (np.stack(verdicts) != gold) & said
        assert ((codes == 1) == other.any(axis=0)).all()
        assert ((codes == 2) == ~said.any(axis=0)).all()


def test_split_of_hand_made_single_text_rows() -> None:
    test = [
        _text(100, "good bad", "negative"),  # sums: positive 6.32 - 3.16, negative -3.16
        _text(101, "film", "positive"),  # no significant feature
        _text(102, "good", "positive"),
        _text(103, "bad", "positive"),
        _text(104, "good awful", "negative"),  # sums 0 and 0: a tie
    ]
    split = split_records(
        _sentiment_train(), test, features=["unigrams"], labels=SENTIMENT, rule="sum-z"
    )
    s = split.summary
    assert s["n_features"] == 4 and s["n_significant"] == 3
    assert math.isclose(s["z_critical"], 2.807, abs_tol=1e-3)
    assert [r.id for r in split.aligned] == ["t102"]
    assert [r.id for r in split.conflicting] == ["t100", "t103"]
    assert [r.id for r in split.free] == ["t101", "t104"]
    assert s["counts"] == {"aligned": 1, "conflicting": 2, "free": 2}
    assert s["per_label"] == {
        "negative": {"aligned": 0, "conflicting": 1, "free": 1},
        "positive": {"aligned": 1, "conflicting": 1, "free": 1},
    }
    assert s["n_tied"] == 1
    mixed = split.conflicting[0].meta["shortcut"]
    assert (mixed["slice"], mixed["label"], mixed["by"]) == ("conflicting", "positive", "features")
    assert mixed["features"] == [{"feature": "good@text", "label": "positive", "z": 6.3246}]
    tie = split.free[1].meta["shortcut"]
    assert tie["label"] is None and tie["tied"] == ["negative", "positive"]
    assert {f["feature"] for f in tie["features"]} == {"good@text", "awful@text"}
    assert split.free[0].meta["shortcut"]["features"] == []
    bad = split.conflicting[1].meta["shortcut"]["features"]
    assert bad == [{"feature": "bad@text", "label": "negative", "z": 3.1623}]
    assert s["deciding_features"][0] == {
        "feature": "good@text",
        "label": "positive",
        "n_rows": 2,
        "aligned": 1,
        "conflicting": 1,
    }
    # ids and order kept; every test row in exactly one slice
    assert sorted(r.id for part in split.parts().values() for r in part) == [r.id for r in test]
    assert [r.id for r in split.rows] == [r.id for r in test]
    assert s["warnings"] == [reliable_gap_warning(2)]


def test_null_feature_never_votes() -> None:
    # 80 positive and 40 negative rows: <null> is significant (z = 3.65 > z_c), but on
    # every row; a row with nothing else is free
    train = [_text(i, "good", "positive") for i in range(80)]
    train += [_text(80 + i, "awful", "negative") for i in range(40)]
    test = [_text(200, "film", "negative")]
    split = split_records(train, test, features=["unigrams", "null"], labels=SENTIMENT)
    assert split.summary["counts"]["free"] == 1
    # 80 of 120 positive: z = (2/3 - 1/2) / √(0.25 / 120) = 3.65 > z_c 2.71 (3 features)
    assert split.summary["warnings"][1] == (
        "the training labels are imbalanced (positive 66.7%: <null> z = 3.7 > z_critical 2.71 "
        "over 3 features): frequent features lean to positive against the uniform prior, so "
        "many verdicts say positive; --label-prior empirical tests against the label shares"
    )


def test_pair_rows_by_hypothesis_only_and_both() -> None:
    """The fast hypothesis-only model, trained on the training rows, predicts each test row."""
    labels = ("entailment", "neutral", "contradiction")
    words = {"entailment": "outdoors", "neutral": "tall", "contradiction": "sleeping"}
    train = [
        Record(f"r{i}", lab, "A man walks in a park.", f"A man is {words[lab]} here {i % 7}.")
        for i, lab in enumerate(labels[i % 3] for i in range(90))
    ]
    test = [
        Record("a", "contradiction", "A woman sits.", "The woman is sleeping."),
        Record("b", "neutral", "A woman sits.", "The woman is sleeping."),
    ]
    by_h = split_records(train, test, by="hypothesis-only", labels=labels, rule="sum-z")
    assert [r.id for r in by_h.aligned] == ["a"] and [r.id for r in by_h.conflicting] == ["b"]
    assert by_h.rows[1].meta["shortcut"]["hypothesis_only"] == "contradiction"
    assert by_h.summary["hypothesis_only_accuracy"] == 0.5
    # features without hypo-only: the model is fitted on its own, with the same verdicts
    alone = split_records(
        train, test, by="hypothesis-only", features=["unigrams"], labels=labels, rule="sum-z"
    )
    assert [r.meta["shortcut"] for r in alone.rows] == [r.meta["shortcut"] for r in by_h.rows]
    both = split_records(train, test, by="both", labels=labels, rule="sum-z")
    assert [r.id for r in both.conflicting] == ["b"]
    assert both.rows[1].meta["shortcut"]["label"] == "contradiction"
    with pytest.raises(ConfigError, match="needs premise/hypothesis pairs"):
        split_records(_sentiment_train(), [_text(1, "good", "positive")], by="both",
                      labels=SENTIMENT)  # fmt: skip


def test_test_labels_must_be_the_training_sets() -> None:
    train = _sentiment_train()
    with pytest.raises(DataError, match="neutral"):
        split_records(train, [_text(1, "good", "neutral")], labels=SENTIMENT)
    with pytest.raises(ConfigError, match="test set has no labelled records"):
        split_records(train, [], labels=SENTIMENT)


def test_reliable_gap_needs_385_conflicting_rows() -> None:
    # 1.96 · 0.5 / √384 = 0.05001 > 0.05 ≥ 1.96 · 0.5 / √385
    assert 1.96 * 0.5 / math.sqrt(384) > 0.05 >= 1.96 * 0.5 / math.sqrt(MIN_CONFLICTING)
    assert reliable_gap_warning(385) is None
    line = reliable_gap_warning(100)
    assert line is not None and "±9.8 points" in line and "385" in line


def test_demo_split_recovers_the_planted_hard_and_easy_rows() -> None:
    """Made from the demo's training data, the split puts 146 of the 150 rows that are only in
    test_hard (97.3%) in conflicting and all 66 rows only in test_easy in aligned; the 36 in
    both (planted features pointing two ways) go where the larger summed z points."""
    from zdebias.data.demo import LABELS, artifact_subsets, make_demo_corpus

    corpus = make_demo_corpus(seed=0)
    planted = artifact_subsets(corpus["test"])
    split = split_records(corpus["train"], corpus["test"], labels=LABELS, rule="sum-z")
    where = {r.id: r.meta["shortcut"]["slice"] for r in split.rows}
    hard = {r.id for r in planted["hard"]}
    easy = {r.id for r in planted["easy"]}
    hard_only, easy_only = hard - easy, easy - hard
    assert (len(hard_only), len(easy_only), len(hard & easy)) == (150, 66, 36)
    assert sum(where[i] == "conflicting" for i in hard_only) == 146
    assert sum(where[i] == "aligned" for i in easy_only) == 66
    assert 146 / 150 >= 0.95
    assert split.summary["counts"] == {"aligned": 222, "conflicting": 378, "free": 0}
    assert len(where) == len(corpus["test"]) == 600
    # the same features, Bonferroni count and critical value as zdebias stats on train
    from zdebias.stats.measure import measure

    report = measure(corpus["train"], labels=LABELS).report
    assert split.summary["n_features"] == report["n_features"]
    assert split.summary["z_critical"] == report["z_critical"]


def test_shortcut_split_cli(tmp_path: Path) -> None:
    from zdebias.cli import app

    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    write_records(_sentiment_train(), train)
    rows = [_text(100, "good bad", "negative"), _text(101, "film", "positive")]
    rows.append(_text(102, "good", "positive"))
    write_records(rows, test)
    out = tmp_path / "split"
    args = ["shortcut-split", "--train", str(train), "--test", str(test), "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--features", "unigrams", "--rule", "sum-z"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"] == {"aligned": 1, "conflicting": 1, "free": 1}
    assert summary["train"] == str(train) and summary["read_test"]["n_records"] == 3
    for name, ids in (("aligned", ["t102"]), ("conflicting", ["t100"]), ("free", ["t101"])):
        lines = (out / f"{name}.jsonl").read_text().splitlines()
        assert [json.loads(line)["id"] for line in lines] == ids
    assert "3 test rows by features: aligned 1" in result.output
    # a test set without gold labels, and one whose labels are not the training set's
    unlabelled = tmp_path / "nolabels.jsonl"
    unlabelled.write_text('{"id": "u", "text": "good", "label": null}\n')
    args = ["shortcut-split", "--train", str(train), "--test", str(unlabelled)]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "x")])
    assert isinstance(result.exception, DataError)
    assert "no labelled records in the test set" in str(result.exception)
    other = tmp_path / "other.jsonl"
    other.write_text('{"id": "o", "text": "good", "label": "entailment"}\n')
    args = ["shortcut-split", "--train", str(train), "--test", str(other)]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "y")])
    assert isinstance(result.exception, DataError)
    assert "other.jsonl:1: field 'label'" in str(result.exception)
    assert "entailment" in str(result.exception)


def test_a_trained_hypothesis_only_model_predicts_whenever_by_needs_it() -> None:
    from zdebias.stats.settings import ShortcutSplitSettings

    cfg = ShortcutSplitSettings(features=["ngrams"], by="hypothesis-only")
    assert cfg.with_hypo_only().features == ["ngrams", "hypo-only"]
    assert ShortcutSplitSettings(features=["ngrams"]).with_hypo_only().features == ["ngrams"]
    assert ShortcutSplitSettings(by="both").with_hypo_only().features is None  # the defaults


@settings(max_examples=20, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["good", "bad", "film", "good bad", "plot"]), st.booleans()),
        min_size=1,
        max_size=12,
    )
)
def test_split_records_partitions_any_test_set(rows: list[tuple[str, bool]]) -> None:
    test = [_text(1000 + i, t, SENTIMENT[pos]) for i, (t, pos) in enumerate(rows)]
    split = split_records(_sentiment_train(), test, features=["unigrams"], labels=SENTIMENT)
    ids = [r.id for part in split.parts().values() for r in part]
    assert sorted(ids) == sorted(r.id for r in test) and len(ids) == len(set(ids))
    assert sum(split.summary["counts"].values()) == len(test)
