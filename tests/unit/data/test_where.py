"""Row selection and input paths that say exactly what they mean (issue 52, items 1 and 4).

``--where`` repeated adds conditions (a column given twice is an error); a key given twice
after ``PATH::`` is an error in any spelling; a row's value is matched exactly (nothing
stripped); double quotes keep ``|``, ``,``, ``;`` and spaces in a value; a column that only
later rows carry counts; a file whose name holds ``::`` can be read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zdebias.data.options import ReadOptions, parse_mapping, split_input
from zdebias.data.readers import read_records
from zdebias.errors import ConfigError, DataError


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _row(i: int, label: str = "entailment", **extra: object) -> dict[str, object]:
    return {"id": f"r{i}", "premise": f"p {i}", "hypothesis": f"h {i}", "label": label, **extra}


def _split_file(tmp_path: Path) -> Path:
    """A TRAIN/en row, a TEST/en row, a TRAIN/de row (the issue's example)."""
    return _write(
        tmp_path / "w.jsonl",
        [
            _row(1, split="TRAIN", lang="en"),
            _row(2, "neutral", split="TEST", lang="en"),
            _row(3, "contradiction", split="TRAIN", lang="de"),
        ],
    )


def _ids(path: Path | str, **options: object) -> list[str]:
    records, _ = ReadOptions(**options).read(path)  # type: ignore[arg-type]
    return [r.id for r in records]


# --------------------------------------------------------------------------- item 1: repeats


def test_where_repeated_keeps_every_condition(tmp_path: Path) -> None:
    path = _split_file(tmp_path)
    # the CLI hands each --where occurrence; the TEST row must not survive
    assert _ids(path, where=["split=TRAIN", "lang=en"]) == ["r1"]
    with pytest.raises(ConfigError, match=r"'split' is given twice \(split=TRAIN and split=TEST"):
        ReadOptions(where=["split=TRAIN", "split=TEST"])


def test_a_key_given_twice_after_path_is_an_error_in_any_spelling(tmp_path: Path) -> None:
    path = _split_file(tmp_path)
    with pytest.raises(ConfigError, match=r"'split' is given twice"):
        ReadOptions().read(f"{path}::where=split=TRAIN;where=split=TEST")
    # where= twice adds conditions, as --where repeated does
    assert _ids(f"{path}::where=split=TRAIN;where=lang=en") == ["r1"]
    assert _ids(f"{path}::where=split=TRAIN::where=lang=de") == ["r3"]
    for spec, first, second in [
        ("x.jsonl::label-map=0=a;label_map=0=b", "label-map=0=a", "label_map=0=b"),
        ("x.jsonl::on_error=skip;on-error=raise", "on_error=skip", "on-error=raise"),
        ("x.jsonl::columns=premise=a;columns=premise=b", "columns=premise=a", "columns=premise=b"),
        ("x.jsonl::task=nli::task=sentiment", "task=nli", "task=sentiment"),
    ]:
        with pytest.raises(ConfigError) as info:
            split_input(spec)
        assert f"is given twice ({first} and {second}); give each key once" in str(info.value)


# --------------------------------------------------------------------------- item 4: --where


def test_a_column_only_later_rows_carry_is_selected(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "late.jsonl",
        [_row(1), _row(2, "neutral", split="TRAIN"), _row(3, "contradiction", split="TEST")],
    )
    records, report = ReadOptions(where="split=TRAIN").read(path)
    assert [r.id for r in records] == ["r2"]
    assert report.n_skipped_by_where == 2  # the first row holds no split: ""
    # a column no row carries is still an error, naming the columns the rows have
    with pytest.raises(ConfigError) as info:
        ReadOptions(where="splt=TRAIN").read(path)
    assert str(info.value) == (
        f"{path}: --where splt=TRAIN: no column 'splt'; the columns are id, premise, "
        "hypothesis, label, split"
    )


def test_a_header_without_the_column_fails_before_any_row(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("premise,hypothesis,label\na,b,entailment\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"no column 'split'; the columns are premise, hyp"):
        read_records(path, where={"split": "TRAIN"})


def test_where_matches_the_raw_value_exactly(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "ws.jsonl",
        [_row(1, ws=" pad "), _row(2, ws="pad"), _row(3, ws="a|b"), _row(4, ws="a,b; c")],
    )
    assert _ids(path, where="ws=pad") == ["r2"]  # " pad " is not "pad"
    assert _ids(path, where='ws=" pad "') == ["r1"]
    assert _ids(path, where='ws="a|b"') == ["r3"]
    assert _ids(path, where='ws="a|b"|pad') == ["r2", "r3"]
    assert _ids(path, where='ws="a,b; c"') == ["r4"]
    # the same quotes after PATH:: (where ; and :: would end the value)
    assert _ids(f'{path}::where=ws="a,b; c";limit=5') == ["r4"]
    # an empty value, quoted, selects the rows without the field
    assert _ids(tmp_path / "ws.jsonl", where={"ws": '""'}) == []
    mixed = _write(tmp_path / "m.jsonl", [_row(1, ws="x"), _row(2)])
    assert _ids(mixed, where='ws=""') == ["r2"]


def test_quoting_is_one_convention() -> None:
    from zdebias.data.where import alternatives, split_unquoted, unquote

    assert split_unquoted('a="x,y",b=z', ",") == ['a="x,y"', "b=z"]
    assert unquote(' "a|b" ') == "a|b"
    assert unquote('"say ""hi"""') == 'say "hi"'
    assert alternatives('A| "B|C" ') == {"A", "B|C"}
    assert parse_mapping('premise="s,1",label=y', "column mapping") == {
        "premise": "s,1",
        "label": "y",
    }
    assert parse_mapping('"0"=" neutral"', "label mapping") == {"0": " neutral"}
    with pytest.raises(ConfigError, match="unclosed double quote"):
        parse_mapping('a="b', "column mapping")


# --------------------------------------------------------------------------- item 4: a::b


def test_a_file_whose_name_holds_two_colons_is_read(tmp_path: Path) -> None:
    odd = tmp_path / "a::b.jsonl"
    _write(odd, [_row(1, split="TRAIN"), _row(2, "neutral", split="TEST")])
    # as it is: the whole string is an existing file
    assert _ids(str(odd)) == ["r1", "r2"]
    assert split_input(str(odd)) == (str(odd), {})
    # in double quotes, with options after it
    assert _ids(f'"{odd}"::where=split=TEST') == ["r2"]
    assert split_input(f'"{odd}"::where=split=TEST') == (str(odd), {"where": "split=TEST"})


def test_a_missing_folder_says_how_to_read_a_file_named_with_colons(tmp_path: Path) -> None:
    missing = tmp_path / "c::d.jsonl"
    with pytest.raises(DataError) as info:
        read_records(str(missing))
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'c'}: no such folder (read ")
    assert "as folder" in message and f"'\"{missing}\"'" in message
    # quoted, the path is a file's: its own error
    with pytest.raises(DataError, match="no such file"):
        read_records(f'"{missing}"')


def test_a_byte_range_is_checked_against_the_whole_file(tmp_path: Path) -> None:
    from zdebias.data.readers import Dataset

    path = _write(
        tmp_path / "late.jsonl",
        [_row(1), _row(2, "neutral", split="TRAIN"), _row(3, "contradiction", split="TEST")],
    )
    first_line = len(path.read_bytes().split(b"\n", 1)[0]) + 1
    ds = Dataset(path, where={"split": "TRAIN"})
    # the first shard holds only the row without a split: nothing selected, no error
    assert list(ds.iter_range(0, first_line)) == []
    assert [r.id for r in ds.iter_range(first_line, path.stat().st_size)] == ["r2"]
    with pytest.raises(ConfigError, match="no column 'splt'; the columns are id, premise"):
        list(Dataset(path, where={"splt": "TRAIN"}).iter_range(0, first_line))


def test_a_python_where_naming_one_column_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match="where: key '1' is given twice"):
        ReadOptions(where={1: "a", "1": "b"})


def test_python_rows_select_by_a_column_only_later_rows_carry() -> None:
    from zdebias.data.memory import read_rows

    rows = [_row(1), _row(2, "neutral", split="TRAIN"), _row(3, "contradiction", split="TEST")]
    got = read_rows(rows, where={"split": "TRAIN"})
    assert [r.id for r in got.records] == ["r2"]
    assert got.report.n_skipped_by_where == 2
    with pytest.raises(ConfigError, match=r"^rows: where splt=TRAIN: no column 'splt'"):
        read_rows(rows, where={"splt": "TRAIN"})
