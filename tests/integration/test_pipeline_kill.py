"""SIGKILL `zdebias run` on the tiny recipe at 5 seeded random moments, two of them just after
a training stage wrote a checkpoint; the run started again each time ends with the same files
and model weights as an uninterrupted run."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from test_pipeline_tiny import HERE, STAGES, fake_sampler, fake_sampler_env, tiny_recipe  # noqa: F401

from zdebias.evaluation.published import read_predictions
from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.runner import run_recipe

#: files that record timings or the run folder's path: not compared byte for byte (the
#: classifiers' evaluation history and the evaluation table are compared below)
VOLATILE = {
    "metrics.json",
    "runs.json",
    "train_summary.json",
    "summary.json",
    "state.json",
    "results.json",
    "predictions.json.gz",  # the compact predictions name the run folder's paths too
    ".zdebias-done.json",
    ".zdebias-attempt.json",
}
TRAINING = ("generator", "clf_original", "clf_debiased")
#: what each of the 5 kills waits for: a seeded random time, or a new training checkpoint
KILLS = ["time", "checkpoint", "time", "checkpoint", "time"]


def _files(run: Path, stage: str) -> dict[str, bytes]:
    folder = run / stage
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in VOLATILE
    }


def _checkpoints(run: Path) -> set[Path]:
    return set(run.glob("*.partial/.*.checkpoints/checkpoint-*/zdebias-complete.json"))


def _after_start(run: Path, delay: float) -> Callable[[], bool]:
    """``ready()``: true ``delay`` seconds after the run launched now has started (rewritten
    its manifest: imports and checks done)."""
    launched = time.time()
    started: list[float] = []

    def ready() -> bool:
        if not started:
            try:
                if (run / "manifest.json").stat().st_mtime >= launched:
                    started.append(time.time())
            except OSError:
                pass
            return False
        return time.time() >= started[0] + delay

    return ready


def _kill_when(proc: subprocess.Popen[bytes], ready: Callable[[], bool], limit: float) -> bool:
    """SIGKILL ``proc`` once ``ready()``; ``False`` when it ended first (or ``limit`` passed)."""
    start = time.time()
    while time.time() - start < limit:
        if proc.poll() is not None:
            return False
        if ready():
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            return True
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=30)
    return True


def test_run_killed_five_times_ends_like_an_uninterrupted_run(
    tiny_model: Callable[..., Path],
    tmp_path: Path,
    fake_sampler: None,  # noqa: F811
) -> None:
    data: dict[str, Any] = tiny_recipe(tiny_model("gpt2"), tiny_model("bert"))
    data["stages"]["corpus"].update(n_train=150, n_dev=24, n_test=24)  # quicker stages
    for name in TRAINING:  # a checkpoint every other step: kills land mid-training
        data["stages"][name]["checkpoint_steps"] = 2
    data["stages"]["generator"]["max_steps"] = 5
    run_a = tmp_path / "a"
    run_recipe(recipe_from_dict(data), run_a, progress=False)

    run_b = tmp_path / "b"
    recipe_file = tmp_path / "tiny.yaml"
    recipe_file.write_text(yaml.safe_dump(data, sort_keys=False))
    env = fake_sampler_env(sleep=0.2)
    cmd = [sys.executable, "-m", "zdebias.cli", "run", str(recipe_file), "--out", str(run_b)]
    cmd += ["--quiet", "--no-report"]
    rng = random.Random(12)
    killed = []
    log = tmp_path / "stderr.txt"
    for kind in KILLS:
        seen = _checkpoints(run_b)
        with log.open("wb") as err:
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
            if kind == "time":  # a random moment once the run has started (imports done)
                hit = _kill_when(proc, _after_start(run_b, rng.uniform(0.2, 4.0)), limit=120)
            else:
                new = lambda seen=seen: bool(_checkpoints(run_b) - seen)  # noqa: E731
                hit = _kill_when(proc, new, limit=120)
        assert hit, (kind, proc.returncode, log.read_text()[-2000:])
        killed.append(kind)
    assert killed == KILLS

    manifest = run_recipe(recipe_from_dict(data), run_b, progress=False)
    stages = {s["name"]: s for s in manifest["stages"]}
    assert {s["status"] for s in stages.values()} <= {"done", "skipped"}
    notes = [n for s in stages.values() for n in s.get("notes", [])]
    for stage in STAGES:
        assert _files(run_a, stage) == _files(run_b, stage), stage
    for name in TRAINING:  # the trained weights are bit-identical
        (model,) = {"generator": ["model"]}.get(name, ["seed-7"])
        weights = "model.safetensors"
        a_bytes = (run_a / name / model / weights).read_bytes()
        assert a_bytes == (run_b / name / model / weights).read_bytes(), name
    runs = (run_a, run_b)
    for name in TRAINING[1:]:  # early stopping's history and best epoch survived the kills
        metrics = [json.loads((r / name / "seed-7" / "metrics.json").read_text()) for r in runs]
        assert metrics[0]["history"] == metrics[1]["history"], name
        assert metrics[0]["best"] == metrics[1]["best"], name
    tables = [json.loads((r / "evaluate" / "results.json").read_text()) for r in runs]
    assert tables[0]["table"] == tables[1]["table"]
    # every row's predicted label, as the evaluation kept them, is the same
    kept = [read_predictions(r / "evaluate" / "predictions.json.gz") for r in runs]
    labels = [[run["predicted"] for m in k["methods"] for run in m["runs"]] for k in kept]
    assert labels[0] == labels[1] and labels[0]
    assert kept[0]["suites"] == kept[1]["suites"]
    assert not list(run_b.glob("**/.*.checkpoints")), "checkpoints outlived their stage"
    # the kills just after a checkpoint made a later start resume training from it
    assert any(n.startswith("resumed training") for n in notes), notes
