"""Issue 52.7: FILE:LINE for a ``.json`` list named the record's number, not its line (a key
given twice on line 16 of a pretty-printed list was reported as line 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli_main import run_main
from zdebias.data import open_dataset, read_records
from zdebias.errors import DataError

ROWS = [
    {"premise": "a", "hypothesis": "b", "label": "neutral"},
    {"premise": "c", "hypothesis": "d", "label": "entailment"},
    {"premise": "e", "hypothesis": "f", "label": "contradiction"},
]


def _pretty(rows: list[dict], **kwargs: object) -> str:
    return json.dumps(rows, indent=4, **kwargs)  # type: ignore[arg-type]


def test_a_repeated_key_is_named_at_its_own_line(tmp_path: Path) -> None:
    text = _pretty(ROWS)
    # record 3 starts on line 12 ("    {"); its "label" is on line 15: given again on 16
    lines = text.splitlines()
    assert lines[11] == "    {" and lines[14] == '        "label": "contradiction"'
    lines[14] += ","
    lines.insert(15, '        "label": "neutral"')
    src = tmp_path / "a.json"
    src.write_text("\n".join(lines))
    with pytest.raises(DataError) as info:
        read_records(src)
    assert str(info.value) == (
        f"{src}:16: field 'label': duplicate key: the object gives it 2 times "
        "(only one value can be read)"
    )
    ds = open_dataset(src, on_error="skip")  # skipped and counted, as before
    assert [r.premise for r in ds] == ["a", "c"]
    assert [e.line for e in ds.report.errors] == [16]


def test_a_bad_record_is_named_at_the_line_it_starts_on(tmp_path: Path) -> None:
    rows = [*ROWS[:2], {"premise": "e", "label": "neutral"}]
    src = tmp_path / "a.json"
    src.write_text(_pretty(rows))
    with pytest.raises(DataError) as info:
        read_records(src)
    assert info.value.line == 12 and "missing field" in str(info.value)
    assert str(info.value).startswith(f"{src}:12: field 'hypothesis'")


def test_a_list_under_data_and_a_wrapper_key_given_twice(tmp_path: Path) -> None:
    src = tmp_path / "squad.json"
    bad = [*ROWS[:1], {"premise": "x", "hypothesis": "y", "label": "maybe"}]
    src.write_text(json.dumps({"version": 2, "data": bad}, indent=2))
    with pytest.raises(DataError) as info:
        read_records(src)
    assert info.value.line == 9  # "data": [ on line 3, {record 1} on 4-8, record 2 on 9
    twice = tmp_path / "twice.json"
    twice.write_text('{\n  "data": [],\n  "data": [\n    {"premise": "a"}\n  ]\n}')
    with pytest.raises(DataError) as info:
        read_records(twice)
    assert info.value.line == 3 and "field 'data': duplicate key" in str(info.value)


def test_records_without_ids_keep_their_number_in_the_list(tmp_path: Path) -> None:
    """Several records may share a line (a compact list): ids stay FILE:N, N the record."""
    compact = tmp_path / "c.json"
    compact.write_text(json.dumps(ROWS))
    assert [r.id for r in read_records(compact)] == ["c.json:1", "c.json:2", "c.json:3"]
    pretty = tmp_path / "p.json"
    pretty.write_text(_pretty(ROWS))
    assert [r.id for r in read_records(pretty)] == ["p.json:1", "p.json:2", "p.json:3"]


@pytest.mark.parametrize(
    ("text", "fragment", "line"),
    [
        ('[\n  {"premise": "a", "hypothesis": "b", "label": 0},\n  {"premise": 1,]', "invalid", 3),
        ("[\n 1,\n 2\n]", "expected a JSON object", 2),
        ('{\n "rows": []\n}', "expected a JSON list of objects", 1),
        ('[\n  {"premise": "a", "hypothesis": "\\ud800", "label": "neutral"}\n]', "surrogate", 2),
        ("[1, 2] x", "invalid JSON", 1),
    ],
    ids=["truncated", "not-objects", "no-list", "surrogate", "extra-data"],
)
def test_whole_document_errors_stay_one_located_line(
    tmp_path: Path, text: str, fragment: str, line: int
) -> None:
    src = tmp_path / "a.json"
    src.write_text(text)
    with pytest.raises(DataError) as info:
        read_records(src)
    assert fragment in str(info.value) and info.value.line == line, str(info.value)


def test_the_cli_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [*ROWS, {"premise": "g", "hypothesis": "h", "label": "unknown-label"}]
    src = tmp_path / "a.json"
    src.write_text(_pretty(rows))
    assert run_main(["inspect", src]) == 2
    err = capsys.readouterr().err
    assert f"{src}:17: field 'label'" in err and err.count("\n") == 1, err


def test_a_list_on_one_line_names_line_1(tmp_path: Path) -> None:
    src = tmp_path / "a.json"
    third = '{"premise": "e", "hypothesis": "f", "label": "neutral", "label": "neutral"}'
    src.write_text("[" + ", ".join([*(json.dumps(r) for r in ROWS[:2]), third]) + "]\n")
    ds = open_dataset(src, on_error="skip")
    assert [r.id for r in ds] == ["a.json:1", "a.json:2"]
    assert [str(e) for e in ds.report.errors] == [
        f"{src}:1: field 'label': duplicate key: the object gives it 2 times "
        "(only one value can be read)"
    ]
