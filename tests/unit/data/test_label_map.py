"""Raw labels are read as the input says, never by position (issue 27, items 1 and 3).

A plain file's numbers (or any raw label that is not a name of the task) need ``--label-map``
(``label_map=`` in Python): without it, exit 2 and one located line that names the flag and
shows an example; a map that leaves a raw label out is a located error too. ``hf``/datasets
inputs read a ``ClassLabel``'s own names. Every summary records the mapping used. One
spelling, ``labels:a,b``, for custom label sets of pair and single-text data.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from helpers.cli_main import run_main
from zdebias.data import open_dataset, read_records
from zdebias.data.options import ReadOptions
from zdebias.errors import ConfigError, DataError

# the issue's file: 0 = contradiction, 1 = neutral, 2 = entailment, own column names
MEANING = {0: "contradiction", 1: "neutral", 2: "entailment"}
CLAIMS = {0: "Nobody is outside", 1: "A tall person walks to work", 2: "A person is outside"}
COLUMNS = "premise=ctx,hypothesis=claim,label=y"
FULL_MAP = "0=contradiction,1=neutral,2=entailment"


def _rows(n: int = 60) -> list[dict[str, object]]:
    return [
        {
            "id": f"r{i}",
            "ctx": f"A person in shirt number {i} walks in the park.",
            "claim": CLAIMS[i % 3],
            "y": i % 3,
        }
        for i in range(n)
    ]


def _csv(tmp_path: Path, name: str = "nli.csv") -> Path:
    path = tmp_path / name
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, ["id", "ctx", "claim", "y"])
        writer.writeheader()
        writer.writerows(_rows())
    return path


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_integer_labels_without_a_map_exit_2_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _csv(tmp_path)
    out = tmp_path / "out"
    assert run_main(["filter", path, "--columns", COLUMNS, "--out", out]) == 2
    line = _error_line(capsys)
    assert line.startswith(f"error: {path}:2: field 'y': unknown label '0'; ")
    assert "expected one of entailment, neutral, contradiction (task nli)" in line
    assert line.endswith(
        "say what it means with --label-map 0=entailment,1=neutral,2=contradiction "
        "(the SNLI/MNLI order on the hub)"
    )
    assert not out.exists()


def test_full_map_reads_the_labels_right(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _csv(tmp_path)
    out = tmp_path / "out"
    args = ["--columns", COLUMNS, "--label-map", FULL_MAP]
    assert run_main(["filter", path, *args, "--out", out]) == 0
    written = [
        json.loads(line)
        for name in ("kept.jsonl", "rejected.jsonl")
        for line in (out / name).read_text(encoding="utf-8").splitlines()
    ]
    by_id = {r["id"]: r["label"] for r in written}
    assert by_id == {f"r{i}": MEANING[i % 3] for i in range(60)}
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["read"]["label_map"] == {"0": "contradiction", "1": "neutral", "2": "entailment"}
    assert summary["read"]["label_map_from"] == "label_map"
    capsys.readouterr()
    assert run_main(["stats", path, *args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # "nobody" favours contradiction, as the file says (by position it was entailment)
    assert "nobody@hypothesis" in [row["feature"] for row in report["top"]["contradiction"]]
    assert "nobody@hypothesis" not in [row["feature"] for row in report["top"]["entailment"]]
    assert report["read"]["label_map_from"] == "label_map"


def test_a_raw_label_the_map_leaves_out_is_a_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _csv(tmp_path)
    partial = ["--columns", COLUMNS, "--label-map", "0=contradiction,1=neutral"]
    assert run_main(["filter", path, *partial, "--out", tmp_path / "out"]) == 2
    line = _error_line(capsys)
    assert line.startswith(f"error: {path}:4: field 'y': unknown label '2'; ")
    assert line.endswith(
        "it is not a key of --label-map 0=contradiction,1=neutral; add it, e.g. "
        "--label-map 0=contradiction,1=neutral,2=entailment"
    )
    # under --on-error skip it is a bad row like any other: skipped, counted, located
    records, report = ReadOptions(
        columns=COLUMNS, label_map="0=contradiction,1=neutral", on_error="skip"
    ).read(path)
    assert Counter(r.label for r in records) == {"contradiction": 20, "neutral": 20}
    assert report.n_errors == 20 and [e.line for e in report.errors[:2]] == [4, 7]


def test_a_map_value_that_is_no_label_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"--label-map: 2=maybe: 'maybe' is not a label of task nli"
    ):
        ReadOptions(columns=COLUMNS, label_map="0=contradiction,2=maybe").read(_csv(tmp_path))


def test_sharded_filter_records_the_map_and_locates_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nli.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows()), encoding="utf-8")
    args = ["--columns", COLUMNS, "--num-proc", "2"]
    assert run_main(["filter", path, *args, "--out", tmp_path / "bad"]) == 2
    assert _error_line(capsys).startswith(f"error: {path}:1: field 'y': unknown label '0'; ")
    out = tmp_path / "out"
    assert run_main(["filter", path, *args, "--label-map", FULL_MAP, "--out", out]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["read"]["label_map"] == {"0": "contradiction", "1": "neutral", "2": "entailment"}
    kept = [json.loads(x) for x in (out / "kept.jsonl").read_text().splitlines()]
    assert all(r["label"] == MEANING[int(r["id"][1:]) % 3] for r in kept)


def test_python_api_integer_labels(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    import zdebias

    df = pd.DataFrame(_rows())
    columns = {"premise": "ctx", "hypothesis": "claim", "label": "y"}
    with pytest.raises(DataError) as info:
        zdebias.z_filter(df, columns=columns)
    assert str(info.value).startswith("DataFrame:0: field 'y': unknown label '0'; ")
    assert str(info.value).endswith(
        "say what it means with label_map={'0': 'entailment', '1': 'neutral', "
        "'2': 'contradiction'} (the SNLI/MNLI order on the hub)"
    )
    # the keys as the data holds them (ints) or as text
    out, summary = zdebias.z_filter(
        df,
        columns=columns,
        label_map={0: "contradiction", "1": "neutral", 2: "entailment"},
        return_summary=True,
    )
    assert len(out) == 60
    assert summary["read"]["label_map"] == {"0": "contradiction", "1": "neutral", "2": "entailment"}
    found = zdebias.find_shortcuts(
        df, columns=columns, label_map={0: "contradiction", 1: "neutral", 2: "entailment"}
    )
    top = found.table[found.table["label"] == "contradiction"]["feature"].tolist()
    assert "nobody@hypothesis" in top


def test_hf_classlabel_names_decide_not_positions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    datasets = pytest.importorskip("datasets")
    names = ["contradiction", "neutral", "entailment"]  # not the task's order
    features = datasets.Features(
        {
            "premise": datasets.Value("string"),
            "hypothesis": datasets.Value("string"),
            "label": datasets.ClassLabel(names=names),
        }
    )
    rows = _rows()
    ds = datasets.Dataset.from_dict(
        {
            "premise": [r["ctx"] for r in rows] + ["An unlabelled pair."],
            "hypothesis": [r["claim"] for r in rows] + ["No gold label."],
            "label": [r["y"] for r in rows] + [-1],
        },
        features=features,
    )
    folder = tmp_path / "hfdata"
    ds.save_to_disk(str(folder))
    reader = open_dataset(folder)
    records = list(reader)
    assert [r.label for r in records] == [MEANING[i % 3] for i in range(60)]
    assert reader.report.n_unlabelled == 1
    assert reader.report.label_map == {"0": "contradiction", "1": "neutral", "2": "entailment"}
    assert reader.report.label_map_from == "ClassLabel"
    out = tmp_path / "out"
    assert run_main(["filter", folder, "--out", out]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["read"]["label_map_from"] == "ClassLabel"
    assert summary["read"]["label_map"]["0"] == "contradiction"


def test_glue_sst2_layout_is_a_named_convention(tmp_path: Path) -> None:
    body = "sentence\tlabel\na fine film .\t1\na dull film .\t0\n"
    (tmp_path / "dev.tsv").write_text(body, encoding="utf-8")
    reader = open_dataset(tmp_path / "dev.tsv")
    assert [r.label for r in reader] == ["positive", "negative"]
    assert (reader.report.label_map_from, reader.report.label_map) == (
        "glue-sst2",
        {"0": "negative", "1": "positive"},
    )
    # the same numbers in another layout (a CSV, other columns) need the map
    (tmp_path / "dev.csv").write_text(body.replace("\t", ","), encoding="utf-8")
    with pytest.raises(
        DataError,
        match=r"dev.csv:2: field 'label': unknown label '1'.*--label-map 0=negative,1=positive",
    ):
        read_records(tmp_path / "dev.csv")
    (tmp_path / "other.tsv").write_text(body.replace("sentence", "text"), encoding="utf-8")
    with pytest.raises(DataError, match="unknown label '1'"):
        read_records(tmp_path / "other.tsv")
    # an explicit map wins over the convention, and says so
    flipped = open_dataset(tmp_path / "dev.tsv", label_map={"0": "positive", "1": "negative"})
    assert [r.label for r in flipped] == ["negative", "positive"]
    assert flipped.report.label_map_from == "label_map"


def test_names_need_no_map_and_say_so(tmp_path: Path) -> None:
    path = tmp_path / "named.jsonl"
    rows = [{"premise": "A b.", "hypothesis": "C d.", "label": x} for x in ("Entailment", "-")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    records, report = ReadOptions().read(path)
    assert [r.label for r in records] == ["entailment"] and report.n_unlabelled == 1
    assert (report.summary()["label_map"], report.summary()["label_map_from"]) == (None, "names")


def _texts(tmp_path: Path) -> Path:
    path = tmp_path / "reviews.jsonl"
    rows = [
        {
            "id": f"t{i}",
            "text": f"film {i} was {'awful' if i % 3 == 0 else 'great'}",
            "label": "bad" if i % 3 == 0 else "good",
        }
        for i in range(30)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_custom_labels_on_single_text_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _texts(tmp_path)
    args = ["--task", "labels:bad,good", "--columns", "text=text"]
    assert run_main(["stats", path, *args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["label_counts"] == {"bad": 10, "good": 20}
    assert report["read"]["task"] == "labels:bad,good"
    out = tmp_path / "out"
    assert run_main(["filter", path, *args, "--out", out]) == 0
    kept = (out / "kept.jsonl").read_text().splitlines()
    rejected = (out / "rejected.jsonl").read_text().splitlines()
    assert len(kept) + len(rejected) == 30 and json.loads(kept[0])["text"].startswith("film")
    # the old spelling still reads, as labels:
    capsys.readouterr()
    assert run_main(["inspect", path, "--task", "text-labels:bad,good", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["task"] == "labels:bad,good" and info["label_counts"] == {"bad": 10, "good": 20}
    # and the same spelling reads pair data, and the Python API takes it too
    import zdebias

    pairs = [
        {"premise": "P.", "hypothesis": f"H {i}.", "label": ("yes", "no")[i % 2]} for i in range(8)
    ]
    records, report = ReadOptions(task="labels:yes,no").read(_jsonl(tmp_path, pairs))
    assert records[0].is_pair and Counter(r.label for r in records) == {"yes": 4, "no": 4}
    texts = [json.loads(x) for x in path.read_text().splitlines()]
    found = zdebias.find_shortcuts(texts, task="labels:bad,good")
    assert found.summary["label_counts"] == {"bad": 10, "good": 20}


def _jsonl(tmp_path: Path, rows: list[dict[str, object]]) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_recipes_take_labels_for_single_text_and_note_the_map(tmp_path: Path) -> None:
    from zdebias.pipeline.loader import recipe_from_dict
    from zdebias.pipeline.runner import run_recipe

    recipe = recipe_from_dict(
        {
            "name": "custom-text",
            "task": "labels:bad,good",
            "data": {"train": str(_texts(tmp_path))},
            "stages": {"zs": {"stage": "stats", "input": "train"}},
        }
    )
    run_recipe(recipe, tmp_path / "run")
    stats = json.loads((tmp_path / "run" / "zs" / "stats.json").read_text(encoding="utf-8"))
    assert stats["label_counts"] == {"bad": 10, "good": 20}
    path = _csv(tmp_path)
    spec = {"path": str(path), "columns": COLUMNS, "label_map": FULL_MAP}
    recipe = recipe_from_dict(
        {
            "name": "mapped",
            "task": "nli",
            "data": {"train": spec},
            "stages": {"zf": {"stage": "filter", "input": "train"}},
        }
    )
    manifest = run_recipe(recipe, tmp_path / "run2")
    notes = {s["name"]: s.get("notes", []) for s in manifest["stages"]}
    assert (
        f"{path}: raw labels read as 0=contradiction, 1=neutral, 2=entailment (label_map)"
        in notes["zf"]
    )


def test_a_generator_of_custom_labels_writes_single_texts(tiny_model, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from zdebias.data.schema import Record
    from zdebias.generation.format import GeneratorFormat
    from zdebias.generation.trainer import train_generator

    texts = [Record(f"t{i}", ("bad", "good")[i % 2], text=f"film {i} was fine") for i in range(8)]
    out = tmp_path / "gen"
    train_generator(
        texts, tiny_model("gpt2"), out, task="labels:bad,good", max_steps=1, progress=False
    )
    fmt = GeneratorFormat.load(out)
    assert (fmt.task, fmt.labels, fmt.pair) == ("labels:bad,good", ["bad", "good"], False)


def test_real_sst2_reads_by_the_glue_convention() -> None:
    import os

    root = Path(os.environ.get("ZDEBIAS_TEST_DATA", "../shared/data")) / "sst2" / "dev.tsv"
    if not root.is_file():
        pytest.skip("no shared data")
    records, report = ReadOptions().read(root)
    assert Counter(r.label for r in records) == {"negative": 428, "positive": 444}
    assert (report.label_map_from, report.label_map) == (
        "glue-sst2",
        {"0": "negative", "1": "positive"},
    )
