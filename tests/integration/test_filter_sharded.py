"""`zdebias filter` with one process per byte range of the input (zdebias.stats.execution.sharded):
the same bytes as one process, the same errors, warnings and skip reports."""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zdebias.cli import app
from zdebias.data.options import ReadOptions
from zdebias.data.readers import Dataset
from zdebias.errors import DataError
from zdebias.stats.execution import part_files, plan, shard, writer
from zdebias.stats.settings import ZFilterSettings

runner = CliRunner()
OUTPUTS = ("kept.jsonl", "rejected.jsonl", "summary.json", ".zdebias-output.json")
WORDS = "man woman dog park runs sits sleeps red small near the a nobody cat plays".split()


def _filter(path: Path, out: Path, *options: object) -> tuple[int, str]:
    result = runner.invoke(app, ["filter", str(path), "--out", str(out), *map(str, options)])
    return result.exit_code, result.output.replace(str(out), "OUT")


def _lines(text: str) -> list[str]:
    """The printed lines (progress bars leave blank ones where stderr is not a terminal)."""
    return [line for line in text.splitlines() if line.strip()]


def _same_outputs(a: Path, b: Path) -> None:
    for name in OUTPUTS:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def _rows(n: int, *, text: bool = False) -> list[dict[str, object]]:
    """Rows with repeated and distinct texts, biased hypotheses, extra columns and meta."""
    labels = ("positive", "negative") if text else ("entailment", "neutral", "contradiction")
    rows: list[dict[str, object]] = []
    for i in range(n):
        label = labels[i % len(labels)]
        words = " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(3 + i % 4))
        if label in ("contradiction", "negative") and i % 5:
            words = "nobody " + words
        row: dict[str, object] = {"id": f"r{i}"}
        if text:
            row["sentence"] = f"The film {words}."
        else:
            row["premise"] = f"A man {WORDS[i % 6]} in the park."  # six premises, repeated
            row["hypothesis"] = words if i % 9 else "a man is outside"
        row["label"] = label
        if i % 11 == 0:
            row["genre"] = "fiction"  # an extra column: kept in meta
        if i % 13 == 0:
            row["meta"] = {"source": "test", "round": i}
        rows.append(row)
    return rows


def _write(path: Path, rows: list[dict[str, object]], *, bom: bool = False) -> Path:
    lines = [json.dumps(r) for r in rows]
    path.write_text(("\ufeff" if bom else "") + "\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("num_proc", [2, 3])
def test_same_bytes_as_one_process(tmp_path: Path, num_proc: int) -> None:
    rows = _rows(400)
    rows[17]["label"] = "-"  # unlabelled: skipped and reported
    rows[250]["label"] = None
    rows[300]["id"] = "r5"  # a repeated id: warned about
    path = _write(tmp_path / "train.jsonl", rows, bom=True)
    code, one_text = _filter(path, tmp_path / "one", "--num-proc", 1, "--batch-size", 50)
    assert code == 0, one_text
    assert plan.plan_shards(str(path), ReadOptions(), ZFilterSettings(num_proc=num_proc))
    code, many_text = _filter(path, tmp_path / "many", "--num-proc", num_proc, "--batch-size", 50)
    assert code == 0, many_text
    _same_outputs(tmp_path / "one", tmp_path / "many")
    assert _lines(one_text) == _lines(many_text)
    summary = json.loads((tmp_path / "many" / "summary.json").read_text())
    assert summary["read"]["n_unlabelled"] == 2
    assert summary["n_kept"] + summary["n_rejected"] == 398
    assert summary["stats_of_kept"]["n_features"] > 0


def test_single_text_records(tmp_path: Path) -> None:
    path = _write(tmp_path / "sst.jsonl", _rows(300, text=True))
    assert _filter(path, tmp_path / "one", "--num-proc", 1, "--batch-size", 40)[0] == 0
    assert _filter(path, tmp_path / "many", "--num-proc", 2, "--batch-size", 40)[0] == 0
    _same_outputs(tmp_path / "one", tmp_path / "many")


def test_skipped_bad_rows_are_reported_in_file_order(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lines = [json.dumps(r) for r in _rows(300)]
    lines[3] = '{"id": "bad", "premise": "x"'  # broken JSON, first half
    lines[280] = json.dumps({"id": "b2", "premise": "", "hypothesis": "h", "label": "neutral"})
    lines.insert(150, "")  # a blank line
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    outs = {}
    for n in (1, 2):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="zdebias"):
            code, text = _filter(path, tmp_path / f"p{n}", "--num-proc", n, "--on-error", "skip")
        assert code == 0, text
        outs[n] = [r.getMessage() for r in caplog.records]
    _same_outputs(tmp_path / "p1", tmp_path / "p2")
    assert outs[1] == outs[2]
    errors = json.loads((tmp_path / "p2" / "summary.json").read_text())["read"]["errors"]
    assert [e.split(": ")[0].rsplit(":", 1)[1] for e in errors] == ["4", "282"]


def test_a_bad_row_in_a_later_range_fails_as_in_one_process(tmp_path: Path) -> None:
    rows = _rows(300)
    rows[260]["label"] = "maybe"
    rows[280]["premise"] = 3  # a later error: the first one in the file is reported
    path = _write(tmp_path / "train.jsonl", rows)
    errors = []
    for n in (1, 2):
        out = tmp_path / f"p{n}"
        result = runner.invoke(app, ["filter", str(path), "--out", str(out), "--num-proc", n])
        assert isinstance(result.exception, DataError)
        errors.append((result.exception.line, result.exception.field, str(result.exception)))
        assert not out.exists()
    assert errors[0] == errors[1]
    assert errors[1][:2] == (261, "label")


def test_plan_shards_only_where_it_applies(tmp_path: Path) -> None:
    path = _write(tmp_path / "train.jsonl", _rows(200))
    read, two = ReadOptions(), ZFilterSettings(num_proc=2)
    ranges = plan.plan_shards(str(path), read, two)
    assert ranges is not None and len(ranges) == 2
    data = path.read_bytes()
    assert ranges[0][0] == 0 and ranges[-1][1] == len(data) and ranges[0][1] == ranges[1][0]
    assert data[ranges[1][0] - 1 : ranges[1][0]] == b"\n"  # cut at a line start
    assert plan.plan_shards(str(path), read, ZFilterSettings()) is None  # small: 1 process
    assert plan.plan_shards(str(path), read, ZFilterSettings(num_proc=1)) is None
    assert plan.plan_shards(str(path), ReadOptions(limit=10), two) is None
    assert plan.plan_shards(str(path), read, two, seed_data=str(path)) is None
    assert (
        plan.plan_shards(str(path), read, ZFilterSettings(num_proc=2, hypo_only_model="m")) is None
    )
    premise_only = ZFilterSettings(num_proc=2, ngram_fields=["premise"])
    assert plan.plan_shards(str(path), read, premise_only) is None
    no_hypo = ZFilterSettings(num_proc=2, ngram_fields=["premise"], features=["ngrams", "null"])
    assert plan.plan_shards(str(path), read, no_hypo) is not None
    import gzip

    gz = tmp_path / "train.jsonl.gz"
    gz.write_bytes(gzip.compress(data))
    assert plan.plan_shards(str(gz), ReadOptions(format="jsonl"), two) is None
    csv = tmp_path / "train.csv"
    csv.write_text("premise,hypothesis,label\na,b,neutral\n")
    assert plan.plan_shards(str(csv), read, two) is None


def test_ranges_read_the_whole_file(tmp_path: Path) -> None:
    rows = _rows(120)
    rows[0] = {"id": "odd", "premise": "p", "hypothesis": "h", "label": "neutral", "x": 1}
    path = _write(tmp_path / "t.jsonl", rows, bom=True)
    whole = list(Dataset(path))
    size = path.stat().st_size
    for n in (2, 3, 7):
        parts = []
        for start, end in plan._ranges(path, size, n):
            parts.extend(Dataset(path).iter_range(start, end))
        assert parts == whole  # ids, texts, labels and meta (extra columns of line 1) alike


def test_data_error_keeps_its_place_across_processes() -> None:
    err = DataError("expected text, got int", path="a.jsonl", line=7, field="premise")
    back = pickle.loads(pickle.dumps(err))
    assert (back.path, back.line, back.field, str(back)) == ("a.jsonl", 7, "premise", str(err))


def test_real_snli_sharded_same_as_one_process(data_dir: Path, tmp_path: Path) -> None:
    path = data_dir / "snli_20k" / "train.jsonl"
    assert _filter(path, tmp_path / "one", "--num-proc", 1)[0] == 0
    assert _filter(path, tmp_path / "two", "--num-proc", 2)[0] == 0
    _same_outputs(tmp_path / "one", tmp_path / "two")
    summary = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert summary["n_input"] == summary["n_kept"] + summary["n_rejected"] == 19_993


def test_a_worker_that_dies_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from zdebias.errors import ZdebiasError

    path = _write(tmp_path / "train.jsonl", _rows(200))
    monkeypatch.setattr(shard.Shard, "read_and_extract", lambda self, names: os._exit(3))
    out = tmp_path / "out"
    result = runner.invoke(app, ["filter", str(path), "--out", str(out), "--num-proc", "2"])
    assert isinstance(result.exception, ZdebiasError)
    assert "died with exit code 3" in str(result.exception)
    assert "--num-proc 1" in str(result.exception)
    assert not out.exists()


def test_a_writer_process_writes_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Below the sharding size, one process filters while a second, forked before reading,
    reads the file too and writes the output: the same bytes, messages and skip report."""
    rows = _rows(300)
    for row in rows[::7]:  # tagged by an earlier filter: the tags are replaced in place
        row["meta"] = {"rejected_by": ["old"], "note": "é"}
    rows[9]["label"] = 2  # contradiction, by its index
    lines = [json.dumps(r) for r in rows]
    lines[5] = '{"id": "bad", "premise": "x"'  # broken JSON: skipped
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    read = ReadOptions(on_error="skip")
    assert plan.writer_size(str(path), read, ZFilterSettings()) is None  # small: no
    monkeypatch.setattr(plan, "WRITER_MIN_BYTES", 0)
    assert plan.writer_size(str(path), read, ZFilterSettings()) == path.stat().st_size
    assert plan.writer_size(str(path), read, ZFilterSettings(num_proc=1)) is None
    assert plan.writer_size(str(path), read, ZFilterSettings(), seed_data=str(path)) is None
    assert plan.writer_size(str(path), ReadOptions(limit=9), ZFilterSettings()) is None
    used = []
    real = writer.filter_records
    monkeypatch.setattr(writer, "filter_records", lambda *a, **k: used.append(1) or real(*a, **k))
    outs, texts = {}, {}
    for name, options in (("one", ["--num-proc", 1]), ("two", [])):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="zdebias"):
            code, texts[name] = _filter(
                path, tmp_path / name, "--on-error", "skip", "--batch-size", 50, *options
            )
        assert code == 0, texts[name]
        outs[name] = [r.getMessage() for r in caplog.records]
    assert used == [1]
    _same_outputs(tmp_path / "one", tmp_path / "two")
    assert outs["one"] == outs["two"] and _lines(texts["one"]) == _lines(texts["two"])
    rejected = [json.loads(x) for x in (tmp_path / "two" / "rejected.jsonl").open()]
    tagged = [r["meta"] for r in rejected if "note" in r["meta"]]
    assert tagged and all(
        list(m)[:2] == ["rejected_by", "note"] and list(m)[-1] == "rejected_by_features"
        for m in tagged
    )
    assert all(m["rejected_by"] != ["old"] and m["note"] == "é" for m in tagged)


def test_a_writer_process_ends_with_a_bad_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _rows(200)
    rows[150]["label"] = "maybe"
    path = _write(tmp_path / "train.jsonl", rows)
    monkeypatch.setattr(plan, "WRITER_MIN_BYTES", 0)
    out = tmp_path / "out"
    result = runner.invoke(app, ["filter", str(path), "--out", str(out)])
    assert isinstance(result.exception, DataError)
    assert (result.exception.line, result.exception.field) == (151, "label")
    assert not out.exists()


def test_real_snli_with_a_writer_process(data_dir: Path, tmp_path: Path) -> None:
    path = data_dir / "snli_20k" / "train.jsonl"
    assert plan.writer_size(str(path), ReadOptions(), ZFilterSettings()) is not None
    assert _filter(path, tmp_path / "one", "--num-proc", 1)[0] == 0
    assert _filter(path, tmp_path / "two")[0] == 0
    _same_outputs(tmp_path / "one", tmp_path / "two")


def test_join_goes_on_through_user_space_where_the_kernel_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    parts = [tmp_path / f"p{i}" for i in range(3)]
    for i, part in enumerate(parts):
        part.write_bytes(bytes([65 + i]) * (1000 + i))
    expected = b"".join(p.read_bytes() for p in parts)
    part_files._join(list(parts), tmp_path / "joined")
    assert (tmp_path / "joined").read_bytes() == expected
    for i, part in enumerate(parts):
        part.write_bytes(bytes([65 + i]) * (1000 + i))
    calls = []
    real = os.copy_file_range

    def some_then_fail(src: int, dst: int, count: int) -> int:
        calls.append(count)
        if len(calls) > 1:
            raise OSError("not here")
        return real(src, dst, 300)  # a part of the first copy, then user space

    monkeypatch.setattr(os, "copy_file_range", some_then_fail)
    part_files._join(list(parts), tmp_path / "joined2")
    assert (tmp_path / "joined2").read_bytes() == expected
    assert len(calls) >= 2


def test_workers_that_read_their_range_again_to_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above KEEP_ROWS records a worker keeps none (memory at millions of rows) and reads
    its range again, chunk by chunk, to write: the same bytes."""
    path = _write(tmp_path / "train.jsonl", _rows(400))
    assert _filter(path, tmp_path / "one", "--num-proc", 1, "--batch-size", 50)[0] == 0
    monkeypatch.setattr(shard, "KEEP_ROWS", 60)
    monkeypatch.setattr(shard, "CHUNK_ROWS", 70)
    real = shard.Shard._write_records
    marks = tmp_path / "marks"
    marks.mkdir()

    def marked(self: shard.Shard, *args: object) -> None:
        (marks / str(self.start)).write_text(str(self.records is None))  # in the worker
        real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(shard.Shard, "_write_records", marked)
    code, text = _filter(path, tmp_path / "two", "--num-proc", 2, "--batch-size", 50)
    assert code == 0, text
    _same_outputs(tmp_path / "one", tmp_path / "two")
    assert sorted(m.read_text() for m in marks.iterdir()) == ["True", "True"]  # read again
