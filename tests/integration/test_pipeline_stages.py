"""The stage adapters the demo does not use, on tiny models: train-generator, hypothesis-only
and PoE classifiers over two seeds, the AutoCAD chain, concat, and evaluate with mean ± std."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from zdebias.data.readers import read_records
from zdebias.evaluation.cells import format_cell
from zdebias.generation.format import GeneratorFormat
from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.runner import run_recipe


def test_paper_and_autocad_stages_on_tiny_models(
    tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    gpt, bert, t5 = tiny_model("gpt2"), tiny_model("bert"), tiny_model("t5")
    train = {"epochs": 1, "batch_size": 16, "learning_rate": 1e-3, "warmup_steps": 0}
    recipe = recipe_from_dict(
        {
            "name": "tiny-stages",
            "seed": 3,
            "stages": {
                "corpus": {"stage": "demo-data", "n_train": 60, "n_dev": 12, "n_test": 12},
                "gen": {
                    "stage": "train-generator",
                    "model": str(gpt),
                    "train": "corpus.train",
                    "max_steps": 2,
                    "batch_size": 4,
                    "max_length": 64,
                    "learning_rate": 1e-3,
                },
                "hypo": {
                    "stage": "train-classifier",
                    "model": str(bert),
                    "input": "hypothesis-only",
                    "train": "corpus.train",
                    **train,
                },
                "poe": {
                    "stage": "train-classifier",
                    "model": str(bert),
                    "train": "corpus.train",
                    "dev": "corpus.dev",
                    "loss": "poe",
                    "bias_model": "hypo",
                    "beta": 2.0,
                    "gamma": 0.4,
                    "seeds": [1, 2],
                    **train,
                },
                "rationales": {
                    "stage": "counterfactual-rationales",
                    "classifier": "poe",
                    "input": "corpus.train",
                    "min_confidence": 0.0,
                    "min_score": 0.0,
                    "require_correct": False,
                },
                "infiller": {
                    "stage": "counterfactual-train",
                    "model": str(t5),
                    "train": "rationales",
                    "epochs": 1,
                    "batch_size": 8,
                    "learning_rate": 1e-3,
                },
                "cfs": {
                    "stage": "counterfactual-generate",
                    "infiller": "infiller",
                    "classifier": "poe",
                    "input": "rationales",
                },
                "cf_all": {"stage": "concat", "inputs": ["cfs", "cfs.rejected"]},
                "cf_metrics": {
                    "stage": "counterfactual-metrics",
                    "input": "cf_all",
                    "classifier": "poe",
                },
                "augmented": {"stage": "concat", "inputs": ["corpus.train", "cfs"]},
                "evaluate": {
                    "stage": "evaluate",
                    "classifiers": {"PoE": "poe", "untrained": str(bert)},
                    "suites": {"test": "corpus.test", "dev": "corpus.dev"},
                },
            },
        }
    )
    manifest = run_recipe(recipe, tmp_path / "run", progress=False)
    run = tmp_path / "run"
    stages = {s["name"]: s for s in manifest["stages"]}
    assert {s["status"] for s in stages.values()} == {"done"}

    assert GeneratorFormat.is_generator(run / "gen" / "model")
    assert stages["gen"]["metrics"]["steps"] == 2
    runs = json.loads((run / "poe" / "runs.json").read_text())["runs"]
    assert [(r["seed"], r["folder"]) for r in runs] == [(1, "seed-1"), (2, "seed-2")]
    info = json.loads((run / "poe" / "seed-2" / "zdebias_classifier.json").read_text())
    assert (info["loss"], info["seed"], info["input"]) == ("poe", 2, "pair")
    hypo = json.loads((run / "hypo" / "seed-3" / "zdebias_classifier.json").read_text())
    assert hypo["input"] == "hypothesis-only"

    assert stages["rationales"]["rows_out"] == {"kept": 60, "dropped": 0}
    kept, rejected = stages["cfs"]["rows_out"]["kept"], stages["cfs"]["rows_out"]["rejected"]
    assert kept + rejected == 60  # every example, once (one seeded random other label)
    assert stages["cf_all"]["rows_out"]["total"] == 60
    metrics = json.loads((run / "cf_metrics" / "metrics.json").read_text())
    malformed = sum(
        1
        for r in read_records(run / "cfs" / "rejected.jsonl", task="nli")
        if r.meta.get("rejected_by") == "malformed"
    )
    assert metrics["n_outputs"] == 60 - malformed
    augmented = read_records(run / "augmented" / "data.jsonl", task="nli")
    assert len(augmented) == 60 + kept
    assert sum(r.meta.get("type") == "counterfactual" for r in augmented) == kept

    results = json.loads((run / "evaluate" / "results.json").read_text())
    rows = {r["name"]: r for r in results["table"]["rows"]}
    assert rows["PoE"]["n_runs"] == 2 and rows["untrained"]["n_runs"] == 1
    assert rows["PoE"]["cells"]["test"]["n_runs"] == 2
    values = rows["PoE"]["cells"]["test"]["values"]
    assert rows["PoE"]["cells"]["test"]["mean"] == sum(values) / 2
    assert results["table"]["columns"] == ["test", "dev"]
    table_md = (run / "evaluate" / "table.md").read_text()
    assert table_md.startswith("| Method | test | dev |")
    # issue 39.5: the label metrics, from the documents' own numbers
    poe = next(d for d in results["documents"] if d["name"] == "PoE")
    f1 = poe["summary"]["test macro-F1"]
    acc = poe["summary"]["test"]
    assert f"| test | {format_cell(acc)} | {format_cell(f1)} |" in table_md
    assert "PoE per gold label:" in table_md

    from zdebias.report.html import build_report

    html = build_report(run)
    assert "<h2>Planted artifacts" not in html  # no stats stage in this run
    assert "<h2>Evaluation</h2>" in html and "PoE <span class='muted'>(2 runs)</span>" in html
    assert "<p>PoE per gold label:</p>" in html
    assert kept > 0 and "<h3>Counterfactuals from <code>cfs</code></h3>" in html
