"""The filter stage's cartography method (issue 30): ``dynamics`` names a train-classifier
stage (several seeds: the first seed's dynamics), and the run report draws its data map."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.runner import run_recipe
from zdebias.report.html import build_report


@pytest.mark.slow
def test_filter_stage_keeps_the_region_of_the_first_seed(
    tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    bert = tiny_model("bert", head="encoder")
    clf = {
        "stage": "train-classifier",
        "model": str(bert),
        "train": "corpus.train",
        "seeds": [5, 6],
        "epochs": 2,
        "batch_size": 16,
        "learning_rate": 1e-3,
        "warmup_steps": 0,
    }
    carto = {"method": "cartography", "dynamics": "clf", "region": "hard-to-learn"}
    stages = {
        "corpus": {"stage": "demo-data", "n_train": 30, "n_dev": 6, "n_test": 6},
        "clf": clf,
        "carto": {"stage": "filter", "input": "corpus.train", "fraction": 0.5, **carto},
        "seven": {"stage": "subset", "input": "corpus.train", "n": 7},
        "carto_like": {"stage": "filter", "input": "corpus.train", "like": "seven", **carto},
    }
    run_recipe(recipe_from_dict({"name": "carto", "seed": 3, "stages": stages}), tmp_path / "r")
    run = tmp_path / "r"
    dynamics = [
        json.loads(line) for line in (run / "clf" / "seed-5" / "training_dynamics.jsonl").open()
    ]
    assert len(dynamics) == 30 and {r["epochs"] for r in dynamics} == {2}
    # the 15 lowest confidences of seed 5 (ties by id), in input order
    lowest = sorted(dynamics, key=lambda r: (r["confidence"], r["id"]))[:15]
    kept = [json.loads(line)["id"] for line in (run / "carto" / "kept.jsonl").open()]
    order = [r["id"] for r in dynamics]
    assert kept == sorted((r["id"] for r in lowest), key=order.index)
    summary = json.loads((run / "carto" / "summary.json").read_text())
    assert summary["method"] == "cartography" and summary["n_rejected"] == 15
    assert summary["dynamics"].endswith("seed-5/training_dynamics.jsonl")
    # like: as many rows as another dataset has (the 7 lowest confidences)
    kept = [json.loads(line)["id"] for line in (run / "carto_like" / "kept.jsonl").open()]
    assert kept == sorted((r["id"] for r in lowest[:7]), key=order.index)
    page = build_report(run)
    assert "Data maps (dataset cartography)" in page and "data map clf" in page
