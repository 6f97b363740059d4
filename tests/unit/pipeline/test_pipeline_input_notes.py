"""A stage reading single-label records or repeated ids gets a note with counts in the manifest;
an empty declared dataset stops the run with one located line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import pytest

from zdebias.data.schema import Record
from zdebias.data.writers import write_records
from zdebias.errors import ConfigError, DataError
from zdebias.pipeline.config import Ref, StageConfig
from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.registry import Inputs, StageContext, StageResult, register_stage
from zdebias.pipeline.runner import run_recipe


@register_stage("t-same-label", config=StageConfig, outputs={"data": "records"})
def _same_label(cfg: StageConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    ids = ["a", "a", "a", "b", "c"]
    records = [Record(i, "neutral", f"p {n}", f"h {n}") for n, i in enumerate(ids)]
    write_records(records, ctx.out_dir / "data.jsonl")
    return StageResult({"data": "data.jsonl"})


class CountConfig(StageConfig):
    input: Annotated[str, Ref("records")]


@register_stage("t-count", config=CountConfig, outputs={"summary": "json"})
def _count(cfg: CountConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    n = len(inputs.records("input"))
    (ctx.out_dir / "n.json").write_text(json.dumps({"n": n}))
    return StageResult({"summary": "n.json"})


def test_single_label_and_repeated_ids_are_noted(tmp_path: Path) -> None:
    recipe = recipe_from_dict(
        {
            "name": "notes",
            "stages": {
                "src": {"stage": "t-same-label"},
                "count": {"stage": "t-count", "input": "src"},
            },
        }
    )
    manifest = run_recipe(recipe, tmp_path / "run")
    notes = {s["name"]: s.get("notes", []) for s in manifest["stages"]}
    where = "stage 'count', input 'input'"
    assert notes["src"] == []
    assert notes["count"] == [
        f"{where}: all 5 records have the label 'neutral': z-statistics and filtering measure "
        "only the label imbalance",
        f"{where}: 2 records repeat an id (1 id used more than once, e.g. 'a' 3 times)",
    ]
    assert json.loads((tmp_path / "run" / "count" / "n.json").read_text()) == {"n": 5}


def test_an_empty_declared_dataset_stops_the_run(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("premise,hypothesis,label\n")
    recipe = recipe_from_dict(
        {
            "name": "empty",
            "data": {"train": str(empty)},
            "stages": {"count": {"stage": "t-count", "input": "train"}},
        }
    )
    with pytest.raises(DataError) as info:
        run_recipe(recipe, tmp_path / "run")
    assert str(info.value) == (
        f"{empty}:1: no labelled records in the recipe data set: only a header, no data rows"
    )
    assert not (tmp_path / "run" / "count").exists()


def test_a_run_never_writes_into_a_foreign_folder(tmp_path: Path) -> None:
    recipe = recipe_from_dict({"name": "x", "stages": {"src": {"stage": "t-same-label"}}})
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    with pytest.raises(ConfigError, match=r"mine holds files zdebias did not write; choose a new"):
        run_recipe(recipe, foreign)
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    with pytest.raises(ConfigError, match=r"notes\.txt is a file"):
        run_recipe(recipe, foreign / "notes.txt")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_recipe(recipe, empty)["status"] == "complete"
    assert run_recipe(recipe, empty)["stages"][0]["status"] == "skipped"  # a run folder now
