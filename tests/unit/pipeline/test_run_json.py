"""`zdebias run --json`: the progress goes to stderr, stdout is one JSON document."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from zdebias.cli import app


def test_run_json_prints_only_the_result_on_stdout(tmp_path: Path) -> None:
    recipe = {
        "name": "tiny-json",
        "seed": 3,
        "stages": {
            "corpus": {"stage": "demo-data", "n_train": 60, "n_dev": 6, "n_test": 6},
            "zf": {
                "stage": "filter",
                "input": "corpus.train",
                "features": ["unigrams", "null"],
                "zfilter_batch_size": 20,
            },
        },
    }
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe))
    run = tmp_path / "run"
    args = ["run", str(path), "--out", str(run), "--json", "--no-report", "-q"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["run_dir"] == str(run)
    assert [s["name"] for s in doc["stages"]] == ["corpus", "zf"]
    assert all(s["status"] == "done" for s in doc["stages"])
    kept = (run / "zf" / "kept.jsonl").read_text().count("\n")
    rejected = (run / "zf" / "rejected.jsonl").read_text().count("\n")
    assert kept + rejected == 60  # the recipe's seed reached the stage; nothing lost
    summary = json.loads((run / "zf" / "summary.json").read_text())
    assert summary["seed"] == 3 and summary["zfilter_batch_size"] == 20
