"""The filter stage's ``method``: z-filter stages keep the hashes they had before AFLite's
settings existed (finished run folders do not rerun), and ``method: aflite`` runs AFLite."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from zdebias.data.readers import read_records
from zdebias.errors import ConfigError
from zdebias.pipeline.digests import stage_hash
from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.runner import run_recipe


def _hashed(**settings: object) -> str:
    stage = {"stage": "filter", "input": "d", **settings}
    recipe = recipe_from_dict(
        {"name": "r", "task": "nli", "data": {"d": {"path": "x.jsonl"}}, "stages": {"f": stage}}
    )
    return stage_hash(recipe, "f", recipe.stages["f"], {})


def test_z_filter_stage_hashes_are_those_of_before() -> None:
    # computed with the code before AFLite (main at 7300a0b)
    plain = "0524f5f35aa8998dad7b7684bf18eb6657c5292e90ddb00662f3fd5cfd3c30e0"
    assert _hashed() == plain
    assert _hashed(biased_k=5) == (
        "3ae473c56f121839d889f4c35b2357e313be47034bd4474f313e394c2609e311"
    )
    assert _hashed(method="z") == plain
    assert _hashed(aflite_n=32, encoder="other") == plain  # another method's settings
    assert _hashed(region="easy", fraction=0.5) == plain
    assert (
        _hashed(biased_k=5, zfilter_batch_size=100)
        == "b19b0a34e0ded53b1a4e5620a8fe450730b8b2449a8310be58b08b6f7e204b01"
    )
    cartography = _hashed(method="cartography", dynamics="m")
    assert cartography not in (plain, _hashed(method="aflite"))
    assert _hashed(method="cartography", dynamics="m", fraction=0.5) != cartography
    assert _hashed(method="cartography", dynamics="m", aflite_n=32) == cartography
    aflite = _hashed(method="aflite")
    assert aflite != plain and _hashed(method="aflite", aflite_n=32) != aflite


def test_an_aflite_filter_stage(
    tiny_model: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZDEBIAS_CACHE", str(tmp_path / "cache"))
    bert = tiny_model("bert")
    corpus = dict(stage="demo-data", n_train=90, n_dev=12, n_test=12)
    af = dict(stage="filter", input="corpus.train", method="aflite", encoder=str(bert), aflite_n=8)
    stages = {"corpus": corpus, "af": af}
    run_recipe(recipe_from_dict({"name": "af", "seed": 3, "stages": stages}), tmp_path / "run")
    out = tmp_path / "run" / "af"
    kept, rejected = read_records(out / "kept.jsonl"), read_records(out / "rejected.jsonl")
    summary = json.loads((out / "summary.json").read_text())
    assert len(kept) + len(rejected) == 90 == summary["n_input"]
    assert summary["method"] == "aflite" and summary["seed"] == 3
    assert (summary["aflite_m"], summary["aflite_k"], summary["aflite_target"]) == (22, 2, 44)
    sized = dict(af, aflite_tau=0.01, like="forty")  # the target: another dataset's size
    stages = {"corpus": corpus, "forty": {"stage": "subset", "input": "corpus.train", "n": 40},
              "af": sized}  # fmt: skip
    run_recipe(recipe_from_dict({"name": "af", "seed": 3, "stages": stages}), tmp_path / "r2")
    summary = json.loads((tmp_path / "r2" / "af" / "summary.json").read_text())
    assert summary["aflite_target"] == 40 == summary["n_kept"]
    with pytest.raises(ConfigError, match="like: for method aflite or cartography"):
        recipe_from_dict(
            {"name": "z", "stages": {"corpus": corpus, "f": {"stage": "filter",
                                                            "input": "corpus.train",
                                                            "like": "corpus.train"}}}
        )  # fmt: skip
