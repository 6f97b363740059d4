"""An evaluate stage's compact predictions rebuild its tables exactly (docs/results.md): the
summary table, the tests against each baseline, the split's reliance and groups."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from zdebias.evaluation.published import expand, read_predictions
from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.runner import run_recipe
from zdebias.pipeline.stages.classify import rebuilt_tables

pytestmark = pytest.mark.slow


def test_tables_rebuild_from_compact_predictions(
    tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    bert = tiny_model("bert")
    train = {"epochs": 1, "batch_size": 16, "learning_rate": 1e-3, "warmup_steps": 0}
    recipe = recipe_from_dict(
        {
            "name": "tiny-published",
            "seed": 5,
            "stages": {
                "corpus": {"stage": "demo-data", "n_train": 200, "n_dev": 40, "n_test": 120},
                "clf_a": {
                    "stage": "train-classifier",
                    "model": str(bert),
                    "train": "corpus.train",
                    "seeds": [1, 2],
                    **train,
                },
                "clf_b": {
                    "stage": "train-classifier",
                    "model": str(bert),
                    "train": "corpus.train",
                    "seeds": [3, 4],
                    "max_length": 24,
                    **train,
                },
                "split": {
                    "stage": "shortcut-split",
                    "train": "corpus.train",
                    "test": "corpus.test",
                    "by": "features",
                },
                "evaluate": {
                    "stage": "evaluate",
                    "classifiers": {"A": "clf_a", "B": "clf_b"},
                    "baselines": ["A"],
                    "suites": {"test": "corpus.test", "dev": "corpus.dev"},
                    "shortcut_split": "split.summary",
                    "min_group_size": 5,
                },
            },
        }
    )
    run_recipe(recipe, tmp_path / "run", progress=False)
    folder = tmp_path / "run" / "evaluate"
    assert not (folder / ".rows").exists()  # the runs' predictions, compacted and removed
    file = folder / "predictions.json.gz"
    compacted = read_predictions(file)
    results = json.loads((folder / "results.json").read_text())

    # label ids in row order, which score as the stage scored them
    slices = {"shortcut-aligned", "shortcut-conflicting"}
    assert {"test", "dev"} | slices <= set(compacted["suites"])
    test = compacted["suites"]["test"]
    assert test["n"] == 120 and len(test["gold"]) == 120
    doc = results["documents"][1]
    for run, kept in zip(doc["runs"], compacted["methods"][1]["runs"], strict=True):
        preds = expand(kept["predicted"]["test"], test["classes"])
        gold = expand(test["gold"], test["classes"])
        correct = "".join("1" if p == g else "0" for p, g in zip(preds, gold, strict=True))
        assert correct == run["results"]["test"]["outcomes"]
    # no text of the evaluation sets is in the file
    raw = gzip.decompress(file.read_bytes()).decode()

    rows = [json.loads(line) for line in (tmp_path / "run" / "corpus" / "test.jsonl").open()]
    assert len(rows) == 120
    assert not [r["hypothesis"] for r in rows if json.dumps(r["hypothesis"])[1:-1] in raw]

    rebuilt, markdown = rebuilt_tables(file)
    assert markdown == (folder / "table.md").read_text()
    # every table, test, group and document of results.json, not only the Markdown
    assert json.loads(json.dumps(rebuilt)) == results
    assert results["reliance"] and results["documents"][0]["runs"][0]["groups"]
    assert "worst group" in markdown

    # scripts/results_pages.py: publish the run, a page's block equals its rebuild
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "results_pages", Path(__file__).resolve().parents[2] / "scripts" / "results_pages.py"
    )
    assert spec and spec.loader
    pages = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pages)
    published = tmp_path / "docs" / "data"
    corpus = tmp_path / "run" / "corpus"  # the data folder: the published copy has no gold
    pages.publish(tmp_path / "run", published, corpus, None)
    copy = read_predictions(published / "evaluate.predictions.json.gz", corpus)
    assert copy["suites"]["test"]["gold"] == compacted["suites"]["test"]["gold"]
    raw_copy = gzip.decompress((published / "evaluate.predictions.json.gz").read_bytes())
    assert b'"gold":' not in raw_copy and str(corpus).encode() not in raw_copy
    page = tmp_path / "docs" / "page.md"
    page.write_text("# R\n\n<!-- rebuilt: data evaluate -->\nold\n<!-- /rebuilt -->\nend\n")
    assert pages.check([page], write=False, data=corpus) == 1
    assert pages.check([page], write=True, data=corpus) == 0
    assert pages.check([page], write=False, data=corpus) == 0
    assert page.read_text() == (
        "# R\n\n<!-- rebuilt: data evaluate -->\n" + markdown + "<!-- /rebuilt -->\nend\n"
    )
    run = json.loads((published / "run.json").read_text())
    assert [s["seed"] for s in run["trainings"]["clf_a"]] == [1, 2]
