"""Readers for every format, label mapping, column mapping, and atomic writers."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from zdebias.data import Record, get_task, open_dataset, read_records, write_jsonl, write_parquet
from zdebias.data.files import detect_format
from zdebias.data.options import parse_mapping
from zdebias.data.writers import atomic_open
from zdebias.errors import ConfigError

PAIRS = [
    Record("r1", "entailment", "A man sleeps.", "A person rests.", meta={"type": "original"}),
    Record("r2", "contradiction", "Two dogs run.", "Nobody is running.", meta={}),
    Record("r3", "neutral", "A girl sings.", "A girl sings loudly, très bien.", meta={"k": [1]}),
]


def test_task_label_normalisation() -> None:
    nli = get_task("nli")
    assert [nli.normalize(x) for x in ("Entailment", " neutral ", "CONTRADICTION")] == [
        "entailment",
        "neutral",
        "contradiction",
    ]
    assert nli.normalize("-") is None and nli.normalize(-1) is None and nli.normalize("") is None
    # issue 27: a number is no label by its position; what it means is the input's to say
    for number in (0, "1", 2.0, 3):
        with pytest.raises(ValueError, match=f"unknown label '{int(float(number))}'"):
            nli.normalize(number)
    senti = get_task("sentiment")
    assert [senti.normalize(x) for x in ("pos", "Negative", "neg")] == [
        "positive",
        "negative",
        "negative",
    ]
    custom = get_task("labels:yes,no")
    assert custom.labels == ("yes", "no") and custom.normalize("No") == "no"
    assert custom.pair is None  # pair or single text, as the data says
    with pytest.raises(ValueError, match="unknown label '1'"):
        custom.normalize(1)
    assert get_task("text-labels:yes,no") == custom  # the old spelling, read as labels:
    with pytest.raises(ConfigError, match="unknown task"):
        get_task("qa")


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".parquet"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"data{suffix}"
    if suffix == ".parquet":
        write_parquet(PAIRS, path)
    else:
        write_jsonl(PAIRS, tmp_path / "data.jsonl")
        if suffix.endswith(".gz"):
            path.write_bytes(gzip.compress((tmp_path / "data.jsonl").read_bytes()))
        else:
            path = tmp_path / "data.jsonl"
    back = read_records(path)
    assert [r.to_dict() for r in back] == [r.to_dict() for r in PAIRS]


def test_single_text_round_trip(tmp_path: Path) -> None:
    records = [Record("a", "positive", text="Loved it."), Record("b", "negative", text="Awful.")]
    write_jsonl(records, tmp_path / "s.jsonl")
    back = read_records(tmp_path / "s.jsonl")
    assert back == records and back[0].is_pair is False
    assert open_dataset(tmp_path / "s.jsonl").format == "jsonl"


def test_json_list_csv_and_official_snli(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(
        json.dumps(
            [
                {"sentence1": "A b.", "sentence2": "C d.", "gold_label": "neutral", "pairID": "p1"},
                {"sentence1": "E f.", "sentence2": "G h.", "gold_label": "-", "pairID": "p2"},
            ]
        )
    )
    ds = open_dataset(tmp_path / "a.json")
    records = list(ds)
    assert [r.id for r in records] == ["p1"] and ds.report.n_unlabelled == 1
    (tmp_path / "glue.csv").write_text('sentence,label\n"a, b",1\nc,0\n')
    # issue 27: a generic CSV's numbers are labels only by the map given
    records = read_records(tmp_path / "glue.csv", label_map={"0": "negative", "1": "positive"})
    assert [(r.text, r.label) for r in records] == [("a, b", "positive"), ("c", "negative")]
    assert records[0].id == "glue.csv:2"


def test_column_and_label_mapping(tmp_path: Path) -> None:
    (tmp_path / "odd.jsonl").write_text(
        json.dumps({"ctx": "A man runs.", "claim": "He moves.", "y": "yes"}) + "\n"
    )
    ds = open_dataset(
        tmp_path / "odd.jsonl",
        task="nli",
        columns={"premise": "ctx", "hypothesis": "claim", "label": "y"},
        label_map={"yes": "entailment"},
    )
    (record,) = list(ds)
    assert (record.premise, record.hypothesis, record.label) == (
        "A man runs.",
        "He moves.",
        "entailment",
    )
    assert parse_mapping("a=b, c=d", "x") == {"a": "b", "c": "d"}
    with pytest.raises(ConfigError, match="bad x"):
        parse_mapping("a", "x")


def test_format_detection_and_override(tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_text(json.dumps(PAIRS[0].to_dict()) + "\n")
    assert detect_format(path) == "jsonl"
    tsv = tmp_path / "data.dat"
    tsv.write_text("sentence1\tsentence2\tgold_label\na\tb\tneutral\n")
    assert detect_format(tsv) == "tsv"
    assert len(read_records(tsv, format="tsv")) == 1
    with pytest.raises(ConfigError, match="unknown format"):
        open_dataset(tsv, format="xml")


def test_hf_datasets_local_folder(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    features = datasets.Features(
        {
            "premise": datasets.Value("string"),
            "hypothesis": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["entailment", "neutral", "contradiction"]),
        }
    )
    ds = datasets.Dataset.from_dict(
        {
            "premise": ["A b.", "C d.", "E f."],
            "hypothesis": ["x.", "y.", "z."],
            "label": [2, -1, 0],
        },
        features=features,
    )
    folder = tmp_path / "hfdata"
    folder.mkdir()
    ds.to_parquet(str(folder / "train.parquet"))
    view = open_dataset(f"hf:{folder}:train")
    records = list(view)
    assert view.format == "hf"
    assert [r.label for r in records] == ["contradiction", "entailment"]
    assert view.report.n_unlabelled == 1


def test_atomic_writer_leaves_nothing_on_failure(tmp_path: Path) -> None:
    def broken():
        yield PAIRS[0]
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_jsonl(broken(), tmp_path / "out.jsonl")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "keep.json").write_text("old")
    with pytest.raises(RuntimeError), atomic_open(tmp_path / "keep.json") as fh:
        fh.write("new")
        raise RuntimeError("boom")
    assert (tmp_path / "keep.json").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.json"]


def test_binary_nli_jsonl_detected(tmp_path: Path) -> None:
    rows = [
        {"premise": "A b.", "hypothesis": "B a.", "label": "non-entailment"},
        {"premise": "A b.", "hypothesis": "A.", "label": "entailment"},
    ]
    (tmp_path / "h.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = open_dataset(tmp_path / "h.jsonl")
    assert [r.label for r in ds] == ["non-entailment", "entailment"]
    assert ds.report.task == "nli-binary"


def test_write_gzip_same_bytes_anywhere(tmp_path: Path) -> None:
    """Published files: the same data gives the same bytes under any name, at any time."""
    from zdebias.data.writers import write_gzip, write_gzip_json

    a = write_gzip(b"r1\nr2\n", tmp_path / "a.txt.gz")
    b = write_gzip(b"r1\nr2\n", tmp_path / "sub-b.txt.gz")
    assert a.read_bytes() == b.read_bytes()
    assert gzip.decompress(a.read_bytes()) == b"r1\nr2\n"
    # no time stamp (bytes 4-7) and no file name flag (byte 3) in the header
    assert a.read_bytes()[3] == 0 and a.read_bytes()[4:8] == b"\0\0\0\0"
    doc = write_gzip_json({"b": [1, 2], "a": "é"}, tmp_path / "d.json.gz")
    assert gzip.decompress(doc.read_bytes()).decode() == '{"a":"é","b":[1,2]}'
