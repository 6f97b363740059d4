"""A shortcut split is tied to its test set (issue 52, items 2, 6 and 7): ``summary.json``
records the row digest of the test set and of each slice; ``evaluate --shortcut-split``
refuses slice files that are not the ones the split wrote, flags a split of another test set,
and ends every bad summary in one line."""

from __future__ import annotations

import html
import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers.cli_main import run_main
from zdebias.data.readers import read_records
from zdebias.data.schema import Record
from zdebias.data.writers import write_records
from zdebias.stats.shortcut_split import rows_digest

LABELS = ("negative", "positive")
SIZES = {"aligned": 36, "conflicting": 29, "free": 24}


class _Fake:
    """Predicts positive for a text with ``good`` in it, negative otherwise."""

    input = "text"

    def __init__(self) -> None:
        self.labels = list(LABELS)

    def predict_each(self, sets: list[list[Record]], **_: Any) -> list[np.ndarray]:
        out = []
        for records in sets:
            probs = np.zeros((len(records), 2))
            for i, r in enumerate(records):
                probs[i, int("good" in (r.text or ""))] = 1.0
            out.append(probs)
        return out


def _test_rows() -> list[Record]:
    """89 rows: 36 aligned (``good``, positive), 29 conflicting (``good``, negative), 24 free
    (``film``: not significant in training), interleaved."""
    rows = [Record(f"a{i}", "positive", text=f"good a{i}") for i in range(SIZES["aligned"])]
    rows += [Record(f"c{i}", "negative", text=f"good c{i}") for i in range(SIZES["conflicting"])]
    rows += [Record(f"f{i}", LABELS[i % 2], text=f"film f{i}") for i in range(SIZES["free"])]
    random.Random(0).shuffle(rows)
    return rows


def _zdebias(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the CLI in-process (:func:`helpers.cli_main.run_main`): exit code and stderr."""
    capsys.readouterr()
    code = run_main(args)
    return code, capsys.readouterr().err


@pytest.fixture
def made(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """``train.jsonl``, ``test.jsonl`` and ``split/`` (zdebias shortcut-split) in tmp_path."""
    train = [Record(f"g{i}", "positive", text="good film") for i in range(40)]
    train += [Record(f"w{i}", "negative", text="awful film") for i in range(40)]
    write_records(train, tmp_path / "train.jsonl")
    write_records(_test_rows(), tmp_path / "test.jsonl")
    args = ["shortcut-split", "--train", str(tmp_path / "train.jsonl"), "--features", "unigrams"]
    args += ["--test", str(tmp_path / "test.jsonl"), "--out", str(tmp_path / "split")]
    code, err = _zdebias(args, capsys)
    assert code == 0, err
    return tmp_path


@pytest.fixture(autouse=True)
def _fake_models(monkeypatch: pytest.MonkeyPatch) -> None:
    import zdebias.classify.on_ray as on_ray

    monkeypatch.setattr(on_ray, "classifier_for", lambda model, *a, **k: _Fake())


def _evaluate(
    root: Path, capsys: pytest.CaptureFixture[str], *suites: str
) -> tuple[int, str, dict[str, Any] | None]:
    out = root / "results.json"
    args = ["evaluate", "m0", "m1", "--out", str(out), "--overwrite"]
    for suite in suites or (f"test={root / 'test.jsonl'}",):
        args += ["--suite", suite]
    code, err = _zdebias([*args, "--shortcut-split", str(root / "split")], capsys)
    doc = json.loads(out.read_text()) if code == 0 else None
    return code, err, doc


def _one_line(code: int, err: str) -> str:
    """The error line of a refused command (exit 2, no traceback)."""
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_the_split_records_the_digest_of_its_test_rows_and_of_each_slice(made: Path) -> None:
    summary = json.loads((made / "split" / "summary.json").read_text())
    assert summary["counts"] == SIZES and summary["n_test"] == 89
    assert summary["test_digest"] == rows_digest(read_records(made / "test.jsonl"))
    for name in SIZES:
        rows = read_records(made / "split" / f"{name}.jsonl")
        assert len(rows) == SIZES[name]
        assert summary["digests"][name] == rows_digest(rows)
    # the digest is of the rows graded: order, ids and meta do not count, texts and labels do
    rows = _test_rows()
    assert rows_digest(rows) == summary["test_digest"]
    renamed = [r.replace(id=f"x{i}", meta={"m": i}) for i, r in enumerate(reversed(rows))]
    assert rows_digest(renamed) == summary["test_digest"]
    assert rows_digest([rows[0].replace(label="negative"), *rows[1:]]) != summary["test_digest"]
    assert rows_digest(rows[:-1]) != summary["test_digest"]


def test_the_split_of_the_suite_grades_and_names_it(
    made: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err, doc = _evaluate(made, capsys)
    assert code == 0, err
    assert doc is not None
    split = doc["shortcut_split"]
    assert split["suite"] == "test" and split["counts"] == SIZES
    assert not any("no suite here" in line for line in split["warnings"])
    assert doc["runs"][0]["reliance"] == {
        "aligned": 1.0,
        "conflicting": 0.0,
        "free": 0.5,
        "gap": 1.0,
    }
    markdown = (made / "results.md").read_text()
    assert f"Shortcut split {made / 'split'} of suite 'test'" in markdown
    # the same rows in another format, order and ids are still the split's test set
    rows = [
        r.replace(id=f"row{i}") for i, r in enumerate(reversed(read_records(made / "test.jsonl")))
    ]
    write_records(rows, made / "converted.parquet")
    code, err, doc = _evaluate(made, capsys, f"conv={made / 'converted.parquet'}")
    assert code == 0, err
    assert doc is not None and doc["shortcut_split"]["suite"] == "conv"


def test_a_truncated_slice_file_is_refused(made: Path, capsys: pytest.CaptureFixture[str]) -> None:
    aligned = made / "split" / "aligned.jsonl"
    lines = aligned.read_text().splitlines(keepends=True)
    aligned.write_text("".join(lines[:18]))
    code, err, _doc = _evaluate(made, capsys)
    line = _one_line(code, err)
    assert line.startswith(f"error: {aligned}: 18 labelled rows, but ")
    assert "records 36 aligned rows" in line and "remake the split" in line


def test_another_file_copied_over_a_slice_is_refused(
    made: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    split = made / "split"
    shutil.copy(split / "conflicting.jsonl", split / "aligned.jsonl")
    line = _one_line(*_evaluate(made, capsys)[:2])
    assert f"{split / 'aligned.jsonl'}: 29 labelled rows" in line
    # as many rows as the slice had, but other ones
    others = [Record(f"o{i}", "positive", text=f"good other {i}") for i in range(36)]
    write_records(others, split / "aligned.jsonl")
    line = _one_line(*_evaluate(made, capsys)[:2])
    assert line.startswith(f"error: {split / 'aligned.jsonl'}: its 36 rows are not the aligned")
    assert f"row digest {rows_digest(others)[:12]}" in line


def test_the_recorded_digest_is_what_is_checked(
    made: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = made / "split" / "summary.json"
    summary = json.loads(path.read_text())
    path.write_text(json.dumps({**summary, "digests": {**summary["digests"], "free": "0" * 64}}))
    line = _one_line(*_evaluate(made, capsys)[:2])
    assert "free.jsonl: its 24 rows are not the free rows" in line
    assert "records 000000000000" in line
    # the file the split was made from, changed since: its suite is refused
    path.write_text(json.dumps(summary))
    test = made / "test.jsonl"
    rows = read_records(test)
    write_records([rows[0].replace(label="negative"), *rows[1:]], test)
    line = _one_line(*_evaluate(made, capsys)[:2])
    assert f"suite 'test' ({test}) reads the file the split was made from, but not its rows" in line
    assert "89 rows now, 89 then" in line


def test_a_split_of_another_test_set_is_flagged(
    made: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = [Record(f"o{i}", LABELS[i % 2], text=f"good o{i}") for i in range(10)]
    write_records(other, made / "other.jsonl")
    code, err, doc = _evaluate(made, capsys, f"other={made / 'other.jsonl'}")
    assert code == 0, err
    assert doc is not None
    split = doc["shortcut_split"]
    assert split["suite"] is None
    [line] = [w for w in split["warnings"] if w.startswith("no suite here")]
    assert f"({made / 'test.jsonl'}, 89 rows; the suites: other 10 rows)" in line
    assert "not on any suite here" in line
    assert f"Warning: {line}" in (made / "results.md").read_text()
    # and the report of the results file shows the reliance table with the warning
    code, err = _zdebias(["report", str(made / "results.json")], capsys)
    assert code == 0, err
    page = (made / "results.html").read_text()
    assert "gap (aligned − conflicting)" in page and html.escape(line) in page


def test_a_split_without_digests_loads_with_a_warning(
    made: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = made / "split" / "summary.json"
    summary = json.loads(path.read_text())
    del summary["test_digest"], summary["digests"]
    path.write_text(json.dumps(summary))
    code, err, doc = _evaluate(made, capsys)
    assert code == 0, err
    assert doc is not None and doc["shortcut_split"]["suite"] is None
    [line] = [w for w in doc["shortcut_split"]["warnings"] if "no row digests" in w]
    assert line.startswith(f"{path} records no row digests") and "remake it" in line
    assert doc["runs"][0]["reliance"]["gap"] == 1.0
    # its counts are still checked
    aligned = made / "split" / "aligned.jsonl"
    aligned.write_text("".join(aligned.read_text().splitlines(keepends=True)[:5]))
    assert "5 labelled rows" in _one_line(*_evaluate(made, capsys)[:2])


BAD_SUMMARIES: dict[str, tuple[bytes, str]] = {
    "empty": (b"", "empty file"),
    "truncated": (b'{"by": "features", "counts": {"aligned": 3', "not valid JSON"),
    "latin-1": ('{"by": "caf\xe9"}'.encode("latin-1"), "not UTF-8 text (byte 0xe9"),
    "binary": (b"\x00\x01\x02PK\x03\x04", "binary data"),
    "a list": (b"[1, 2]", "expected an object (got [1, 2]); not a shortcut split's summary"),
    "counts a number": (b'{"counts": 3}', "field 'counts': expected an object (got 3)"),
    "a count a string": (
        b'{"counts": {"aligned": "x", "conflicting": 1, "free": 0}}',
        "field 'counts.aligned': expected an integer (got 'x')",
    ),
    "no counts": (b'{"by": "features"}', "field 'counts': missing"),
    "a key twice": (
        b'{"counts": {"aligned": 36, "conflicting": 29, "free": 24}, "by": "a", "by": "b"}',
        "field 'by': given twice",
    ),
    "counts against n_test": (
        b'{"counts": {"aligned": 36, "conflicting": 29, "free": 24}, "n_test": 90}',
        "the slices hold 89 rows, but n_test says 90",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SUMMARIES))
def test_a_bad_split_summary_is_one_line(
    made: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    data, fragment = BAD_SUMMARIES[case]
    path = made / "split" / "summary.json"
    path.write_bytes(data)
    line = _one_line(*_evaluate(made, capsys)[:2])
    assert line.startswith(f"error: {path}: ") and fragment in line, line
