"""`zdebias run` with training stages: stdout carries only the run's result lines (no
Trainer log dicts, no progress bars), stderr the logs and bars; `-q` silences them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import yaml
from test_pipeline_tiny import tiny_recipe

import zdebias

#: the source tree of the zdebias under test
SRC = Path(zdebias.__file__).resolve().parents[1]


def _recipe(gen: Path, clf: Path) -> dict[str, Any]:
    """The tiny demo recipe's first stages: demo data, a z-filter, a generator fine-tune and
    a classifier with a dev set (smaller: 120 rows, 4 classifier steps)."""
    data = tiny_recipe(gen, clf)
    del data["plugins"], data["report"]
    stages = data["stages"]
    data["stages"] = {k: stages[k] for k in ("corpus", "zfilter", "generator", "clf_original")}
    data["stages"]["corpus"].update(n_train=120, n_dev=12, n_test=12)
    data["stages"]["clf_original"]["batch_size"] = 32
    return data


def _run(recipe: Path, out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1"}
    env.pop("TRANSFORMERS_NO_ADVISORY_WARNINGS", None)
    cmd = [sys.executable, "-m", "zdebias.cli", "run", str(recipe), "--out", str(out)]
    return subprocess.run(
        [*cmd, "--no-report", *options], env=env, capture_output=True, text=True, timeout=600
    )


def _result_lines(stdout: str) -> list[str]:
    """The lines of ``stdout`` that are not the run's own report (what `zdebias run` prints
    of its stages): none may be."""
    report = re.compile(r"(zdebias run |▶ \[|✓ \[|↷ \[|  note: |done in )")
    return [line for line in stdout.splitlines() if not report.match(line)]


def test_run_stdout_is_the_result_and_quiet_silences_the_rest(
    tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    recipe = tmp_path / "streams.yaml"
    data = _recipe(tiny_model("gpt2"), tiny_model("bert"))
    recipe.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    run = tmp_path / "run"

    loud = _run(recipe, run)
    assert loud.returncode == 0, loud.stderr
    assert _result_lines(loud.stdout) == []
    assert "✓ [3/4] generator" in loud.stdout and "done in" in loud.stdout
    # the Trainer's log lines and bars: on stderr
    assert loud.stderr.count("'train_runtime'") == 2  # the generator's and the classifier's
    assert "'eval_accuracy'" in loud.stderr and "it/s]" in loud.stderr
    # the manifest records what each training stage ran on
    stages = {e["name"]: e for e in json.loads((run / "manifest.json").read_text())["stages"]}
    trained = [stages["generator"]["metrics"]["compute"]]
    trained.append(stages["clf_original"]["metrics"]["runs"][0]["compute"])
    if not torch.cuda.is_available():
        assert [(c["device"], c["dtype"], c["bf16_by_auto"]) for c in trained] == [
            ("cpu", "float32", False),
            ("cpu", "float32", False),
        ]
    assert {c["torch"] for c in trained} == {torch.__version__}

    # -q: the classifier trained again (another seed), the rest skipped; nothing on stderr
    quiet = _run(recipe, run, "-q", "stages.clf_original.seed=4")
    assert quiet.returncode == 0, quiet.stderr
    assert _result_lines(quiet.stdout) == []
    assert "↷ [3/4] generator" in quiet.stdout and "✓ [4/4] clf_original" in quiet.stdout
    assert quiet.stderr == ""
