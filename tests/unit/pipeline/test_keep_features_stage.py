"""``keep_features`` in a recipe: the stats, filter and shortcut-split stages take it (one
name, as on the command line and in Python), and left unset it changes no stage hash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zdebias.pipeline.digests import stage_hash
from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.runner import run_recipe

#: the plain z-filter stage's hash before keep_features existed (test_filter_method_stage)
PLAIN = "0524f5f35aa8998dad7b7684bf18eb6657c5292e90ddb00662f3fd5cfd3c30e0"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _hashed(kind: str = "filter", **settings: object) -> str:
    stage = {"stage": kind, "input": "d", **settings}
    recipe = recipe_from_dict(
        {"name": "r", "task": "nli", "data": {"d": {"path": "x.jsonl"}}, "stages": {"f": stage}}
    )
    return stage_hash(recipe, "f", recipe.stages["f"], {})


def test_unset_keep_features_leaves_the_stage_hashes_as_they_were() -> None:
    assert _hashed() == _hashed(keep_features=[]) == PLAIN
    assert _hashed(keep_features=["idiot@text"]) != PLAIN
    assert _hashed("stats") == _hashed("stats", keep_features=[])
    assert _hashed("stats", keep_features="idiot@text") != _hashed("stats")


def test_a_recipe_keeps_the_tasks_features(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    rows = [("idiot", "hate"), ("nice", "neither"), ("idiot yankees", "hate"), ("yankees", "hate")]
    Path("toxic.jsonl").write_text(
        "".join(json.dumps({"id": str(i), "text": t, "label": lab}) + "\n" for i, (t, lab) in
                enumerate(rows, 1))
    )  # fmt: skip
    Path("task.txt").write_text("# the task's words\nidiot@text\n")
    keep = {"features": ["unigrams"], "keep_features": ["@task.txt"]}
    stages = {
        "st": {"stage": "stats", "input": "toxic", **keep},
        "zf": {"stage": "filter", "input": "toxic", "biased_k": 1, "zfilter_batch_size": 1,
               "shuffle": False, **keep},
        "sp": {"stage": "shortcut-split", "train": "toxic", "test": "toxic", **keep},
    }  # fmt: skip
    recipe = recipe_from_dict(
        {
            "name": "toxic",
            "task": "labels:hate,neither",
            "data": {"toxic": "toxic.jsonl"},
            "stages": stages,
        }
    )
    assert recipe.stages["zf"].keep_features == ["idiot@text"]  # the file, read at load
    run_recipe(recipe, tmp_path / "run")
    out = tmp_path / "run"
    assert [r["id"] for r in _lines(out / "zf" / "kept.jsonl")] == ["1", "2", "3"]
    [rejected] = _lines(out / "zf" / "rejected.jsonl")
    assert (rejected["id"], rejected["meta"]["rejected_by"]) == ("4", ["yankees@text"])
    stats = json.loads((out / "st" / "stats.json").read_text())
    assert stats["kept_features"]["n_features"] == 1
    assert stats["gardner"]["kept"] == []  # no feature is seen more than min_n = 20 times
    assert [r["feature"] for r in stats["top"]["hate"] if r.get("kept")] == ["idiot@text"]
    split = json.loads((out / "sp" / "summary.json").read_text())
    assert split["keep_features"] == ["idiot@text"]
