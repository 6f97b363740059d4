"""The conversion a ``zdebias convert`` runs: the output format decided and checked before
anything is read, then the writer of that format."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas
import pyarrow.parquet as pq
import pytest

from helpers.cli_main import run_main
from zdebias.data import Record, read_records, write_jsonl
from zdebias.data.convert import Conversion
from zdebias.errors import ConfigError

RECORDS = [
    Record("a", "entailment", "A man sleeps.", "A person rests.", meta={}),
    Record("b", "neutral", "A girl sings.", "A girl sings loudly.", meta={"k": 1}),
]


@pytest.mark.parametrize(
    ("out", "to", "message"),
    [
        (
            "x.jsonl",
            "xml",
            "--to: unknown format 'xml'; expected one of jsonl, csv, tsv, parquet, datasets",
        ),
        ("x.jsonl", "parquet", "--to parquet: OUT must end in .parquet, not 'x.jsonl'"),
        ("dir/x.parquet", "jsonl", "--to jsonl: OUT must end in .jsonl or .json, not 'x.parquet'"),
        ("x.tsv", "csv", "--to csv: OUT must end in .csv, not 'x.tsv'"),
        (
            "out.txt",
            None,
            "OUT 'out.txt': unknown suffix; expected one of .jsonl, .json, .csv, .tsv, .parquet "
            "(or --to datasets for a folder)",
        ),
        (
            "kept",
            None,
            "OUT 'kept': unknown suffix; expected one of .jsonl, .json, .csv, .tsv, "
            ".parquet (or --to datasets for a folder)",
        ),
    ],
)
def test_a_format_that_cannot_be_written_is_refused_at_once(
    out: str, to: str | None, message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        Conversion(out, to)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("name", "to"),
    [
        ("x.jsonl", None),
        ("x.json", None),
        ("x.parquet", None),
        ("x.parquet", "parquet"),
        ("x.csv", None),
        ("x.tsv", "tsv"),
    ],
)
def test_records_are_written_in_the_format_the_output_asks_for(
    tmp_path: Path, name: str, to: str | None
) -> None:
    out = tmp_path / name
    conversion = Conversion(str(out), to)
    assert not conversion.folder
    assert conversion.write(RECORDS, ("entailment", "neutral", "contradiction")) == 2
    assert out.read_bytes().startswith(b"PAR1") == name.endswith(".parquet")
    assert out.read_bytes().startswith(b"id,premise,") == name.endswith(".csv")
    assert out.read_bytes().startswith(b"id\tpremise\t") == name.endswith(".tsv")
    assert read_records(out) == RECORDS


def test_datasets_is_a_folder() -> None:
    assert Conversion("out", "datasets").folder


# --------------------------------------------------------------------------- the command
# issue 27: `zdebias convert kept.jsonl out.csv` wrote JSON Lines into out.csv (exit 0)

TRICKY = [
    Record("a", "entailment", 'He said "yes", then left.', "A man\tspoke.", meta={}),
    Record("b", "neutral", "Line one\nline two", "x, y; z", meta={"k": [1, {"n": None}]}),
    Record("c", "contradiction", "Café ☕ ünïcode", "Nothing.", meta={"type": "original"}),
]


def _convert(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = run_main(["-q", "convert", *args])
    return code, capsys.readouterr().err.strip().splitlines()


def test_convert_writes_csv_into_a_csv_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "kept.jsonl"
    write_jsonl(TRICKY, src)
    out = tmp_path / "out.csv"
    assert _convert([str(src), str(out)], capsys)[0] == 0
    with out.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["id", "premise", "hypothesis", "label", "meta"]
    assert len(rows) == 4
    assert rows[1] == ["a", 'He said "yes", then left.', "A man\tspoke.", "entailment", "{}"]
    assert json.loads(rows[2][4]) == {"k": [1, {"n": None}]}
    frame = pandas.read_csv(out)
    assert list(frame.columns) == ["id", "premise", "hypothesis", "label", "meta"]
    assert frame["label"].tolist() == ["entailment", "neutral", "contradiction"]


@pytest.mark.parametrize("via", ["csv", "tsv", "parquet", "json"])
def test_round_trip_through_each_format_gives_the_same_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], via: str
) -> None:
    src = tmp_path / "kept.jsonl"
    write_jsonl(TRICKY, src)
    middle, back = tmp_path / f"mid.{via}", tmp_path / "back.jsonl"
    assert _convert([str(src), str(middle)], capsys) == (0, [])
    assert _convert([str(middle), str(back)], capsys) == (0, [])
    assert read_records(back) == TRICKY
    assert back.read_bytes() == src.read_bytes()


def test_parquet_has_the_record_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "kept.jsonl"
    write_jsonl(TRICKY, src)
    out = tmp_path / "out.parquet"
    assert _convert([str(src), str(out)], capsys)[0] == 0
    table = pq.read_table(out)
    assert table.column_names == ["id", "premise", "hypothesis", "label", "meta"]
    assert table.column("id").to_pylist() == ["a", "b", "c"]
    assert pandas.read_parquet(out)["hypothesis"].tolist() == [r.hypothesis for r in TRICKY]


def test_an_unknown_suffix_is_exit_2_with_the_suffixes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "kept.jsonl"
    write_jsonl(TRICKY, src)
    code, err = _convert([str(src), str(tmp_path / "out.txt")], capsys)
    assert code == 2
    assert err == [
        "error: OUT 'out.txt': unknown suffix; expected one of .jsonl, .json, .csv, .tsv, "
        ".parquet (or --to datasets for a folder)"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.jsonl"]
