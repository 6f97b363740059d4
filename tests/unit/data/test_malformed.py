"""A corpus of bad input files: each gets one clear `FILE:LINE: ...` error, exit code 2,
no traceback and no partial output; `--on-error skip` skips and reports instead."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from zdebias.data import open_dataset, read_records
from zdebias.errors import DataError

GOOD = {"premise": "A man sleeps.", "hypothesis": "A person rests.", "label": "entailment"}


def _jsonl(rows: list) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in rows)


def _truncated_gzip() -> bytes:
    data = gzip.compress(_jsonl([GOOD] * 200))
    return data[: len(data) // 2]


# name → (file name, bytes, expected message fragment, expected "FILE:LINE" line or None)
BAD_FILES: dict[str, tuple[str, bytes, str, int | None]] = {
    "invalid-json": ("a.jsonl", _jsonl([GOOD, b'{"premise": "x", "hyp']), "invalid JSON", 2),
    "not-an-object": ("a.jsonl", _jsonl([GOOD, [1, 2, 3]]), "expected a JSON object", 2),
    "missing-field": (
        "a.jsonl",
        _jsonl([GOOD, {"premise": "x", "label": "neutral"}]),
        "field 'hypothesis': missing field",
        2,
    ),
    "unknown-label": (
        "a.jsonl",
        _jsonl([GOOD, GOOD, {**GOOD, "label": "maybe"}]),
        "field 'label': unknown label 'maybe'",
        3,
    ),
    "numeric-label-out-of-range": (
        "a.jsonl",
        _jsonl([{**GOOD, "label": 7}]),
        "field 'label': unknown label '7'",
        1,
    ),
    "empty-text": (
        "a.jsonl",
        _jsonl([GOOD, {**GOOD, "hypothesis": "   "}]),
        "field 'hypothesis': empty text",
        2,
    ),
    "null-text": (
        "a.jsonl",
        _jsonl([{**GOOD, "premise": None}]),
        "field 'premise': expected text, got null",
        1,
    ),
    "number-as-text": (
        "a.jsonl",
        _jsonl([{**GOOD, "hypothesis": 42}]),
        "expected text, got int",
        1,
    ),
    "non-utf8-jsonl": (
        "a.jsonl",
        _jsonl([GOOD, b'{"premise": "caf\xe9", "hypothesis": "x", "label": 0}']),
        "not valid UTF-8: byte 0xe9",
        2,
    ),
    "non-utf8-tsv": (
        "a.tsv",
        b"sentence1\tsentence2\tgold_label\nA b\tc d\tneutral\nx\xff\ty\tneutral\n",
        "not valid UTF-8: byte 0xff",
        3,
    ),
    "tsv-wrong-column-count": (
        "a.tsv",
        b"sentence1\tsentence2\tgold_label\nA b\tc d\tneutral\nonly one\tneutral\n",
        "expected 3 columns",
        3,
    ),
    "tsv-missing-columns": (
        "a.tsv",
        b"foo\tbar\tgold_label\nA b\tc d\tneutral\n",
        "no column for",
        1,
    ),
    "json-list-truncated": (
        "a.json",
        b'[{"premise": "a", "hypothesis": "b", "label": 0},',
        "invalid JSON",
        1,
    ),
    "json-not-a-list": ("a.json", b"[1, 2]", "expected a JSON object", 1),
    "corrupt-gzip": ("a.jsonl.gz", _truncated_gzip(), "corrupt gzip data", None),
    "hans-bad-label": (
        "heuristics_evaluation_set.txt",
        b"gold_label\tsentence1\tsentence2\tpairID\theuristic\tsubcase\ttemplate\n"
        b"entailment\tA b .\tA .\tex0\tlexical_overlap\tln\ttemp1\n"
        b"contradiction\tA b .\tA .\tex1\tlexical_overlap\tln\ttemp1\n",
        "unknown label 'contradiction'; expected one of entailment, non-entailment",
        3,
    ),
}


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_reader_raises_located_error(tmp_path: Path, kind: str) -> None:
    name, data, fragment, line = BAD_FILES[kind]
    path = _write(tmp_path, name, data)
    with pytest.raises(DataError) as info:
        read_records(path)
    message = str(info.value)
    assert fragment in message
    expected_prefix = f"{path}:{line}: " if line is not None else f"{path}"
    assert message.startswith(expected_prefix), message


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_cli_one_line_exit_2_no_traceback(tmp_path: Path, kind: str) -> None:
    name, data, fragment, _ = BAD_FILES[kind]
    path = _write(tmp_path, name, data)
    proc = subprocess.run(
        [sys.executable, "-m", "zdebias.cli", "inspect", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}")
    assert fragment in lines[0]


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_no_partial_output_on_error(tmp_path: Path, kind: str) -> None:
    name, data, _, _ = BAD_FILES[kind]
    path = _write(tmp_path, name, data)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "zdebias.cli", "convert", str(path), str(out_dir / "x.jsonl")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert list(out_dir.iterdir()) == [], "no output and no temp file may be left behind"


def test_triplets_of_different_lengths(tmp_path: Path) -> None:
    (tmp_path / "s1.dev").write_text("a b\nc d\ne f\n")
    (tmp_path / "s2.dev").write_text("a\nc\ne\n")
    (tmp_path / "labels.dev").write_text("entailment\nneutral\n")
    with pytest.raises(DataError, match=r"labels.dev ended at line 2 but s1.dev goes on"):
        read_records(tmp_path)


def test_missing_file_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file"):
        read_records(tmp_path / "nope.jsonl")
    odd = _write(tmp_path, "data.bin", b"\x00\x01\x02")
    with pytest.raises(DataError, match="cannot tell the format"):
        read_records(odd)


def test_skip_mode_reports_how_many_and_where(tmp_path: Path) -> None:
    rows = [GOOD, b"{not json", {**GOOD, "label": "maybe"}, GOOD, {**GOOD, "label": "-"}]
    path = _write(tmp_path, "a.jsonl", _jsonl(rows))
    ds = open_dataset(path, on_error="skip")
    records = list(ds)
    assert len(records) == 2
    assert ds.report.n_errors == 2
    assert [e.line for e in ds.report.errors] == [2, 3]
    assert ds.report.n_unlabelled == 1 and ds.report.unlabelled_lines == [5]
    proc = subprocess.run(
        [sys.executable, "-m", "zdebias.cli", "inspect", str(path), "--on-error", "skip", "--json"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0
    info = json.loads(proc.stdout)
    assert info["n_examples"] == 2
    assert info["n_skipped_errors"] == 2 and info["n_skipped_unlabelled"] == 1
    assert info["skipped_errors"][0].startswith(f"{path}:2: invalid JSON")


def test_non_utf8_skip_mode_in_tsv(tmp_path: Path) -> None:
    name, data, _, _ = BAD_FILES["non-utf8-tsv"]
    ds = open_dataset(_write(tmp_path, name, data), on_error="skip")
    assert len(list(ds)) == 1
    assert ds.report.errors[0].line == 3
