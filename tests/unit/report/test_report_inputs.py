"""``zdebias report`` and ``compare`` on files that are not what they expect (issue 52, item
6): bytes that are not UTF-8 JSON, JSON of the wrong shape, another kind or version, a
``manifest.json`` that zdebias did not write, a truncated filter summary. Each ends in one line
``error: FILE: what is wrong`` with exit 2, never a traceback nor an empty report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli_main import run_main
from zdebias.data.schema import Record
from zdebias.data.writers import write_records

#: file name → (bytes, what the error line says)
BAD_FILES: dict[str, tuple[bytes, str]] = {
    "latin-1": ('{"top": {}, "label": "caf\xe9"}'.encode("latin-1"), "not UTF-8 text (byte 0xe9"),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary data"),
    "empty": (b"  \n", "empty file"),
    "utf-16": ('{"top": {}}'.encode("utf-16"), "UTF-16 text; save it as UTF-8"),
    "top a number": (
        b'{"top": 3, "z_critical": 1.0, "labels": ["a"], "n_examples": 5, "n_significant": 0, '
        b'"n_features": 2}',
        "field 'top': expected an object (got 3); not a zdebias stats JSON file",
    ),
    "no labels": (
        b'{"top": {}, "z_critical": 1.0, "labels": []}',
        "field 'labels': expected at least one item (got []); also 'n_examples', "
        "'n_significant', 'n_features'; not a zdebias stats JSON file",
    ),
    "a top row without z": (
        b'{"top": {"a": [{"feature": "x", "n": 3, "p": 0.5}]}, "z_critical": 1.0, '
        b'"labels": ["a"], "n_examples": 5, "n_significant": 0, "n_features": 2}',
        "field 'top.a.0.z': missing",
    ),
    "kind only": (
        b'{"kind": "zdebias-evaluation"}',
        "field 'runs': missing; also 'suites'; not a zdebias evaluation results file",
    ),
    "no runs": (
        b'{"kind": "zdebias-evaluation", "version": 1, "suites": [], "runs": []}',
        "field 'runs': expected at least one item",
    ),
    "version 99": (
        b'{"kind": "zdebias-evaluation", "version": 99, "suites": [], "runs": []}',
        "field 'version': 99; this zdebias reads version 1 of zdebias-evaluation",
    ),
    "format_version 99": (
        b'{"kind": "zdebias-evaluation", "format_version": 99, "runs": []}',
        "field 'format_version': 99; this zdebias reads version 1",
    ),
    "a split of the wrong shape": (
        b'{"kind": "zdebias-evaluation", "version": 1, "suites": [{"name": "s"}], "runs": '
        b'[{"model": "m", "results": {}, "metrics": {}}], "shortcut_split": {"folder": "f"}}',
        "field 'shortcut_split.counts': missing",
    ),
    "a key twice": (
        b'{"kind": "zdebias-evaluation", "runs": [], "runs": []}',
        "field 'runs': given twice",
    ),
}


def _zdebias(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the CLI in-process (:func:`helpers.cli_main.run_main`): exit code and stderr."""
    capsys.readouterr()
    code = run_main(args)
    return code, capsys.readouterr().err


def _one_line(code: int, err: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_report_of_a_bad_json_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    data, fragment = BAD_FILES[case]
    path = tmp_path / "result.json"
    path.write_bytes(data)
    line = _one_line(*_zdebias(["report", str(path)], capsys))
    assert line.startswith(f"error: {path}: ") and fragment in line, line
    assert not path.with_suffix(".html").exists()


@pytest.mark.parametrize("case", ["kind only", "version 99", "a key twice", "latin-1"])
def test_compare_of_a_bad_results_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    data, fragment = BAD_FILES[case]
    path = tmp_path / "b.json"
    path.write_bytes(data)
    line = _one_line(*_zdebias(["compare", str(path), str(path)], capsys))
    assert line.startswith(f"error: {path}: ") and fragment in line, line


@pytest.mark.parametrize(
    ("manifest", "fragment"),
    [
        (b'{"name": "my app", "icons": []}', "field 'versions': missing; also 'stages'"),
        (b'{"name": "fake", "stages": []}', "field 'versions': missing"),
        (b"[1, 2]", "expected an object (got [1, 2])"),
        (b'{"name": "x", "versions": {"zdebias": "0.2.0"}, "stages": [{"name": 1}]}', "stages.0"),
    ],
)
def test_report_of_a_folder_with_a_users_manifest_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], manifest: bytes, fragment: str
) -> None:
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "manifest.json").write_bytes(manifest)
    line = _one_line(*_zdebias(["report", str(folder)], capsys))
    assert line.startswith(f"error: {folder / 'manifest.json'}: ") and fragment in line, line
    assert "not a zdebias run manifest" in line
    assert not (folder / "report.html").exists()


@pytest.mark.parametrize(
    ("summary", "fragment"),
    [
        (b'{"labels": ["negative", "positive"], "z_crit', "not valid JSON"),
        (b'{"labels": 3}', "field 'labels': expected a list (got 3); not a zdebias filter summary"),
        (b'{"seed": "x"}', "field 'seed': expected an integer (got 'x')"),
        (
            b'{"top_before_after": {"positive": [{}]}}',
            "field 'top_before_after.positive.0.feature'",
        ),
        (b'{"top_before_after": {"positive": []}, "z_critical": null}', "z_critical: missing"),
    ],
)
def test_report_of_a_filter_folder_with_a_bad_summary_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], summary: bytes, fragment: str
) -> None:
    folder = tmp_path / "filtered"
    kept = [Record(f"k{i}", "positive", text=f"good {i}") for i in range(3)]
    write_records(kept, folder / "kept.jsonl")
    write_records([Record("r", "negative", text="bad")], folder / "rejected.jsonl")
    (folder / "summary.json").write_bytes(summary)
    line = _one_line(*_zdebias(["report", str(folder)], capsys))
    assert line.startswith(f"error: {folder / 'summary.json'}: ") and fragment in line, line


def test_a_results_file_as_evaluate_writes_it_still_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check lets through what evaluate writes (version 1, runs, suites, summary)."""
    doc = {
        "kind": "zdebias-evaluation",
        "version": 1,
        "name": "m",
        "suites": [{"name": "s"}],
        "runs": [{"model": "m0", "results": {"s": {"accuracy": 0.5}}, "metrics": {"s": 0.5}}],
        "summary": {"s": {"mean": 0.5, "std": 0.0, "n_runs": 1, "values": [0.5]}},
    }
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    code, err = _zdebias(["report", str(path)], capsys)
    assert code == 0, err
    assert "50.00" in path.with_suffix(".html").read_text()


def test_a_byte_order_mark_is_read_as_utf8(tmp_path: Path) -> None:
    from zdebias.data.documents import read_document

    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"a": 1}')
    assert read_document(path, missing="") == {"a": 1}


def test_report_of_a_run_with_a_truncated_stage_output_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    (run / "evaluate").mkdir(parents=True)
    (run / "evaluate" / "results.json").write_text('{"table": {"columns": ["test"], "ro')
    stage = {
        "name": "evaluate",
        "stage": "evaluate",
        "status": "done",
        "outputs": {"results": {"path": "evaluate/results.json", "kind": "json"}},
    }
    manifest = {"name": "r", "versions": {"zdebias": "0.2.0"}, "config": {}, "stages": [stage]}
    (run / "manifest.json").write_text(json.dumps(manifest))
    line = _one_line(*_zdebias(["report", str(run)], capsys))
    assert line.startswith(f"error: {run / 'evaluate' / 'results.json'}: not valid JSON"), line
