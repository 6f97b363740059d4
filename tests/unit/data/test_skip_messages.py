"""What a read skipped, in words that count right (issue 39.6: "skipped 1 bad rows (lines
101)")."""

from __future__ import annotations

from collections import Counter

from zdebias.data.mapping import ReadReport
from zdebias.data.options import counted, label_and_id_warnings, skip_message
from zdebias.errors import DataError


def _report(n_unlabelled: int, lines: list[int]) -> ReadReport:
    errors = [DataError("bad", path="d.jsonl", line=line) for line in lines]
    return ReadReport("d.jsonl", "jsonl", "nli", n_unlabelled=n_unlabelled, errors=errors)


def test_one_and_many() -> None:
    assert [counted(n, "bad row") for n in (0, 1, 2, 1000)] == [
        "0 bad rows",
        "1 bad row",
        "2 bad rows",
        "1,000 bad rows",
    ]
    one = skip_message(_report(1, [101]))
    assert one[:2] == [
        "d.jsonl: skipped 1 row without a gold label",
        "d.jsonl: skipped 1 bad row (line 101)",
    ]
    many = skip_message(_report(3, [4, 9]))
    assert many[:2] == [
        "d.jsonl: skipped 3 rows without a gold label",
        "d.jsonl: skipped 2 bad rows (lines 4, 9)",
    ]
    twelve = skip_message(_report(0, list(range(1, 13))))
    assert twelve[0] == "d.jsonl: skipped 12 bad rows (lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 ...)"


def test_repeated_ids_count_right() -> None:
    ids = ["a", "a", "b", "c"]
    (line,) = label_and_id_warnings(Counter(x="2", y="2"), 4, ids, "d.jsonl")
    assert line == "d.jsonl: 1 record repeats an id (1 id used more than once, e.g. 'a' 2 times)"
