"""A corpus of bad input files: each gets one clear `FILE:LINE: ...` error, exit code 2,
no traceback and no partial output; `--on-error skip` skips and reports instead."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli_main import run_main
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


# --------------------------------------------------------------------------- the CLI corpus
# More bad files (issue 12): each through several commands, in-process, asserting exit code 2,
# one `error: FILE:LINE: ...` line and that nothing was written.


def _deep(n: int = 100_000) -> str:
    return "[" * n + "]" * n


MORE_BAD_FILES: dict[str, tuple[str, bytes, str, int | None]] = {
    "csv-duplicated-column": (
        "a.csv",
        b"premise,premise,hypothesis,label\nA b,c d,e f,neutral\n",
        "field 'premise': column 'premise' appears twice in the header (columns 1 and 2)",
        1,
    ),
    "tsv-duplicated-column": (
        "a.tsv",
        b"sentence1\tsentence2\tgold_label\tSentence2\nA\tB\tneutral\tC\n",
        "column 'Sentence2' appears twice in the header (columns 2 and 4)",
        1,
    ),
    "jsonl-5000-digit-label": (
        "a.jsonl",
        _jsonl([GOOD, b'{"premise": "a", "hypothesis": "b", "label": ' + b"7" * 5000 + b"}"]),
        "invalid JSON: a number too long to read (5000 digits)",
        2,
    ),
    "csv-5000-digit-label": (
        "a.csv",
        b"premise,hypothesis,label\nA b,c d," + b"7" * 5000 + b"\n",
        "field 'label': unknown label '7777",
        2,
    ),
    "jsonl-huge-number-label": (
        "a.jsonl",
        _jsonl([{**GOOD, "label": 10**30}]),
        "field 'label': unknown label: number too large",
        1,
    ),
    "jsonl-deeply-nested": (
        "a.jsonl",
        _jsonl([GOOD, GOOD, ('{"premise": ' + _deep() + "}").encode()]),
        "invalid JSON: nested too deeply",
        3,
    ),
    "json-list-deeply-nested": (
        "a.json",
        ("[" + json.dumps(GOOD) + ', {"premise": ' + _deep() + "}]").encode(),
        "invalid JSON: nested too deeply",
        1,
    ),
    "jsonl-lone-surrogate": (
        "a.jsonl",
        _jsonl([GOOD, b'{"premise": "a \\ud800 b", "hypothesis": "c", "label": "neutral"}']),
        "field 'premise': lone surrogate \\ud800 in text (not valid Unicode)",
        2,
    ),
    "jsonl-lone-low-surrogate-upper-case": (
        "a.jsonl",
        _jsonl([b'{"premise": "a", "hypothesis": "x\\uDC00", "label": "neutral"}']),
        "field 'hypothesis': lone surrogate \\udc00",
        1,
    ),
    "jsonl-lone-surrogate-in-meta": (
        "a.jsonl",
        _jsonl([GOOD, GOOD, b'{"premise": "a", "hypothesis": "b", "label": 0, "src": "\\udfff"}']),
        "field 'src': lone surrogate \\udfff",
        3,
    ),
    "jsonl-lone-surrogate-in-id": (
        "a.jsonl",
        _jsonl([b'{"id": "\\ud83d", "premise": "a", "hypothesis": "b", "label": 0}']),
        "field 'id': lone surrogate \\ud83d",
        1,
    ),
    "json-list-lone-surrogate": (
        "a.json",
        (
            "[" + json.dumps(GOOD) + ', {"premise": "\\ud800", "hypothesis": "b", "label": 1}]'
        ).encode(),
        "field 'premise': lone surrogate \\ud800",
        1,
    ),
    "jsonl-bad-json-after-good-rows": (
        "a.jsonl",
        _jsonl([GOOD, GOOD, GOOD, b"{'premise': 'single quotes'}"]),
        "invalid JSON: Expecting property name enclosed in double quotes",
        4,
    ),
    "jsonl-object-cut-at-line-end": (
        "a.jsonl",
        _jsonl([GOOD, b'{"premise": ']),
        "invalid JSON: Expecting value at column 1",
        2,
    ),
    "csv-unknown-label": (
        "a.csv",
        b"premise,hypothesis,label\nA b,c d,neutral\nA b,c d,maybe\n",
        "field 'label': unknown label 'maybe'",
        3,
    ),
    "csv-empty-hypothesis": (
        "a.csv",
        b"premise,hypothesis,label\nA b,,neutral\n",
        "field 'hypothesis': empty text",
        2,
    ),
    # issue 27: a key given twice was read silently, the last value winning
    "jsonl-duplicate-key": (
        "a.jsonl",
        _jsonl(
            [
                GOOD,
                b'{"premise": "a", "hypothesis": "b", "label": "entailment", "label": "neutral"}',
            ]
        ),
        "field 'label': duplicate key: the object gives it 2 times (only one value can be read)",
        2,
    ),
    "jsonl-duplicate-key-unspaced": (
        "a.jsonl",
        _jsonl([b'{"premise":"a","premise":"b","premise":"c","hypothesis":"d","label":"neutral"}']),
        "field 'premise': duplicate key: the object gives it 3 times",
        1,
    ),
    "jsonl-duplicate-key-spaced": (
        "a.jsonl",
        _jsonl(
            [GOOD, GOOD, b'{"premise" : "a", "hypothesis" : "b", "hypothesis" :  "c", "label" : 1}']
        ),
        "field 'hypothesis': duplicate key",
        3,
    ),
    "jsonl-duplicate-key-in-meta-with-a-float": (
        "a.jsonl",
        _jsonl([b'{"premise": "a", "hypothesis": "b", "label": 0, "meta": {"p": 0.5, "p": 0.7}}']),
        "field 'p': duplicate key",
        1,
    ),
    "jsonl-duplicate-key-nested": (
        "a.jsonl",
        _jsonl(
            [
                GOOD,
                b'{"premise": "a", "hypothesis": "b", "label": 0, '
                b'"meta": {"s": [{"k": 1, "k": 2}]}}',
            ]
        ),
        "field 'k': duplicate key",
        2,
    ),
    # issue 40: a .json document's repeated key was read silently, the last value winning
    "json-list-duplicate-key": (
        "a.json",
        b'[{"premise": "a", "hypothesis": "b", "label": "neutral"},\n'
        b' {"premise": "a", "hypothesis": "b", "label": "neutral", "label": "entailment"}]',
        "field 'label': duplicate key: the object gives it 2 times (only one value can be read)",
        2,
    ),
    "json-data-duplicate-key-nested": (
        "a.json",
        b'{"data": [{"premise": "a", "hypothesis": "b", "label": 0, "meta": {"k": 1, "k": 2}}]}',
        "field 'k': duplicate key: the object gives it 2 times",
        1,
    ),
    "json-data-given-twice": (
        "a.json",
        b'{"data": [], "data": [{"premise": "a", "hypothesis": "b", "label": "neutral"}]}',
        "field 'data': duplicate key",
        1,
    ),
    # a NUL character in a field was read as text
    "csv-nul-in-field": (
        "a.csv",
        b"premise,hypothesis,label\nA b,c d,neutral\nA\x00b,c d,neutral\n",
        "field 'premise': NUL character (\\x00) in the field",
        3,
    ),
    "tsv-nul-in-quoted-field": (
        "a.tsv",
        b'sentence1\tsentence2\tgold_label\nA b\t"c\x00 d"\tneutral\n',
        "field 'sentence2': NUL character",
        2,
    ),
}

# inputs without a single labelled record: the reader returns nothing; commands refuse them
EMPTY_FILES: dict[str, tuple[str, bytes, str, int | None]] = {
    "empty-jsonl": ("a.jsonl", b"", "no labelled records in the input set: the file is empty", 1),
    "blank-lines-jsonl": ("a.jsonl", b"\n\n  \n", "no labelled records in the input set", 1),
    "header-only-csv": (
        "a.csv",
        b"premise,hypothesis,label\n",
        "no labelled records in the input set: only a header, no data rows",
        1,
    ),
    "header-only-tsv": (
        "a.tsv",
        b"sentence1\tsentence2\tgold_label\n",
        "only a header, no data rows",
        1,
    ),
    "all-unlabelled-jsonl": (
        "a.jsonl",
        _jsonl([{**GOOD, "label": "-"}, {**GOOD, "label": -1}, {**GOOD, "label": None}]),
        "no labelled records in the input set: all 3 rows are without a gold label",
        1,
    ),
    "all-unlabelled-tsv": (
        "a.tsv",
        b"sentence1\tsentence2\tgold_label\nA\tB\t-\nC\tD\t-\n",
        "all 2 rows are without a gold label",
        2,
    ),
    "empty-json-list": ("a.json", b"[]", "no labelled records in the input set: no data rows", 1),
}


@pytest.mark.parametrize("kind", sorted(MORE_BAD_FILES))
def test_more_bad_files_raise_located_errors(tmp_path: Path, kind: str) -> None:
    name, data, fragment, line = MORE_BAD_FILES[kind]
    path = _write(tmp_path, name, data)
    with pytest.raises(DataError) as info:
        read_records(path)
    assert str(info.value).startswith(f"{path}:{line}: ") and fragment in str(info.value)


def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """Run ``zdebias ARGS`` in-process: (exit code, stderr lines)."""
    code = run_main([*args])
    return code, capsys.readouterr().err.strip().splitlines()


#: command → (arguments for an input file and an output under OUT, the output it would write)
COMMANDS: dict[str, tuple[list[str], str]] = {
    "convert": (["convert", "{input}", "{out}/x.jsonl"], "x.jsonl"),
    "filter": (["filter", "{input}", "--out", "{out}/f"], "f"),
    "stats": (["stats", "{input}", "--out", "{out}/s.json"], "s.json"),
    "train-classifier": (["train-classifier", "--train", "{input}", "--out", "{out}/m"], "m"),
}
ALL_FILES = {**BAD_FILES, **MORE_BAD_FILES, **EMPTY_FILES}
CASES = [
    (command, kind)
    for kind in sorted(ALL_FILES)
    for command in (
        ("convert", "filter")
        if kind in BAD_FILES
        else ("convert", "filter", "stats", "train-classifier")
        if kind in ("jsonl-lone-surrogate", "csv-duplicated-column", "header-only-csv")
        else ("convert", "filter")
    )
]


@pytest.mark.parametrize(("command", "kind"), CASES)
def test_cli_corpus_exit_2_one_located_line_no_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, kind: str
) -> None:
    name, data, fragment, line = ALL_FILES[kind]
    path = _write(tmp_path, name, data)
    out = tmp_path / "out"
    out.mkdir()
    template, output = COMMANDS[command]
    args = [a.format(input=path, out=out) for a in template]
    if command == "train-classifier":
        fragment = fragment.replace("the input set", "the training set")
    code, err = _main(args, capsys)
    prefix = f"error: {path}:{line}: " if line is not None else f"error: {path}: "
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith(prefix) and fragment in err[0], err
    assert not (out / output).exists()
    assert list(out.iterdir()) == [], "no output and no temp file may be left behind"


def _three_labels(tmp_path: Path, n: int = 6) -> Path:
    labels = ("entailment", "neutral", "contradiction")
    rows = [{**GOOD, "id": f"r{i}", "label": labels[i % 3]} for i in range(n)]
    return _write(tmp_path, "good.jsonl", _jsonl(rows))


_SAMPLE = ["sample", "--generator", "{out}/g", "--n", "3", "--out", "{out}/s"]
_GENERATOR = ["train-generator", "--model", "smollm2", "--train", "{input}", "--out", "{out}/g"]
#: (command template, the bad option and value, the option named in the error, its range)
OPTION_CASES: list[tuple[list[str], list[str], str, str]] = [
    (COMMANDS["train-classifier"][0], ["--batch-size", "0"], "--batch-size", ">= 1"),
    (COMMANDS["train-classifier"][0], ["--batch-size", "-4"], "--batch-size", ">= 1"),
    (COMMANDS["train-classifier"][0], ["--lr", "nan"], "--learning-rate", "finite"),
    (COMMANDS["train-classifier"][0], ["--learning-rate", "inf"], "--learning-rate", "finite"),
    (COMMANDS["train-classifier"][0], ["--learning-rate", "0"], "--learning-rate", "> 0"),
    (COMMANDS["train-classifier"][0], ["--epochs", "0"], "--epochs", "> 0"),
    (COMMANDS["train-classifier"][0], ["--max-length", "0"], "--max-length", ">= 8"),
    (COMMANDS["train-classifier"][0], ["--max-steps", "-2"], "--max-steps", ">= -1"),
    (COMMANDS["train-classifier"][0], ["--eval-batch-size", "0"], "--eval-batch-size", ">= 1"),
    (COMMANDS["filter"][0], ["--biased-k", "0"], "--biased-k", ">= 1"),
    (COMMANDS["filter"][0], ["--top-k", "0"], "--biased-k", ">= 1"),
    (COMMANDS["filter"][0], ["--zfilter-batch-size", "0"], "--zfilter-batch-size", ">= 1"),
    (COMMANDS["filter"][0], ["--min-z", "nan"], "--min-z", "finite"),
    (COMMANDS["stats"][0], ["--top", "0"], "--top", ">= 1"),
    (COMMANDS["stats"][0], ["--alpha", "1"], "--alpha", "< 1"),
    (COMMANDS["stats"][0], ["--min-n", "-1"], "--min-n", ">= 0"),
    (COMMANDS["convert"][0], ["--limit", "0"], "--limit", ">= 1"),
    (_SAMPLE, ["--top-k", "-1"], "--top-k", ">= 0"),
    (_SAMPLE, ["--top-p", "0"], "--top-p", "(0, 1]"),
    (_SAMPLE, ["--top-p", "1.5"], "--top-p", "(0, 1]"),
    (_SAMPLE, ["--temperature", "0"], "--temperature", "> 0"),
    (_SAMPLE, ["--n", "0"], "--n", ">= 1"),
    (_GENERATOR, ["--max-steps", "-3"], "--max-steps", ">= -1"),
    (_GENERATOR, ["--batch-size", "0"], "--batch-size", ">= 1"),
    (_GENERATOR, ["--epochs", "0"], "--epochs", "> 0"),
]
_RANGE = {
    ">= 1": "greater than or equal to 1",
    ">= 0": "greater than or equal to 0",
    ">= 8": "greater than or equal to 8",
    ">= -1": "greater than or equal to -1",
    "> 0": "greater than 0",
    "< 1": "less than 1",
    "<= 1": "less than or equal to 1",
    "(0, 1]": "must be in (0, 1]",
    "finite": "a finite number",
}


@pytest.mark.parametrize(
    ("template", "option", "flag", "bound"),
    OPTION_CASES,
    ids=[f"{t[0]}{' '.join(o)}" for t, o, _, _ in OPTION_CASES],
)
def test_option_abuse_names_the_option_and_range(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    template: list[str],
    option: list[str],
    flag: str,
    bound: str,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    args = [a.format(input=_three_labels(tmp_path), out=out) for a in template]
    if option[0] in args:  # the template's own value gives way (an option is given once)
        del args[args.index(option[0]) : args.index(option[0]) + 2]
    args += option
    code, err = _main(args, capsys)
    assert code == 2, err
    error = [line for line in err if line.startswith("error: ")]
    assert len(error) == 1 and error[0].startswith(f"error: {flag}: "), err
    assert _RANGE[bound] in error[0] and f"(got {option[1]}" in error[0].replace(".0)", ")")
    deprecated = option[0] != flag  # an old spelling: one warning line more
    assert len(err) - len(error) == (1 if deprecated else 0)
    assert list(out.iterdir()) == []


def test_one_record_is_refused_by_stats_and_filter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "one.jsonl", _jsonl([GOOD]))
    for command in ("stats", "filter"):
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        template, _ = COMMANDS[command]
        code, err = _main([a.format(input=path, out=out) for a in template], capsys)
        assert code == 2
        assert err == [f"error: {path}: only 1 labelled record(s); z-statistics need at least 2"]
        assert list(out.iterdir()) == []


def test_single_label_and_duplicate_ids_warn_with_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{**GOOD, "id": "x" if i < 4 else f"r{i}"} for i in range(7)] + [{**GOOD, "id": "r6"}]
    path = _write(tmp_path, "same.jsonl", _jsonl(rows))
    single = (
        f"{path}: all 8 records have the label 'entailment': z-statistics and filtering "
        "measure only the label imbalance"
    )
    dups = f"{path}: 4 records repeat an id (2 ids used more than once, e.g. 'x' 4 times)"
    for command in ("stats", "filter"):
        template, output = COMMANDS[command]
        code, err = _main(["-q", *[a.format(input=path, out=tmp_path) for a in template]], capsys)
        assert code == 0
        assert err[:2] == [single, dups]
        assert (tmp_path / output).exists()
    other = _three_labels(tmp_path, 3)
    args = ["--original", str(other), "--generated", str(path), "--out", str(tmp_path / "c")]
    code, err = _main(["-q", "combine", *args, "--recipe", "z-aug"], capsys)
    # issue 27: repeated ids are made unique in the output (was: repeated, with a warning)
    renamed = "records renamed ID@original / ID@generated (their own id in meta.input_id)"
    assert code == 0 and err == [single, dups, f"{other} and {path} repeat ids: 4 {renamed}"]
    combined = [json.loads(x) for x in (tmp_path / "c" / "combined.jsonl").read_text().splitlines()]
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert [r["id"] for r in combined[:3]] == ["r0", "r1", "r2"]  # Z-Aug keeps D0 whole
    assert len(combined) + summary["n_rejected"] == 3 + 8  # and partitions the generated set
    assert summary["n_ids_renamed"] == 4
    more = _write(tmp_path, "more.jsonl", _jsonl([{**GOOD, "id": f"r{i}"} for i in range(5)]))
    args = ["--original", str(other), "--generated", str(more), "--out", str(tmp_path / "c2")]
    code, err = _main(["-q", "combine", *args, "--recipe", "par-z"], capsys)
    assert code == 0
    assert err[-1] == f"{other} and {more} repeat ids: 3 {renamed}"
    out = [json.loads(x) for x in (tmp_path / "c2" / "combined.jsonl").read_text().splitlines()]
    out += [json.loads(x) for x in (tmp_path / "c2" / "rejected.jsonl").read_text().splitlines()]
    assert len({r["id"] for r in out}) == len(out) == 3 + 5


def test_bom_json_list_and_data_field_are_read(tmp_path: Path) -> None:
    rows = [GOOD, {**GOOD, "label": "neutral"}]
    bom = _write(tmp_path, "bom.json", b"\xef\xbb\xbf" + json.dumps(rows).encode())
    assert [r.label for r in read_records(bom)] == ["entailment", "neutral"]
    field = _write(tmp_path, "squad.json", json.dumps({"version": 2, "data": rows}).encode())
    assert [r.label for r in read_records(field)] == ["entailment", "neutral"]
    pretty = _write(tmp_path, "pretty.json", json.dumps({"data": rows}, indent=2).encode())
    assert len(read_records(pretty)) == 2
    lines = _write(tmp_path, "lines.json", _jsonl(rows))  # JSON lines named .json stay JSONL
    assert [r.id for r in read_records(lines)] == ["lines.json:1", "lines.json:2"]
    bom_lines = _write(tmp_path, "bl.jsonl", b"\xef\xbb\xbf" + _jsonl(rows))
    assert len(read_records(bom_lines)) == 2


@pytest.mark.parametrize("kind", sorted(EMPTY_FILES))
def test_inspect_describes_an_empty_input_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    name, data, fragment, line = EMPTY_FILES[kind]
    path = _write(tmp_path, name, data)
    code, err = _main(["inspect", str(path), "--json"], capsys)
    assert code == 0
    assert len(err) == 1 and err[0].startswith(f"warning: {path}:{line}: ") and fragment in err[0]


USAGE_CASES: list[tuple[list[str], str]] = [
    (
        ["sample", "--generator", "g", "--out", "{out}/s"],
        "Missing option '--n'. (see zdebias sample -h)",
    ),
    (
        ["combine", "--original", "{input}", "--generated", "{input}", "--recipe", "nope"],
        "Invalid value for '--recipe': Value error, 'nope' is not one of 'z-aug', 'par-z', "
        "'seq-z'. (see zdebias combine -h)",
    ),
    (["stats", "{input}", "--top", "abc"], "Invalid value for '--top': "),
    (["filter", "{input}", "--out", "{out}/f", "--no-such-flag"], "No such option: --no-such-flag"),
    (
        ["train-classifier", "--train", "{input}", "--out", "{out}/m", "--device", "gpu"],
        "'--device'",
    ),
    (["no-such-command"], "No such command 'no-such-command'. (see zdebias -h)"),
]


@pytest.mark.parametrize(("template", "message"), USAGE_CASES, ids=lambda v: str(v)[:30])
def test_usage_errors_are_one_line_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], template: list[str], message: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    code, err = _main([a.format(input=_three_labels(tmp_path), out=out) for a in template], capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert list(out.iterdir()) == []


def test_help_and_version_still_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(["filter", "-h"], capsys)[0] == 0
    assert _main(["--version"], capsys) == (0, [])


def test_skip_mode_with_nothing_left_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "a.jsonl", _jsonl([b"{bad", {**GOOD, "label": "maybe"}]))
    out = tmp_path / "out"
    out.mkdir()
    code, err = _main(["convert", str(path), str(out / "x.jsonl"), "--on-error", "skip"], capsys)
    assert code == 2
    assert err == [
        f"error: {path}:1: no labelled records in the input set: all 2 rows were bad and "
        "skipped (first: invalid JSON: Expecting property name enclosed in double quotes at "
        "column 2)"
    ]
    assert list(out.iterdir()) == []


def test_key_characters_inside_text_are_not_a_duplicate(tmp_path: Path) -> None:
    rows = [
        {"premise": 'He said "no": twice', "hypothesis": '" : x', "label": "neutral"},
        b'{"premise" :"a",  "hypothesis"\t: "b", "label":"neutral", "meta": {"x": 1.5}}',
        {**GOOD, "meta": {"a": {"label": 1}, "b": [{"label": 2}]}},
    ]
    records = read_records(_write(tmp_path, "a.jsonl", _jsonl(rows)))
    assert [r.premise for r in records] == ['He said "no": twice', "a", GOOD["premise"]]


def test_duplicate_key_rows_are_skipped_and_counted(tmp_path: Path) -> None:
    dup = b'{"premise": "a", "hypothesis": "b", "label": "entailment", "label": "neutral"}'
    ds = open_dataset(_write(tmp_path, "a.jsonl", _jsonl([GOOD, dup, GOOD])), on_error="skip")
    assert len(list(ds)) == 2
    assert [str(e) for e in ds.report.errors] == [
        f"{tmp_path / 'a.jsonl'}:2: field 'label': duplicate key: the object gives it 2 times "
        "(only one value can be read)"
    ]


@pytest.mark.parametrize(("name", "sep"), [("a.csv", ","), ("a.tsv", "\t")])
def test_a_field_of_200000_characters_is_read(tmp_path: Path, name: str, sep: str) -> None:
    long = "word " * 40_000  # 200,000 characters; the csv module's default limit is 131,072
    data = sep.join(["premise", "hypothesis", "label"]) + "\n"
    data += sep.join([long.strip(), "A short one.", "neutral"]) + "\n"
    data += sep.join(["Two", "Three", "entailment"]) + "\n"
    records = read_records(_write(tmp_path, name, data.encode()))
    assert [len(r.premise or "") for r in records] == [199_999, 3]
    assert [r.label for r in records] == ["neutral", "entailment"]
