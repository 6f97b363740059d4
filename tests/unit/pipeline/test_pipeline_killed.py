"""A ``zdebias run`` killed with SIGKILL: the next start records it as killed (with the stage
it was in), removes the temporary file the killed writer left, and finishes the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from zdebias.data.schema import Record
    from zdebias.data.writers import atomic_open, write_records
    from zdebias.pipeline.config import StageConfig
    from zdebias.pipeline.loader import recipe_from_dict
    from zdebias.pipeline.registry import register_stage, StageResult
    from zdebias.pipeline.runner import run_recipe

    run_dir, mode = Path(sys.argv[1]), sys.argv[2]

    @register_stage("t-slow", config=StageConfig, outputs={"data": "records"})
    def slow(cfg, inputs, ctx):
        if mode == "hang":
            with atomic_open(ctx.out_dir.parent / "notes.json") as fh:
                fh.write("{")
                fh.flush()
                (run_dir.parent / "ready").write_text("x")
                time.sleep(120)
        records = [Record("a", "neutral", "p", "h"), Record("b", "entailment", "q", "i")]
        write_records(records, ctx.out_dir / "data.jsonl")
        return StageResult({"data": "data.jsonl"})

    recipe = recipe_from_dict({"name": "k", "seed": 1, "stages": {"slow": {"stage": "t-slow"}}})
    run_recipe(recipe, run_dir)
    """
)


def _start(script: Path, run_dir: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(script), str(run_dir), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_sigkilled_run_is_recorded_as_killed_and_cleaned_up(tmp_path: Path) -> None:
    script = tmp_path / "run_it.py"
    script.write_text(SCRIPT)
    run_dir = tmp_path / "run"
    proc = _start(script, run_dir, "hang")
    deadline = time.time() + 60
    while not (tmp_path / "ready").exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.time() < deadline, "the stage never started"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL

    killed = json.loads((run_dir / "manifest.json").read_text())
    assert killed["status"] == "running"  # all a killed process can leave
    stale = [p.name for p in run_dir.iterdir() if p.name.startswith(".notes.json.tmp-")]
    assert len(stale) == 1 and f"-{proc.pid}-" in stale[0]

    again = _start(script, run_dir, "go")
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    first, second = manifest["invocations"]
    assert first["status"] == "killed" and first["stage"] == "slow"
    assert first["pid"] == proc.pid and second["pid"] == again.pid
    assert second["status"] == "complete"
    assert [s["status"] for s in manifest["stages"]] == ["done"]
    assert not [p.name for p in run_dir.iterdir() if ".tmp-" in p.name]
    assert len((run_dir / "slow" / "data.jsonl").read_text().splitlines()) == 2
