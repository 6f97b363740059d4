"""Every dataset in ../shared/data reads with its exact row counts (data/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from zdebias.data import open_dataset

pytestmark = pytest.mark.real_data

# (path relative to ZDEBIAS_TEST_DATA, format, task, rows, label counts or None)
REAL_FILES = [
    (
        "snli_20k/train.jsonl",
        "jsonl",
        "nli",
        19993,
        {"entailment": 6671, "neutral": 6663, "contradiction": 6659},
    ),
    ("snli_20k/dev.jsonl", "jsonl", "nli", 2399, None),
    ("snli_20k/test.jsonl", "jsonl", "nli", 4801, None),
    ("snli_full_devtest::dev", "triplets", "nli", 9842, None),
    ("snli_full_devtest::test", "triplets", "nli", 9824, None),
    (
        "snli_hard/snli_1.0_test_hard.jsonl",
        "jsonl",
        "nli",
        3261,
        {"entailment": 1058, "neutral": 1068, "contradiction": 1135},
    ),
    ("mnli_hard/MNLIMatchedHardWithHardTest", "triplets", "nli", 4573, None),
    ("mnli_hard/MNLIMismatchedHardWithHardTest", "triplets", "nli", 4530, None),
    (
        "hans/heuristics_evaluation_set.txt.gz",
        "hans",
        "nli-binary",
        30000,
        {"entailment": 15000, "non-entailment": 15000},
    ),
    ("cad/NLI/original/train.tsv", "tsv", "nli", 1666, None),
    ("cad/NLI/original/dev.tsv", "tsv", "nli", 200, None),
    ("cad/NLI/original/test.tsv", "tsv", "nli", 400, None),
    ("cad/NLI/revised_premise/train.tsv", "tsv", "nli", 3332, None),
    ("cad/NLI/revised_hypothesis/train.tsv", "tsv", "nli", 3332, None),
    ("cad/NLI/revised_combined/train.tsv", "tsv", "nli", 6664, None),
    ("cad/NLI/all_combined/train.tsv", "tsv", "nli", 8330, None),
    ("cad/sentiment/orig/train.tsv", "tsv", "sentiment", 1707, None),
    ("cad/sentiment/orig/dev.tsv", "tsv", "sentiment", 245, None),
    ("cad/sentiment/orig/test.tsv", "tsv", "sentiment", 488, None),
    ("cad/sentiment/new/train.tsv", "tsv", "sentiment", 1707, None),
    ("cad/sentiment/combined/train.tsv", "tsv", "sentiment", 3414, None),
    ("cad/sentiment/combined/paired/train_paired.tsv", "tsv", "sentiment", 3414, None),
    ("sst2/train_full.tsv", "tsv", "sentiment", 67349, None),
    ("sst2/dev.tsv", "tsv", "sentiment", 872, None),
    ("sst2/test-labeled.tsv", "tsv", "sentiment", 1821, None),
    ("imdb/train.jsonl.gz", "jsonl", "sentiment", 25000, {"negative": 12500, "positive": 12500}),
    ("imdb/test.jsonl.gz", "jsonl", "sentiment", 25000, None),
]


@pytest.mark.parametrize(
    ("rel", "fmt", "task", "rows", "labels"), REAL_FILES, ids=[r[0] for r in REAL_FILES]
)
def test_real_file_row_counts(
    data_dir: Path, rel: str, fmt: str, task: str, rows: int, labels: dict[str, int] | None
) -> None:
    ds = open_dataset(f"{data_dir}/{rel}")
    records = list(ds)
    assert ds.format == fmt
    assert ds.report.task == task
    assert len(records) == rows
    assert ds.report.n_records == rows
    assert ds.report.n_unlabelled == 0 and ds.report.n_errors == 0
    assert len({r.id for r in records}) == rows, "ids must be unique"
    if labels is not None:
        assert dict(Counter(r.label for r in records)) == labels


def test_triplet_file_path_selects_split(data_dir: Path) -> None:
    records = list(open_dataset(data_dir / "snli_full_devtest" / "s1.test"))
    assert len(records) == 9824
    first = records[0]
    assert first.premise and first.hypothesis and not first.premise.endswith(" ")


def test_hans_meta_kept(data_dir: Path) -> None:
    records = list(open_dataset(data_dir / "hans" / "heuristics_evaluation_set.txt.gz"))
    first = records[0]
    assert first.id == "ex0"
    assert first.label == "non-entailment"
    assert first.meta == {
        "heuristic": "lexical_overlap",
        "subcase": "ln_subject/object_swap",
        "template": "temp1",
    }
    heuristics = Counter(r.meta["heuristic"] for r in records)
    assert heuristics == {"lexical_overlap": 10000, "subsequence": 10000, "constituent": 10000}


def test_snli_official_fields(data_dir: Path) -> None:
    records = list(open_dataset(data_dir / "snli_hard" / "snli_1.0_test_hard.jsonl"))
    first = records[0]
    assert first.id == "2677109430.jpg#1r1n"
    assert first.premise.startswith("This church choir sings")
    assert "sentence1_parse" not in first.meta
    assert first.meta["captionID"] == "2677109430.jpg#1"


def test_cad_sentiment_quoted_fields(data_dir: Path) -> None:
    records = list(open_dataset(data_dir / "cad" / "sentiment" / "orig" / "train.tsv"))
    third = records[2]
    assert third.label == "negative"
    assert third.text.startswith(
        'This movie is so bad, it can only be compared to the all-time worst "comedy"'
    )


def _inspect(path: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "zdebias.cli", "inspect", path, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


@pytest.mark.parametrize(
    ("rel", "rows"),
    [
        ("snli_20k/train.jsonl", 19993),
        ("snli_full_devtest::dev", 9842),
        ("snli_hard/snli_1.0_test_hard.jsonl", 3261),
        ("mnli_hard/MNLIMatchedHardWithHardTest", 4573),
        ("hans/heuristics_evaluation_set.txt.gz", 30000),
        ("cad/NLI/original/train.tsv", 1666),
        ("cad/sentiment/orig/train.tsv", 1707),
        ("sst2/train_full.tsv", 67349),
        ("imdb/test.jsonl.gz", 25000),
    ],
)
def test_inspect_cli_on_shared_data(data_dir: Path, rel: str, rows: int) -> None:
    info = _inspect(f"{data_dir}/{rel}")
    assert info["n_examples"] == rows
    assert sum(info["label_counts"].values()) == rows
