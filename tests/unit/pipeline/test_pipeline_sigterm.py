"""SIGTERM stops a run as Ctrl-C does, for ``run_recipe`` and ``zdebias run`` alike: the stage
is marked interrupted, its work folder kept, the next run resumes; the command exits 130."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from zdebias.cli import app
from zdebias.data.schema import Record
from zdebias.data.writers import write_records
from zdebias.pipeline.config import StageConfig
from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.registry import Inputs, StageContext, StageResult, register_stage
from zdebias.pipeline.runner import run_recipe

#: whether the "t-sigterm" stage sends SIGTERM to its own process (once)
TERMINATE = {"next": False}


@register_stage("t-sigterm", config=StageConfig, outputs={"data": "records"})
def _sigterm(cfg: StageConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    (ctx.out_dir / "started.txt").write_text("resumed" if ctx.resumed else "fresh")
    if TERMINATE["next"]:
        TERMINATE["next"] = False
        os.kill(os.getpid(), signal.SIGTERM)
    write_records([Record("a", "neutral", "p", "h")], ctx.out_dir / "data.jsonl")
    return StageResult({"data": "data.jsonl"})


RECIPE = {"name": "term", "seed": 1, "stages": {"slow": {"stage": "t-sigterm"}}}


def test_sigterm_interrupts_run_recipe_and_the_next_run_resumes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    before = signal.getsignal(signal.SIGTERM)
    TERMINATE["next"] = True
    with pytest.raises(KeyboardInterrupt):
        run_recipe(recipe_from_dict(RECIPE), run_dir, progress=False)
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is put back
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert [s["status"] for s in manifest["stages"]] == ["interrupted"]
    assert (run_dir / "slow.partial" / "started.txt").read_text() == "fresh"

    manifest = run_recipe(recipe_from_dict(RECIPE), run_dir, progress=False)
    assert manifest["status"] == "complete"
    assert manifest["stages"][0]["reason"] == "resumed"
    assert (run_dir / "slow" / "started.txt").read_text() == "resumed"


def test_zdebias_run_exits_130_on_sigterm(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(RECIPE))
    run_dir = tmp_path / "run"
    TERMINATE["next"] = True
    args = ["run", str(path), "--out", str(run_dir), "--no-report", "-q"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 130, result.output
    assert f"interrupted; finished stages are kept in {run_dir}." in result.stderr
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"
