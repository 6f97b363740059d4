"""The conversion a ``zdebias convert`` runs: the output format decided and checked before
anything is read, then the writer of that format."""

from __future__ import annotations

from pathlib import Path

import pytest

from zdebias.data import Record, read_records
from zdebias.data.convert import Conversion
from zdebias.errors import ConfigError

RECORDS = [
    Record("a", "entailment", "A man sleeps.", "A person rests.", meta={}),
    Record("b", "neutral", "A girl sings.", "A girl sings loudly.", meta={"k": 1}),
]


@pytest.mark.parametrize(
    ("out", "to", "message"),
    [
        ("x.jsonl", "csv", "--to: unknown format 'csv'; expected one of jsonl, parquet, datasets"),
        ("x.jsonl", "parquet", "--to parquet: OUT must end in .parquet, not 'x.jsonl'"),
        ("dir/x.parquet", "jsonl", "--to jsonl: OUT must end in .jsonl, not 'x.parquet'"),
    ],
)
def test_a_format_that_cannot_be_written_is_refused_at_once(
    out: str, to: str, message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        Conversion(out, to)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("name", "to"), [("x.jsonl", None), ("x.parquet", None), ("x.parquet", "parquet")]
)
def test_records_are_written_in_the_format_the_output_asks_for(
    tmp_path: Path, name: str, to: str | None
) -> None:
    out = tmp_path / name
    conversion = Conversion(str(out), to)
    assert not conversion.folder
    assert conversion.write(RECORDS, ("entailment", "neutral", "contradiction")) == 2
    assert out.read_bytes().startswith(b"PAR1") == name.endswith(".parquet")
    assert read_records(out) == RECORDS


def test_datasets_is_a_folder() -> None:
    assert Conversion("out", "datasets").folder
