"""Issue 40: nothing a user gave is deleted or dropped by the readers: every row's own fields
count, a key or mapping entry given twice is an error, the unknown-label hint never proposes
a wrong mapping, and every command that reads records warns about repeated ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli_main import run_main
from zdebias.data import open_dataset, read_records

ROWS = [
    {"premise": "A man sleeps.", "hypothesis": "A person rests.", "label": "entailment"},
    {
        "id": "my-id-2",
        "premise": "A dog runs.",
        "hypothesis": "An animal moves.",
        "label": "neutral",
        "genre": "fiction",
    },
    {"premise": "A cat.", "hypothesis": "A dog.", "label": "contradiction"},
]


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_later_row_keeps_its_own_id_and_fields(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "d.jsonl", ROWS)
    records = read_records(src)
    assert [r.id for r in records] == ["d.jsonl:1", "my-id-2", "d.jsonl:3"]
    assert [r.meta for r in records] == [{}, {"genre": "fiction"}, {}]


def test_a_later_row_without_the_first_rows_id_is_named_by_its_line_and_counted(
    tmp_path: Path,
) -> None:
    rows = [{**ROWS[1], "id": "a"}, ROWS[0], {**ROWS[2], "guid": "g-3"}, {**ROWS[0], "id": ""}]
    ds = open_dataset(_jsonl(tmp_path / "d.jsonl", rows))
    assert [r.id for r in ds] == ["a", "d.jsonl:2", "g-3", "d.jsonl:4"]
    assert ds.report.n_derived_ids == 2
    assert ds.report.derived_ids == ["d.jsonl:2", "d.jsonl:4"]
    assert ds.report.summary()["n_derived_ids"] == 2
    assert ds.report.derived_ids_line() == (
        f"{ds.spec}: 2 of 4 records give no id (the others do); they are named FILE:LINE: "
        "d.jsonl:2, d.jsonl:4"
    )


def test_a_file_without_ids_names_rows_by_line_without_a_warning(tmp_path: Path) -> None:
    ds = open_dataset(_jsonl(tmp_path / "d.jsonl", [ROWS[0], ROWS[2]]))
    assert [r.id for r in ds] == ["d.jsonl:1", "d.jsonl:2"]
    assert ds.report.n_derived_ids == 2 and ds.report.derived_ids_line() is None


def test_the_users_id_column_holds_for_every_row(tmp_path: Path) -> None:
    rows = [{**ROWS[0], "key": "k1"}, {**ROWS[2], "key": "k2", "id": "other"}]
    records = read_records(_jsonl(tmp_path / "d.jsonl", rows), columns={"id": "key"})
    assert [r.id for r in records] == ["k1", "k2"]
    assert records[1].meta == {"id": "other"}


def test_convert_keeps_row_2s_id_and_field_and_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _jsonl(tmp_path / "d.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    assert run_main(["convert", src, out]) == 0
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert written[1] == {
        "id": "my-id-2",
        "premise": "A dog runs.",
        "hypothesis": "An animal moves.",
        "label": "neutral",
        "meta": {"genre": "fiction"},
    }
    err = capsys.readouterr().err
    assert "2 of 3 records give no id (the others do); they are named FILE:LINE: " in err
    assert "d.jsonl:1, d.jsonl:3" in err


def test_the_sharded_read_adds_up_the_workers_line_ids() -> None:
    from zdebias.stats.execution.merge import merged_report

    def part(n: int, first: int, n_derived: int) -> dict[str, object]:
        ids = [f"d.jsonl:{first + i}" for i in range(min(n_derived, 10))]
        return {
            "report": ("nli", n, 0),
            "label_map": (None, "names"),
            "unlabelled_lines": [],
            "errors": [],
            "derived_ids": (n_derived, ids),
        }

    report = merged_report("d.jsonl", [part(20, 1, 8), part(20, 21, 12)])
    assert report.n_records == 40 and report.n_derived_ids == 20
    assert report.derived_ids == [f"d.jsonl:{i}" for i in (1, 2, 3, 4, 5, 6, 7, 8, 21, 22)]


def test_key_characters_inside_a_json_documents_text_are_not_a_duplicate(tmp_path: Path) -> None:
    rows = [
        {"premise": 'He said "no": twice', "hypothesis": '" : x', "label": "neutral"},
        {**ROWS[1], "meta": {"a": {"label": 1}, "b": [{"label": 2}]}},
    ]
    src = tmp_path / "d.json"
    src.write_text(json.dumps({"data": rows}), encoding="utf-8")
    records = read_records(src)
    assert [r.premise for r in records] == ['He said "no": twice', "A dog runs."]
    assert records[1].meta == {"a": {"label": 1}, "b": [{"label": 2}], "genre": "fiction"}


def test_a_json_documents_duplicate_key_row_is_skipped_and_counted(tmp_path: Path) -> None:
    src = tmp_path / "d.json"
    src.write_bytes(
        b'[{"premise": "a", "hypothesis": "b", "label": "neutral", "label": "entailment"},'
        b' {"premise": "c", "hypothesis": "d", "label": "neutral"}]'
    )
    ds = open_dataset(src, on_error="skip")
    assert [r.premise for r in ds] == ["c"]
    assert [str(e) for e in ds.report.errors] == [
        f"{src}:1: field 'label': duplicate key: the object gives it 2 times "
        "(only one value can be read)"
    ]


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        (
            "--label-map",
            "0=entailment,0=neutral,1=neutral",
            "error: bad label mapping '0=entailment,0=neutral,1=neutral': '0' is given twice "
            "(0=entailment and 0=neutral); give each key once",
        ),
        (
            "--label-map",
            "Neutral=entailment,neutral=neutral",
            "error: --label-map: 'Neutral' and 'neutral' name the same raw label "
            "(Neutral=entailment and neutral=neutral); give each raw label once",
        ),
        (
            "--columns",
            "premise=a,hypothesis=b,premise=c",
            "error: bad column mapping 'premise=a,hypothesis=b,premise=c': 'premise' is given "
            "twice (premise=a and premise=c); give each key once",
        ),
    ],
)
def test_a_mapping_giving_a_key_twice_is_exit_2_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    src = _jsonl(tmp_path / "d.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    assert run_main(["convert", src, out, option, value]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [message]
    assert not out.exists()


def test_python_label_maps_naming_one_raw_label_twice_are_refused(tmp_path: Path) -> None:
    from zdebias.data.options import ReadOptions
    from zdebias.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        ReadOptions(label_map={0: "entailment", "0": "neutral"})
    assert str(info.value) == (
        "label_map: 0 and '0' name the same raw label (0=entailment and 0=neutral); "
        "give each raw label once"
    )
    with pytest.raises(ConfigError, match="'Yes' and 'yes ' name the same raw label"):
        read_records(
            _jsonl(tmp_path / "d.jsonl", ROWS), label_map={"Yes": "entailment", "yes ": "neutral"}
        )


def test_a_recipe_giving_a_key_twice_names_both_lines(tmp_path: Path) -> None:
    from zdebias.errors import ConfigError
    from zdebias.pipeline.loader import load_recipe

    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "task: nli\ndata:\n  train:\n    path: d.jsonl\n    label_map: {0: entailment}\n"
        "    label_map: {0: neutral}\nstages: {}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        load_recipe(recipe)
    assert str(info.value) == (
        f"{recipe}:6: field 'label_map': given twice (lines 5 and 6); only one value can be read"
    )
    merged = tmp_path / "m.yaml"
    merged.write_text("base: &b {a: 1, b: 2}\nx:\n  <<: *b\n  a: 3\n", encoding="utf-8")
    from zdebias.data.documents import read_document

    assert read_document(merged, missing="")["x"] == {"a": 3, "b": 2}  # a merge may be overridden


_NEAREST = " (the nearest label by spelling)"


@pytest.mark.parametrize(
    ("label", "hint"),
    [
        ("entailmnet", "say what it means with --label-map entailmnet=entailment" + _NEAREST),
        (
            "Contradction",
            "say what it means with --label-map contradction=contradiction" + _NEAREST,
        ),
        ("maybe", "say what it means with --label-map maybe=LABEL"),
    ],
)
def test_the_unknown_label_hint_proposes_the_nearest_spelling_or_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], label: str, hint: str
) -> None:
    src = _jsonl(tmp_path / "d.jsonl", [ROWS[0], {**ROWS[2], "label": label}])
    assert run_main(["inspect", src]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        f"error: {src}:2: field 'label': unknown label {label!r}; expected one of entailment, "
        f"neutral, contradiction (task nli); {hint}"
    )


def test_a_maps_hint_proposes_no_label_the_map_does_not_fix() -> None:
    from zdebias.data.labels import get_task, unmapped_hint

    nli = get_task("nli")
    assert unmapped_hint(nli, "2", {"0": "entailment"}, "--label-map") == (
        "it is not a key of --label-map 0=entailment; add it, e.g. --label-map 0=entailment,2=LABEL"
    )
    assert unmapped_hint(nli, "nuetral", {"0": "entailment"}, "label_map") == (
        "it is not a key of label_map={'0': 'entailment'}; add it, e.g. "
        "label_map={'0': 'entailment', 'nuetral': 'neutral'}"
    )


def test_inspect_convert_and_train_classifier_warn_about_repeated_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import zdebias.classify.train as train_module

    def fake(train: object, dev: object, out: object, settings: object, **_: object) -> dict:
        best = {"step": 1, "epoch": 1.0, "dev_accuracy": 0.5}
        return {"n_train": 5, "n_dev": 5, "steps": 1, "best": best, "train_samples_per_second": 1}

    monkeypatch.setattr(train_module, "train_classifier", fake)
    ids = ["x", "x", "x", "y", "y", "z"]
    labels = ["entailment", "neutral", "contradiction"]
    rows = [{**ROWS[0], "id": i, "label": labels[n % 3]} for n, i in enumerate(ids)]
    src = _jsonl(tmp_path / "d.jsonl", rows)
    dups = f"{src}: 3 records repeat an id (2 ids used more than once, e.g. 'x' 3 times)"
    assert run_main(["-q", "inspect", src, "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [dups]
    assert json.loads(captured.out)["warnings"] == [dups]
    assert run_main(["-q", "convert", src, tmp_path / "o.jsonl"]) == 0
    assert capsys.readouterr().err.strip().splitlines() == [dups]
    args = ["-q", "train-classifier", "--train", src, "--dev", src, "--out", tmp_path / "m"]
    assert run_main(args) == 0
    assert capsys.readouterr().err.strip().splitlines() == [dups, dups]
    unique = _jsonl(tmp_path / "u.jsonl", [{**r, "id": f"u{n}"} for n, r in enumerate(rows)])
    assert run_main(["-q", "convert", unique, tmp_path / "u-out.jsonl"]) == 0
    assert capsys.readouterr().err == ""
