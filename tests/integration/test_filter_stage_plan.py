"""The recipe stage `filter` runs the way `zdebias filter` would on the same file
(zdebias.stats.execution.plan): a writer process or sharded workers for a declared dataset or
an earlier stage's records, one process otherwise; the stage's files, rows and notes are the
same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.runner import run_recipe
from zdebias.stats.execution import plan

WORDS = "man woman dog park runs sits sleeps red small near the a nobody cat plays".split()
FILES = ("kept.jsonl", "rejected.jsonl", "summary.json")


def _write(path: Path, n: int) -> Path:
    rows: list[dict[str, Any]] = []
    for i in range(n):
        label = ("entailment", "neutral", "contradiction")[i % 3]
        words = " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(3 + i % 4))
        if label == "contradiction" and i % 5:
            words = "nobody " + words
        premise = f"A man {WORDS[i % 6]} in the park."
        rows.append({"id": f"r{i}", "premise": premise, "hypothesis": words, "label": label})
    rows[7]["label"] = "-"  # unlabelled: skipped, and noted
    rows[40]["id"] = "r41"  # a repeated id: noted
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_filter_stage_takes_the_plan_of_zdebias_filter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _write(tmp_path / "train.jsonl", 300)
    monkeypatch.setattr(plan, "WRITER_MIN_BYTES", 0)
    ways: list[tuple[str, str]] = []
    real = plan.plan_filter

    def spy(path: str, *args: Any, **kwargs: Any) -> plan.FilterPlan:
        chosen = real(path, *args, **kwargs)
        ways.append((Path(path).name, chosen.way))
        return chosen

    monkeypatch.setattr(plan, "plan_filter", spy)  # the z method plans through the module
    common = {"stage": "filter", "zfilter_batch_size": 40}
    stages = {
        "one": {**common, "input": "train", "num_proc": 1},
        "writer": {**common, "input": "train"},
        "sharded": {**common, "input": "train", "num_proc": 2},
        "again_one": {**common, "input": "one", "num_proc": 1},
        "again_writer": {**common, "input": "one"},
    }
    recipe = {"name": "plans", "data": {"train": str(data)}, "stages": stages}
    manifest = run_recipe(recipe_from_dict(recipe), tmp_path / "run", progress=False)
    run = tmp_path / "run"
    assert ways == [
        ("train.jsonl", "one"),
        ("train.jsonl", "writer"),
        ("train.jsonl", "sharded"),
        ("kept.jsonl", "one"),
        ("kept.jsonl", "writer"),
    ]
    for name in ("writer", "sharded"):
        for file in FILES:
            assert (run / name / file).read_bytes() == (run / "one" / file).read_bytes(), name
    for file in FILES:
        assert (run / "again_writer" / file).read_bytes() == (run / "again_one" / file).read_bytes()
    stage = {s["name"]: s for s in manifest["stages"]}
    for name in ("writer", "sharded"):
        for key in ("notes", "rows_in", "rows_out", "metrics"):
            ours = json.dumps(stage[name].get(key)).replace(f"'{name}'", "'one'")
            assert ours == json.dumps(stage["one"].get(key)), (name, key)
    assert stage["one"]["rows_in"] == {"input": 299}
    assert stage["one"]["notes"] == [
        f"{data}: skipped 1 row without a gold label and 0 bad rows",  # singular: issue 39.6
        "stage 'one', input 'input': 1 record repeats an id (1 id used more than once, "
        "e.g. 'r41' 2 times)",
        "stage 'one', input 'input': 37 features still significant after z-filtering "
        "(z > 3.63, batches of 40): a smaller --zfilter-batch-size filters more finely",
    ]
    summary = json.loads((run / "writer" / "summary.json").read_text())
    assert "path" not in summary and "read" not in summary  # the manifest says where from
    assert summary["stats_of_kept"]["n_features"] > 0
