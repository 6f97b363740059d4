"""A recipe trains a cross-fitted hypothesis-only classifier and hands it to filter, stats and
combine as the hypo-only feature (GD-NLI's BERT-base hypothesis-only prediction)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from zdebias.data.readers import read_records
from zdebias.errors import ConfigError
from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.runner import run_recipe


def _recipe(bert: Path, *, hypo_after: bool = False) -> dict:
    hypo = {
        "stage": "train-classifier",
        "model": str(bert),
        "input_kind": "hypothesis-only",
        "cross_fit": 2,
        "train": "corpus.train",
        "epochs": 1,
        "batch_size": 16,
        "learning_rate": 1e-3,
        "warmup_steps": 0,
    }
    feature = {"features": ["hypo-only", "null"], "hypo_only_model": "hypo"}
    stages = {
        "corpus": {"stage": "demo-data", "n_train": 60, "n_dev": 12, "n_test": 30},
        "zfilter": {"stage": "filter", "input": "corpus.train", "biased_k": 2, **feature},
        "stats": {"stage": "stats", "input": "corpus.train", **feature},
        "mixed": {
            "stage": "combine",
            "recipe": "z-aug",
            "original": "corpus.train",
            "generated": "corpus.test",
            **feature,
        },
    }
    order = ["corpus", "zfilter", "stats", "mixed", "hypo"] if hypo_after else None
    stages = {"corpus": stages.pop("corpus"), "hypo": hypo, **stages}
    if order:
        stages = {name: stages[name] for name in order}
    return {"name": "hypo-feature", "seed": 3, "stages": stages}


@pytest.mark.slow
def test_filter_stats_combine_use_the_cross_fitted_classifier(
    tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    bert = tiny_model("bert", head="encoder")
    with pytest.raises(ConfigError, match="does not run before this one"):
        recipe_from_dict(_recipe(bert, hypo_after=True))
    run_recipe(recipe_from_dict(_recipe(bert)), tmp_path / "run", progress=False)
    run = tmp_path / "run"
    oof = {
        r.id: r.meta["hypo_only_pred"]
        for r in read_records(run / "hypo" / "seed-3" / "cross_fit_predictions.jsonl")
    }
    assert len(oof) == 60
    filtered = read_records(run / "zfilter" / "kept.jsonl") + read_records(
        run / "zfilter" / "rejected.jsonl"
    )
    assert len(filtered) == 60
    assert {r.id: r.meta["hypo_only_pred"] for r in filtered} == oof  # out-of-fold
    mixed = read_records(run / "mixed" / "data.jsonl") + read_records(
        run / "mixed" / "rejected.jsonl"
    )
    original = {r.id: r.meta["hypo_only_pred"] for r in mixed if r.meta["type"] == "original"}
    assert original == oof  # the same feature as the filter stage's
    generated = [r for r in mixed if r.meta["type"] == "generated"]
    assert len(generated) == 30 and all(r.meta["hypo_only_pred"] for r in generated)
