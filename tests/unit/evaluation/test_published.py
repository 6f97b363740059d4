"""Compact predictions: codes round-trip the labels, HANS groups and a split's verdicts."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.evaluation.published import (
    KIND,
    VERSION,
    _rows,
    compact,
    detach,
    expand,
    gold_digest,
    read_predictions,
    suite_entry,
)
from zdebias.evaluation.suites import rows_digest


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


def _published(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    """A data folder with a 4-row file, and a compact file of its rows 1 and 3 (a subset)."""
    data = tmp_path / "data"
    (data / "nli").mkdir(parents=True)
    rows = [
        ("a", "entailment"),
        ("b", "neutral"),
        ("c", "contradiction"),
        ("d", "neutral"),
    ]
    lines = [
        f'{{"id": "{i}", "premise": "p {i}", "hypothesis": "h {i}", "label": "{lab}"}}\n'
        for i, lab in rows
    ]
    (data / "nli" / "test.jsonl").write_text("".join(lines), encoding="utf-8")
    taken = [Record("b", "neutral", "p b", "h b"), Record("d", "neutral", "p d", "h d")]
    classes = ["entailment", "neutral", "contradiction"]
    compacted = {
        "kind": KIND,
        "version": VERSION,
        "suites": {
            "S": {"n": 2, "rows": rows_digest(taken), "classes": classes, "gold": "11"},
        },
        "methods": [],
    }
    return data, compacted


def test_a_published_copy_keeps_no_gold_and_reads_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.delenv("ZDEBIAS_DATA", raising=False)
    data, compacted = _published(tmp_path)
    source = {"path": "nli/test.jsonl", "take": [1, 3]}
    published = detach(compacted, {"S": source})
    entry = published["suites"]["S"]
    assert "gold" not in entry and entry["gold_digest"] == gold_digest("11")
    assert entry["source"] == source
    assert compacted["suites"]["S"]["gold"] == "11"  # the stage's own file keeps it
    path = tmp_path / "p.json.gz"
    path.write_bytes(gzip.compress(json.dumps(published).encode()))
    with pytest.raises(ConfigError, match=r"pass data= \(--data\) or set ZDEBIAS_DATA"):
        read_predictions(path)
    assert read_predictions(path, data)["suites"]["S"]["gold"] == "11"
    # other rows under the same name, or a relabelled file, are refused
    published["suites"]["S"]["source"]["take"] = [0, 3]
    path.write_bytes(gzip.compress(json.dumps(published).encode()))
    with pytest.raises(ConfigError, match="does not hold the rows the evaluation scored"):
        read_predictions(path, data)
    published["suites"]["S"]["source"]["take"] = [1, 3]
    published["suites"]["S"]["gold_digest"] = gold_digest("12")
    path.write_bytes(gzip.compress(json.dumps(published).encode()))
    with pytest.raises(ConfigError, match="gold labels read differ"):
        read_predictions(path, data)
