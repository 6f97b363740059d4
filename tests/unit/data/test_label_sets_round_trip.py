"""A custom label set round-trips (issue 53.4): every zdebias output of one records its task
beside the rows, and any command reads it back with no flags; a label map of names that are
no built-in task's implies ``labels:`` them; the hint for an unmapped integer column maps as
many values as the column holds."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from helpers.cli_main import run_main
from zdebias.data.labels import get_task, implied_task
from zdebias.data.readers import Dataset
from zdebias.data.recorded import SIDECAR, recorded_task
from zdebias.data.writers import publish_files
from zdebias.errors import ConfigError, DataError

NAMES = ("hate", "offensive", "neither")
WORDS = {0: "awful", 1: "stupid", 2: "sunny"}
COLUMNS = "text=tweet,label=class"
MAP = "0=hate,1=offensive,2=neither"


def _csv(tmp_path: Path, n: int = 60) -> Path:
    """A CSV of integer classes 0/1/2 (as the hate-speech set has), one cue word each."""
    path = tmp_path / "tweets.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["tweet", "class"])
        for i in range(n):
            c = i % 3
            writer.writerow([f"we saw {WORDS[c] if i % 2 else 'them'} today {i % 7}", c])
    return path


def _json_out(capsys: pytest.CaptureFixture[str]) -> tuple[dict, str]:
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def test_filter_output_reads_back_with_no_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _csv(tmp_path)
    out = tmp_path / "f"
    args = ["--columns", COLUMNS, "--label-map", MAP, "--task", "labels:hate,offensive,neither"]
    assert run_main(["filter", src, *args, "--out", out]) == 0
    capsys.readouterr()
    for name in ("kept.jsonl", "rejected.jsonl"):
        assert run_main(["inspect", out / name, "--json"]) == 0, capsys.readouterr().err
        info, err = _json_out(capsys)
        assert info["task"] == "labels:hate,offensive,neither"
        assert list(info["label_counts"]) == list(NAMES)  # the recorded order, not sorted
        assert f"(as recorded in {out / 'summary.json'})" in err
    assert run_main(["stats", out / "rejected.jsonl", "--json"]) == 0
    report, _ = _json_out(capsys)
    assert report["read"]["task"] == "labels:hate,offensive,neither"
    assert report["read"]["task_from"] == str(out / "summary.json")


def test_a_label_with_no_row_left_still_counts(tmp_path: Path) -> None:
    """The label set is the recorded one, not the labels the rows hold: L (and so p0 = 1/L)
    stays 3 when one label has no row in a file."""
    rows = [{"id": str(i), "text": f"t {i}", "label": NAMES[i % 2], "meta": {}} for i in range(4)]
    summary = {"read": {"task": "labels:hate,offensive,neither"}}
    publish_files(tmp_path / "o", {"kept.jsonl": [], "summary.json": summary})
    (tmp_path / "o" / "kept.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = Dataset(tmp_path / "o" / "kept.jsonl")
    assert len(list(ds)) == 4
    assert ds.report.labels == NAMES
    # an explicit task still wins; a folder that is not a zdebias output records nothing
    assert Dataset(tmp_path / "o" / "kept.jsonl", task="labels:hate,offensive").task is not None
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "summary.json").write_text(json.dumps(summary))
    assert recorded_task(tmp_path / "user" / "kept.jsonl") is None


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "parquet"])
def test_convert_records_the_task_beside_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    src = _csv(tmp_path, 9)
    out = tmp_path / f"out.{suffix}"
    assert run_main(["convert", src, out, "--columns", COLUMNS, "--label-map", MAP]) == 0
    sidecar = tmp_path / f"out.{suffix}{SIDECAR}"
    assert json.loads(sidecar.read_text())["task"] == "labels:hate,offensive,neither"
    capsys.readouterr()
    assert run_main(["inspect", out, "--json"]) == 0
    info, err = _json_out(capsys)
    assert info["label_counts"] == {"hate": 3, "offensive": 3, "neither": 3}
    assert f"as recorded in {sidecar}" in err
    # written again with a built-in task: the old record goes, it would misread the file
    sentiment = "0=negative,1=positive,2=-"
    args = ["--columns", COLUMNS, "--label-map", sentiment, "--overwrite"]
    assert run_main(["convert", src, out, *args]) == 0
    assert not sidecar.exists()


def test_a_label_map_of_new_names_implies_the_label_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _csv(tmp_path)
    assert run_main(["inspect", src, "--columns", COLUMNS, "--label-map", MAP, "--json"]) == 0
    info, err = _json_out(capsys)
    assert info["task"] == "labels:hate,offensive,neither"
    assert list(info["label_counts"]) == ["hate", "offensive", "neither"]  # the map's order
    assert err.count("task labels:hate,offensive,neither") == 1
    assert "the values of the label map, in its order" in err
    # the map's order, not the raw labels' order
    assert implied_task({"2": "b", "0": "a", "1": "c"}) == get_task("labels:b,a,c")


def test_a_label_map_of_known_names_reads_as_before() -> None:
    nli, sentiment = get_task("nli"), get_task("sentiment")
    assert implied_task({"0": "negative", "1": "pos", "2": "-"}, sentiment) is None
    assert implied_task({"0": "entailment", "1": "neutral"}, nli) is None
    assert implied_task({"0": "entailment", "1": "non-entailment"}, nli) == get_task("nli-binary")
    # some of the task's names and some not: a slip, refused as before, naming --task
    assert implied_task({"0": "contradiction", "2": "maybe"}, nli) is None


def test_a_partly_known_map_names_the_task_flag(tmp_path: Path) -> None:
    src = _csv(tmp_path)
    with pytest.raises(ConfigError, match="--task labels:negative,neutral,positive names"):
        list(
            Dataset(
                src,
                columns={"text": "tweet", "label": "class"},
                label_map={"0": "negative", "1": "neutral", "2": "positive"},
            )
        )


def test_integer_column_hint_maps_every_value(tmp_path: Path) -> None:
    src = _csv(tmp_path)
    with pytest.raises(DataError) as info:
        list(Dataset(src, columns={"text": "tweet", "label": "class"}))
    message = str(info.value)
    assert "the column holds 3 values (0, 1, 2)" in message
    assert "--label-map 0=NAME1,1=NAME2,2=NAME3" in message
    assert "0=negative,1=positive" not in message  # never a task with fewer labels
    # pair data with two values: the built-in task with two labels
    pair = tmp_path / "pair.csv"
    pair.write_text("premise,hypothesis,label\na,b,0\nc,d,1\ne,f,1\n", encoding="utf-8")
    with pytest.raises(DataError, match="0=entailment,1=non-entailment \\(task nli-binary"):
        list(Dataset(pair))
    # values 0..L-1 of the task: the hint of old
    three = tmp_path / "three.csv"
    three.write_text("premise,hypothesis,label\na,b,0\nc,d,1\ne,f,2\n", encoding="utf-8")
    with pytest.raises(DataError, match="0=entailment,1=neutral,2=contradiction \\(the SNLI"):
        list(Dataset(three))


@pytest.mark.parametrize(
    ("summary", "task"),
    [
        ({"read_train": {"task": "labels:x,y"}, "read_test": {"task": "labels:a,b,c"}}, "a,b,c"),
        ({"read_original": {"task": "labels:a,b,c"}}, "a,b,c"),
        ({"input": {"task": "labels:a,b,c"}}, "a,b,c"),
        ({"read": {"task": "nli"}, "input": {"task": "labels:a,b,c"}}, None),  # built-in
        ({"read": {"task": "labels:a,b,c"}, "output_schema": "input"}, None),  # raw labels
    ],
)
def test_every_output_summary_names_the_task(
    tmp_path: Path, summary: dict, task: str | None
) -> None:
    publish_files(tmp_path / "o", {"aligned.jsonl": [], "summary.json": summary})
    found = recorded_task(tmp_path / "o" / "aligned.jsonl")
    assert (found[0] if found else None) == (f"labels:{task}" if task else None)
    assert recorded_task(tmp_path / "o" / "other.jsonl") is None  # not one of its files


def test_a_file_without_its_record_gets_the_label_set_to_name(tmp_path: Path) -> None:
    """Copied out of its folder, a custom set's rows stop at the first row with the set its
    labels make; a typo of the default task's labels keeps its spelling hint."""
    path = tmp_path / "moved.jsonl"
    rows = [{"text": f"t {i}", "label": NAMES[i % 3]} for i in range(6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError) as info:
        list(Dataset(path))
    assert str(info.value).endswith(
        "the column holds 3 labels (hate, neither, offensive), none of them the task's; name "
        "the label set with --task labels:hate,neither,offensive (in the order of the label "
        "ids you want)"
    )
    typo = tmp_path / "typo.jsonl"
    typo.write_text('{"text": "a", "label": "positive"}\n{"text": "b", "label": "postive"}\n')
    with pytest.raises(DataError, match="--label-map postive=positive \\(the nearest label"):
        list(Dataset(typo))
