"""A finished training stage given other seeds keeps the seeds it trained, trains the new
ones and lists exactly the seeds asked for; its other settings still redo it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.runner import Runner, run_recipe


def _recipe(bert: Path, seeds: list[int], lr: float = 1e-3) -> dict:
    clf = {
        "stage": "train-classifier",
        "model": str(bert),
        "train": "corpus.train",
        "dev": "corpus.dev",
        "epochs": 1,
        "batch_size": 16,
        "learning_rate": lr,
        "warmup_steps": 0,
        "seeds": seeds,
    }
    corpus = {"stage": "demo-data", "n_train": 30, "n_dev": 9, "n_test": 9}
    evaluate = {"stage": "evaluate", "classifiers": {"m": "clf"}, "suites": {"t": "corpus.test"}}
    stages = {"corpus": corpus, "clf": clf, "evaluate": evaluate}
    return {"name": "seeds", "seed": 1, "stages": stages}


def _trained(run: Path) -> dict[str, float]:
    """seed folder → the modification time of its metrics.json."""
    return {
        p.parent.name: p.stat().st_mtime_ns for p in sorted(run.glob("clf/seed-*/metrics.json"))
    }


@pytest.mark.slow
def test_more_seeds_train_only_the_new_ones(
    tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    bert = tiny_model("bert", head="encoder")
    run = tmp_path / "run"
    run_recipe(recipe_from_dict(_recipe(bert, [1, 2])), run, progress=False)
    first = _trained(run)
    assert list(first) == ["seed-1", "seed-2"]

    recipe = recipe_from_dict(_recipe(bert, [1, 2, 3]))
    plan = {row["name"]: row["action"] for row in Runner(recipe, run).plan()}
    assert plan["corpus"] == "skip (up to date)" and plan["clf"] == "resume (other seeds)"
    stages = {s["name"]: s for s in run_recipe(recipe, run, progress=False)["stages"]}
    assert stages["clf"]["reason"] == "other seeds: finished seeds kept"
    now = _trained(run)
    assert {k: now[k] for k in first} == first  # seeds 1 and 2 were not trained again
    assert list(now) == ["seed-1", "seed-2", "seed-3"]
    runs = json.loads((run / "clf" / "runs.json").read_text())["runs"]
    assert [r["seed"] for r in runs] == [1, 2, 3]
    # the evaluation of every seed ran again, with the new one
    assert stages["evaluate"]["status"] == "done"
    results = json.loads((run / "evaluate" / "results.json").read_text())
    assert len(results["documents"][0]["runs"]) == 3
    assert "resumed: seed-1 was already trained" in stages["clf"]["notes"]

    # fewer seeds: nothing is trained, the stage lists only those asked for
    stages = {
        s["name"]: s
        for s in run_recipe(recipe_from_dict(_recipe(bert, [3])), run, progress=False)["stages"]
    }
    assert stages["clf"]["status"] == "done"
    assert _trained(run)["seed-3"] == now["seed-3"]
    assert [r["seed"] for r in json.loads((run / "clf" / "runs.json").read_text())["runs"]] == [3]

    # the same seeds again: up to date; another learning rate: every seed is trained again
    again = {
        s["name"]: s
        for s in run_recipe(recipe_from_dict(_recipe(bert, [3])), run, progress=False)["stages"]
    }
    assert again["clf"]["status"] == "skipped"
    run_recipe(recipe_from_dict(_recipe(bert, [3], lr=2e-3)), run, progress=False)
    assert _trained(run)["seed-3"] != now["seed-3"]
