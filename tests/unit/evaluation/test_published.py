"""Compact predictions: codes round-trip the labels, HANS groups and a split's verdicts."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.evaluation.published import (
    _rows,
    compact,
    expand,
    read_predictions,
    suite_entry,
)


def test_codes_round_trip_labels() -> None:
    classes = ["entailment", "neutral", "contradiction"]
    labels = ["contradiction", "entailment", "neutral", "contradiction"]
    assert compact(labels, classes) == "2012"
    assert expand("2012", classes) == labels
    assert expand(compact(["x"] * 3, ["a", "x"]), ["a", "x"]) == ["x", "x", "x"]


def test_suite_rows_keep_what_the_scores_read() -> None:
    records = [
        Record(
            "a",
            "entailment",
            "p",
            "h",
            None,
            {"heuristic": "lexical_overlap", "subcase": "ln_subject"},
        ),
        Record("b", "non-entailment", "p2", "h2", None, {"heuristic": "constituent"}),
        Record(
            "c",
            "entailment",
            "p3",
            "h3",
            None,
            {"shortcut": {"label": "neutral", "carries": ["to@h"]}},
        ),
        Record("d", "entailment", "p4", "h4", None, {"shortcut": {"label": None}}),
    ]
    entry = suite_entry(records, ["entailment", "neutral", "contradiction", "non-entailment"])
    assert entry["heuristic"] == {
        "names": ["constituent", "lexical_overlap"],
        "rows": [1, 0, None, None],
    }
    assert entry["shortcut"]["verdict"] == "..0."  # '.': free (or not recorded)
    entry["classes"] = ["entailment", "non-entailment"]
    entry["gold"] = compact(entry["gold"], entry["classes"])
    assert entry["gold"] == "0100"
    rows = _rows(entry)
    assert [r.label for r in rows] == [r.label for r in records]
    assert rows[0].meta == {
        "heuristic": "lexical_overlap",
        "subcase": "ln_subject",
        "shortcut": {"label": None},
    }
    assert rows[2].meta["shortcut"] == {"label": "neutral", "carries": ["to@h"]}
    assert rows[3].meta["shortcut"] == {"label": None}
    assert all(r.premise is None and r.hypothesis is None for r in rows)  # no text kept


def test_a_foreign_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "p.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(ConfigError, match="not a compact predictions file"):
        read_predictions(bad)
    bad.write_bytes(gzip.compress(b'{"kind": "zdebias-predictions", "version": 9}'))
    with pytest.raises(ConfigError, match="version 9; this zdebias reads 1"):
        read_predictions(bad)
