"""``--output-schema input`` (issue 27): filter and combine write their records back in the
input's own columns, raw label values and format, so results go back into the user's
pipeline; every row is the input's row, nothing lost or changed."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.cli_main import run_main

#: the user's label coding (not SNLI's order)
CODES = {"contradiction": 0, "neutral": 1, "entailment": 2}
MAPPING = ["--columns", "premise=ctx,hypothesis=claim,label=y"]
LABEL_MAP = ["--label-map", "0=contradiction,1=neutral,2=entailment"]
FAST = ["--features", "unigrams", "--zfilter-batch-size", "50", "--biased-k", "3"]


def _rows(n: int, seed: int, tag: str) -> list[dict]:
    """Rows in the user's schema: ctx, claim, y (an integer), source; an artifact planted."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(25)]
    out = []
    for i in range(n):
        label = list(CODES)[int(rng.integers(0, 3))]
        claim = " ".join(rng.choice(words, size=3))
        if label == "contradiction" and rng.random() < 0.6:
            claim += " nobody"
        out.append({"ctx": f"premise {tag}{i}", "claim": claim, "y": CODES[label], "source": tag})
    return out


def _csv(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(list(rows[0]))
        writer.writerows([list(map(str, r.values())) for r in rows])
    return path


def _read_csv(path: Path) -> tuple[list[str], list[tuple[str, ...]]]:
    with path.open(newline="", encoding="utf-8") as fh:
        table = list(csv.reader(fh))
    return table[0], [tuple(r) for r in table[1:]]


def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = run_main(["-q", *args])
    return code, capsys.readouterr().err


def test_filter_writes_kept_and_rejected_in_the_csv_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _rows(300, 0, "u")
    data = _csv(tmp_path / "user.csv", rows)
    out = tmp_path / "f"
    args = ["filter", str(data), "--out", str(out), *MAPPING, *LABEL_MAP, *FAST]
    code, err = _main([*args, "--output-schema", "input"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == [
        ".zdebias-output.json",
        "kept.csv",
        "rejected.csv",
        "summary.json",
    ]
    summary = json.loads((out / "summary.json").read_text())
    header, kept = _read_csv(out / "kept.csv")
    assert header == ["ctx", "claim", "y", "source"]
    assert len(kept) == summary["n_kept"] and summary["n_rejected"] > 0
    assert _read_csv(out / "rejected.csv")[0] == header
    rejected = _read_csv(out / "rejected.csv")[1]
    assert len(rejected) == summary["n_rejected"]
    given = [tuple(map(str, r.values())) for r in rows]
    assert Counter(kept + rejected) == Counter(given)  # the input's rows, each once
    assert {r[2] for r in kept + rejected} == {"0", "1", "2"}  # raw labels
    assert summary["output_schema"] == "input"
    assert summary["output_files"] == ["kept.csv", "rejected.csv"]
    from zdebias.report.text import filter_text

    text = filter_text(summary, out)  # issue 39.6: the hint named kept.jsonl, not written here
    assert "`zdebias stats` of kept.csv (" in text and "kept.jsonl" not in text
    # the same partition as the default schema's
    default = tmp_path / "d"
    assert (
        _main(["filter", str(data), "--out", str(default), *MAPPING, *LABEL_MAP, *FAST], capsys)[0]
        == 0
    )
    ids = [json.loads(x)["id"] for x in (default / "kept.jsonl").read_text().splitlines()]
    lines = [int(i.rsplit(":", 1)[1]) for i in ids]
    assert kept == [given[line - 2] for line in lines]  # line 1 is the header


def test_filter_with_a_seed_maps_the_seed_rows_into_the_input_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _csv(tmp_path / "user.csv", _rows(200, 1, "u"))
    seed = tmp_path / "seed.jsonl"
    seed.write_text(
        json.dumps({"premise": "a seed", "hypothesis": "w1 w2", "label": "entailment"}) + "\n"
    )
    out = tmp_path / "f"
    args = ["filter", str(data), "--seed-data", str(seed), "--out", str(out)]
    code, err = _main([*args, *MAPPING, *LABEL_MAP, *FAST, "--output-schema", "input"], capsys)
    assert code == 0, err
    _, kept = _read_csv(out / "kept.csv")
    assert kept[0] == ("a seed", "w1 w2", "2", "")  # entailment is 2 in this file


def test_combine_writes_combined_in_the_original_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original, generated = _rows(150, 2, "o"), _rows(200, 3, "g")
    a, b = _csv(tmp_path / "orig.csv", original), _csv(tmp_path / "gen.csv", generated)
    out = tmp_path / "c"
    args = ["combine", "--original", str(a), "--generated", str(b), "--recipe", "par-z"]
    code, err = _main(
        [*args, "--out", str(out), *MAPPING, *LABEL_MAP, *FAST, "--output-schema", "input"], capsys
    )
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    header, combined = _read_csv(out / "combined.csv")
    assert header == ["ctx", "claim", "y", "source"]
    assert len(combined) == summary["n_output"]
    rejected = _read_csv(out / "rejected.csv")[1]
    given = [tuple(map(str, r.values())) for r in original + generated]
    assert Counter(combined + rejected) == Counter(given)
    assert sum(r[3] == "g" for r in combined) == summary["n_output_generated"]


def test_jsonl_rows_come_back_as_they_were(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{**r, "extra": {"k": [1, 2]}, "score": 0.5} for r in _rows(200, 4, "j")]
    data = tmp_path / "user.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "f"
    args = ["filter", str(data), "--out", str(out), *MAPPING, *LABEL_MAP, *FAST]
    assert _main([*args, "--output-schema", "input"], capsys)[0] == 0
    back = []
    for name in ("kept.jsonl", "rejected.jsonl"):
        back += [json.loads(x) for x in (out / name).read_text().splitlines()]
    assert sorted(back, key=json.dumps) == sorted(rows, key=json.dumps)
    assert all(type(r["y"]) is int for r in back)


def test_parquet_keeps_the_input_arrow_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _rows(200, 5, "p")
    data = tmp_path / "user.parquet"
    pq.write_table(pa.Table.from_pylist(rows), data)
    out = tmp_path / "f"
    args = ["filter", str(data), "--out", str(out), *MAPPING, *LABEL_MAP, *FAST]
    assert _main([*args, "--output-schema", "input"], capsys)[0] == 0
    kept, rejected = pq.read_table(out / "kept.parquet"), pq.read_table(out / "rejected.parquet")
    assert kept.schema == pq.read_schema(data)
    assert kept.num_rows == json.loads((out / "summary.json").read_text())["n_kept"]
    back = kept.to_pylist() + rejected.to_pylist()
    assert sorted(back, key=json.dumps) == sorted(rows, key=json.dumps)


def test_an_input_without_a_writable_schema_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, text in (("s1.dev", "A b\n"), ("s2.dev", "c d\n"), ("labels.dev", "neutral\n")):
        (tmp_path / name).write_text(text)
    out = tmp_path / "f"
    code, err = _main(
        ["filter", f"{tmp_path}::dev", "--out", str(out), "--output-schema", "input"], capsys
    )
    assert code == 2
    assert err.strip() == (
        f"error: --output-schema input: {tmp_path}::dev is a triplets input; its schema can "
        "be written for jsonl, json, csv, tsv, parquet inputs only"
    )
    assert not out.exists()


def test_a_format_convention_maps_a_label_the_input_never_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GLUE SST-2's layout reads 0/1 by its convention: a seed row labelled positive goes
    back as 1 although the input holds only 0s."""
    data = tmp_path / "dev.tsv"
    rows = [f"text {i} w{i % 7}\t0" for i in range(60)]
    data.write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
    seed = tmp_path / "seed.jsonl"
    seed.write_text(json.dumps({"text": "a seed", "label": "positive"}) + "\n")
    out = tmp_path / "f"
    args = ["filter", str(data), "--task", "sentiment", "--seed-data", str(seed)]
    code, err = _main([*args, "--out", str(out), *FAST, "--output-schema", "input"], capsys)
    assert code == 0, err
    first = (out / "kept.tsv").read_text().splitlines()[:2]
    assert first == ["sentence\tlabel", "a seed\t1"]
