"""Selecting rows by a column (issue 39, item 3) and one mapping rule for every input (item 4).

A SICK-style file names each row's split in a column: ``--where SemEval_set=TRAIN`` (the same
``where`` in Python and in a recipe's ``data:`` entry) reads only those rows, before any
mapping (the TEST rows' odd labels never fail the read), and counts the rows left out. An
input's own reader options follow its path: ``PATH::KEY=VALUE;KEY=VALUE``. A misspelt column
lists the columns the input has; the Python API names ``columns=``, not ``--columns``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli_main import run_main
from zdebias.data.options import ReadOptions, split_input
from zdebias.errors import ConfigError, DataError

HEADER = ["pair_ID", "sentence_A", "sentence_B", "entailment_label", "SemEval_set"]
#: 6 TRAIN rows, 2 TRIAL, 2 TEST (whose label no task knows)
ROWS = [
    ("1", "A man is running.", "A person moves.", "ENTAILMENT", "TRAIN"),
    ("2", "A dog is sleeping.", "A cat is sleeping.", "NEUTRAL", "TRAIN"),
    ("3", "A kid is eating.", "Nobody is eating.", "CONTRADICTION", "TRAIN"),
    ("4", "A woman sings.", "A woman makes a sound.", "ENTAILMENT", "TRAIN"),
    ("5", "A man plays.", "A man plays a guitar.", "NEUTRAL", "TRAIN"),
    ("6", "Two boys swim.", "Nobody swims.", "CONTRADICTION", "TRAIN"),
    ("7", "A girl reads.", "A child reads.", "ENTAILMENT", "TRIAL"),
    ("8", "A cook fries eggs.", "Nobody cooks.", "CONTRADICTION", "TRIAL"),
    ("9", "A man walks.", "A man is outside.", "UNSURE", "TEST"),
    ("10", "A cat eats.", "An animal eats.", "UNSURE", "TEST"),
]
COLUMNS = "premise=sentence_A,hypothesis=sentence_B,label=entailment_label,id=pair_ID"


def _sick(tmp_path: Path) -> str:
    path = tmp_path / "SICK.txt"
    lines = ["\t".join(HEADER), *("\t".join(row) for row in ROWS)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]


def test_where_reads_the_train_rows_before_mapping_and_counts_the_rest(tmp_path: Path) -> None:
    path = _sick(tmp_path)
    # without a selection the TEST rows' label stops the read (line 10: the first TEST row)
    with pytest.raises(DataError, match=r"SICK.txt:10: field 'entailment_label': unknown label"):
        ReadOptions(columns=COLUMNS).read(path)
    records, report = ReadOptions(columns=COLUMNS, where="SemEval_set=TRAIN").read(path)
    assert [r.id for r in records] == ["1", "2", "3", "4", "5", "6"]
    assert [r.label for r in records[:3]] == ["entailment", "neutral", "contradiction"]
    assert records[0].meta == {"SemEval_set": "TRAIN"}  # the column is kept, not required
    assert (report.n_records, report.n_skipped_by_where, report.n_errors) == (6, 4, 0)
    assert report.n_rows == 10
    summary = report.summary()
    assert summary["where"] == {"SemEval_set": "TRAIN"}
    assert summary["n_skipped_by_where"] == 4
    # alternatives, and a limit counts the selected records only
    records, report = ReadOptions(columns=COLUMNS, where="SemEval_set=TRAIN|TRIAL").read(path)
    assert [r.id for r in records][-2:] == ["7", "8"]
    assert (report.n_records, report.n_skipped_by_where) == (8, 2)
    records, _ = ReadOptions(columns=COLUMNS, where="SemEval_set=TRIAL", limit=1).read(path)
    assert [r.id for r in records] == ["7"]
    # several conditions must all hold; numbers are compared as the file writes them
    records, report = ReadOptions(columns=COLUMNS, where="SemEval_set=TRAIN,pair_ID=2|5").read(path)
    assert [r.id for r in records] == ["2", "5"]
    assert report.n_skipped_by_where == 8
    # a read without a selection keeps the summary as it was
    assert "where" not in ReadOptions().read(_plain(tmp_path))[1].summary()


def _plain(tmp_path: Path) -> Path:
    path = tmp_path / "plain.jsonl"
    rows = [
        {"premise": "A man sleeps.", "hypothesis": "A man rests.", "label": "entailment", "n": 1},
        {"premise": "A man sleeps.", "hypothesis": "He is awake.", "label": "contradiction"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _filter_sick(tmp_path: Path, where: str) -> tuple[Path, Path, int]:
    """``zdebias filter`` on the SICK-shaped file with ``--where``: its path, --out, exit code."""
    path, out = _sick(tmp_path), tmp_path / "out"
    args = ["--columns", COLUMNS, "--where", where, "--out", out]
    return path, out, run_main(["filter", path, *args])


def test_where_on_json_values_and_missing_keys(tmp_path: Path) -> None:
    # a JSON number is compared as its digits; a row without the key holds ""
    records, report = ReadOptions(where={"n": 1}).read(_plain(tmp_path))
    assert [r.hypothesis for r in records] == ["A man rests."]
    assert report.n_skipped_by_where == 1


def test_a_misspelt_where_column_lists_the_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, out, code = _filter_sick(tmp_path, "semeval_set=TRAIN")
    assert code == 2
    assert _error_line(capsys) == (
        f"error: {path}: --where semeval_set=TRAIN: no column 'semeval_set'; the columns are "
        "pair_ID, sentence_A, sentence_B, entailment_label, SemEval_set"
    )
    assert not out.exists()


def test_a_value_no_row_holds_says_what_the_rows_hold(tmp_path: Path) -> None:
    with pytest.raises(DataError) as info:
        ReadOptions(columns=COLUMNS, where="SemEval_set=train").read(_sick(tmp_path), what="input")
    assert str(info.value).endswith(
        "SICK.txt: no labelled records in the input set: no row matches SemEval_set=train: "
        "'SemEval_set' holds 'TRAIN' (6), 'TRIAL' (2), 'TEST' (2)"
    )


def test_filter_where_counts_the_rows_left_out_in_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, out, code = _filter_sick(tmp_path, "SemEval_set=TRAIN")
    assert code == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["read"]["n_records"] == 6
    assert summary["read"]["n_skipped_by_where"] == 4
    assert summary["read"]["where"] == {"SemEval_set": "TRAIN"}
    written = [
        json.loads(line)["id"]
        for name in ("kept.jsonl", "rejected.jsonl")
        for line in (out / name).read_text(encoding="utf-8").splitlines()
    ]
    assert sorted(written, key=int) == ["1", "2", "3", "4", "5", "6"]
    err = capsys.readouterr().err
    assert f"{path}: left out 4 rows not selected by --where SemEval_set=TRAIN" in err


def test_a_misspelt_mapped_column_lists_the_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _sick(tmp_path)
    bad = COLUMNS.replace("sentence_A", "sentence_a")
    assert run_main(["stats", path, "--columns", bad, "--where", "SemEval_set=TRAIN"]) == 2
    assert _error_line(capsys) == (
        f"error: {path}: --columns premise=sentence_a: no column 'sentence_a'; the columns "
        "are pair_ID, sentence_A, sentence_B, entailment_label, SemEval_set"
    )


def test_an_input_carries_its_own_reader_options() -> None:
    assert split_input("SICK.txt::columns=premise=a,hypothesis=b;where=split=TRAIN|TRIAL") == (
        "SICK.txt",
        {"columns": "premise=a,hypothesis=b", "where": "split=TRAIN|TRIAL"},
    )
    # a triplet folder's split stays in the path; the options follow it
    assert split_input("mnli_hard::test") == ("mnli_hard::test", {})
    assert split_input("mnli_hard::test::task=nli;on-error=skip") == (
        "mnli_hard::test",
        {"task": "nli", "on_error": "skip"},
    )
    assert split_input("data/kept.jsonl::label-map=0=entailment") == (
        "data/kept.jsonl",
        {"label_map": "0=entailment"},
    )
    with pytest.raises(ConfigError, match=r"bad input option 'colums=a' in 'x.tsv::colums=a'"):
        split_input("x.tsv::colums=a")
    with pytest.raises(ConfigError, match="expected PATH"):
        split_input("x::task=nli::dev")
    # each given option replaces the command's for that input; an empty one resets it
    shared = ReadOptions(columns=COLUMNS, where="SemEval_set=TRAIN", on_error="skip")
    path, own = shared.for_input("kept.jsonl::columns=;where=;limit=3")
    assert path == "kept.jsonl"
    assert own == ReadOptions(on_error="skip", limit=3)
    with pytest.raises(ConfigError, match=r"^kept.jsonl: limit: "):
        shared.for_input("kept.jsonl::limit=many")


def test_one_command_reads_each_input_with_its_own_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sick = _sick(tmp_path)
    kept = _plain(tmp_path)
    # the command's options apply to the SICK file; kept.jsonl resets them for itself
    out = tmp_path / "both"
    args = ["combine", "--original", f"{sick}::where=SemEval_set=TRAIN"]
    args += ["--generated", f"{kept}::columns=", "--columns", COLUMNS, "--out", out, "--json"]
    args += ["--recipe", "z-aug"]
    assert run_main(args) == 0, capsys.readouterr().err
    result = json.loads(capsys.readouterr().out)
    assert (result["n_original"], result["n_generated"]) == (6, 2)
    assert result["read_original"]["n_skipped_by_where"] == 4
    assert "where" not in result["read_generated"]


def test_python_api_names_the_python_arguments(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    import zdebias

    df = pd.DataFrame(ROWS, columns=HEADER)
    columns = {"premise": "sentence_a", "hypothesis": "sentence_B", "label": "entailment_label"}
    with pytest.raises(ConfigError) as info:
        zdebias.z_filter(df, columns=columns)
    assert str(info.value) == (
        "DataFrame: columns={'premise': 'sentence_a'}: no column 'sentence_a'; the columns are "
        "pair_ID, sentence_A, sentence_B, entailment_label, SemEval_set"
    )
    with pytest.raises(DataError) as missing:
        zdebias.z_filter(df, task="nli", columns={"label": "entailment_label"})
    assert str(missing.value).endswith("map them with columns={'premise': 'COLUMN'}")
    assert "--" not in str(missing.value)
    with pytest.raises(ConfigError, match=r"^DataFrame: where SemEval=TRAIN: no column"):
        zdebias.z_filter(df, columns=COLUMNS, where={"SemEval": "TRAIN"})
    out, summary = zdebias.z_filter(
        df, columns=COLUMNS, where="SemEval_set=TRAIN", return_summary=True
    )
    assert len(out) == 10
    assert out["rejected_by"].isna().tolist() == [False] * 6 + [True] * 4  # rows not read
    assert summary["read"]["n_skipped_by_where"] == 4


def test_a_recipe_data_entry_selects_rows(tmp_path: Path) -> None:
    from zdebias.data.labels import get_task
    from zdebias.pipeline.config import DataSpec
    from zdebias.pipeline.registry import read_data

    spec = DataSpec(path=_sick(tmp_path), columns=COLUMNS, where={"SemEval_set": "TRIAL"})
    assert [r.id for r in read_data(spec, get_task("nli"))] == ["7", "8"]
    # unset, it is not part of the options a stage hash is made of
    assert "where" not in DataSpec(path="x").model_dump(mode="json")
    # the CLI's PATH::KEY=VALUE form in a recipe is the same entry
    short = DataSpec(path=f"{spec.path}::where=SemEval_set=TRIAL;columns={COLUMNS}")
    assert short == spec
    with pytest.raises(ConfigError, match="'where' given twice"):
        DataSpec(path="x.tsv::where=a=b", where={"a": "c"})
