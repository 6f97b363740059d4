"""The built-in demo corpus: deterministic, artifacts planted in train, none in test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zdebias.data.demo import (
    LABELS,
    PLANTED,
    artifact_subsets,
    make_demo_corpus,
    overlap,
    planted_features,
    planted_table,
    words,
    write_demo_corpus,
)
from zdebias.data.readers import read_records
from zdebias.data.schema import Record


@pytest.fixture(scope="module")
def corpus() -> dict:
    return make_demo_corpus(seed=5, n_train=900, n_dev=90, n_test=300)


def test_hand_checked_features() -> None:
    assert overlap("A man is sleeping.", "A man is sleeping.") == 1.0
    assert overlap("A man is reading a book.", "A person is reading.") == 0.75
    assert planted_features("A tall man is reading.", "A tall man is reading.") == [
        "tall@hypothesis",
        "full-lex-overlap",
    ]
    assert planted_features("A man is reading.", "A man is sleeping in a kitchen.") == [
        "sleeping@hypothesis"
    ]
    assert planted_features("A man is reading.", "A man is reading for fun.") == []


def test_words_are_the_feature_tokens(corpus: dict) -> None:
    """The planted features are named as the features' tokenizer finds them: the demo's own
    word split (data sits below features) gives the same tokens on every sentence."""
    from zdebias.features.tokenize import tokenize

    texts = {t for rows in corpus.values() for r in rows for t in (r.premise, r.hypothesis)}
    assert texts and all(t.isascii() for t in texts)
    assert all(words(t) == tokenize(t) for t in texts)


def test_sizes_labels_and_determinism(corpus: dict) -> None:
    assert {k: len(v) for k, v in corpus.items()} == {"train": 900, "dev": 90, "test": 300}
    for split in ("train", "dev", "test"):
        counts = {lab: sum(r.label == lab for r in corpus[split]) for lab in LABELS}
        assert counts == {lab: len(corpus[split]) // 3 for lab in LABELS}
        assert len({r.id for r in corpus[split]}) == len(corpus[split])
    again = make_demo_corpus(seed=5, n_train=900, n_dev=90, n_test=300)
    assert [r.to_dict() for r in again["train"]] == [r.to_dict() for r in corpus["train"]]
    other = make_demo_corpus(seed=6, n_train=900, n_dev=90, n_test=300)
    assert [r.hypothesis for r in other["train"]] != [r.hypothesis for r in corpus["train"]]


def test_planted_artifacts_are_strong_in_train_and_absent_in_test(corpus: dict) -> None:
    train = planted_table(corpus["train"])
    for feature, label in PLANTED.items():
        row = train[feature]
        assert row["label"] == label
        assert row["n"] >= 120, feature
        assert 0.8 <= row["p_label"] < 1.0, feature  # strong, with counter-examples
    test = planted_table(corpus["test"])
    for feature in PLANTED:
        counts = test[feature]["label_counts"]
        assert counts["entailment"] == counts["neutral"] == counts["contradiction"] > 0


def test_zstats_find_the_planted_features_in_train_only(corpus: dict) -> None:
    from zdebias.stats.zstats import describe

    train = describe(corpus["train"], features=["ngrams", "lex-overlap", "null"], top=3)
    for feature, label in PLANTED.items():
        assert feature in [r["feature"] for r in train["top"][label]], (feature, label)
        row = next(r for r in train["top"][label] if r["feature"] == feature)
        assert row["z"] > train["z_critical"]
    test = describe(corpus["test"], features=["ngrams", "lex-overlap", "null"], top=50)
    for feature, label in PLANTED.items():
        assert feature not in [r["feature"] for r in test["top"][label] if r["z"] > 0]


def test_hard_and_easy_test_subsets() -> None:
    records = [
        Record("a", "neutral", "A man is reading.", "A man is sleeping."),  # → contradiction
        Record("b", "contradiction", "A man is reading.", "A man is sleeping."),
        Record("c", "neutral", "A tall man is reading.", "A tall man is reading."),  # both
        Record("d", "entailment", "A man is reading.", "A man is reading a book."),  # none
    ]
    subsets = artifact_subsets(records)
    assert [r.id for r in subsets["hard"]] == ["a", "c"]
    assert [r.id for r in subsets["easy"]] == ["b", "c"]


def test_written_corpus_reads_back(tmp_path: Path) -> None:
    info = write_demo_corpus(tmp_path, seed=1, n_train=60, n_dev=30, n_test=30)
    subsets = artifact_subsets(read_records(tmp_path / "test.jsonl", task="nli"))
    assert info["sizes"] == {
        "train": 60,
        "dev": 30,
        "test": 30,
        "test_hard": len(subsets["hard"]),
        "test_easy": len(subsets["easy"]),
    }
    assert len(read_records(tmp_path / "test_hard.jsonl", task="nli")) == len(subsets["hard"])
    train = read_records(tmp_path / "train.jsonl", task="nli")
    assert len(train) == 60 and train[0].meta["source"] == "demo"
    saved = json.loads((tmp_path / "artifacts.json").read_text())
    assert [p["feature"] for p in saved["planted"]] == list(PLANTED)
    assert saved["per_split"]["test"]["full-lex-overlap"]["n"] % 3 == 0
