"""The demo recipe's stages end to end with tiny models: every adapter, the report, and a run
killed during sampling that resumes and ends with the same outputs as an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from zdebias.generation import trained as trained_mod
from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.run_folder import MARKER
from zdebias.pipeline.runner import run_recipe

HERE = Path(__file__).resolve().parent
FEATURES = ["ngrams", "lex-overlap", "null"]
TRACK = ["sleeping@hypothesis", "tall@hypothesis", "full-lex-overlap"]
STAGES = [
    "corpus",
    "stats_original",
    "zfilter",
    "generator",
    "samples",
    "clf_original",
    "confident",
    "seq_z",
    "stats_debiased",
    "clf_debiased",
    "evaluate",
]


def tiny_recipe(gen: Path, clf: Path) -> dict[str, Any]:
    train = {"epochs": 1, "batch_size": 16, "learning_rate": 1e-3, "warmup_steps": 0}
    return {
        "name": "tiny",
        "task": "nli",
        "seed": 7,
        "plugins": ["pipeline_fake_sampler"],
        "stages": {
            "corpus": {"stage": "demo-data", "n_train": 300, "n_dev": 30, "n_test": 30},
            "stats_original": {
                "stage": "stats",
                "input": "corpus.train",
                "features": FEATURES,
                "track": TRACK,
            },
            "zfilter": {
                "stage": "filter",
                "input": "corpus.train",
                "biased_k": 10,
                "zfilter_batch_size": 25,
                "features": FEATURES,
            },
            "generator": {
                "stage": "debias-generator",
                "generator": str(gen),
                "kept": "zfilter",
                "rejected": "zfilter.rejected",
                "max_steps": 2,
                "batch_size": 4,
                "learning_rate": 1e-3,
                "max_length": 64,
            },
            "samples": {
                "stage": "sample",
                "generator": "generator",
                "n": 40,
                "batch_size": 8,
                "shard_size": 8,
            },
            "clf_original": {
                "stage": "train-classifier",
                "model": str(clf),
                "train": "corpus.train",
                "dev": "corpus.dev",
                **train,
            },
            "confident": {
                "stage": "confidence-filter",
                "input": "samples",
                "classifier": "clf_original",
                "threshold": 0.2,
            },
            "seq_z": {
                "stage": "combine",
                "recipe": "seq-z",
                "original": "corpus.train",
                "generated": "confident",
                "biased_k": 10,
                "zfilter_batch_size": 25,
                "features": FEATURES,
            },
            "stats_debiased": {
                "stage": "stats",
                "input": "seq_z",
                "features": FEATURES,
                "track": TRACK,
            },
            "clf_debiased": {
                "stage": "train-classifier",
                "model": str(clf),
                "train": "seq_z",
                "dev": "corpus.dev",
                **train,
            },
            "evaluate": {
                "stage": "evaluate",
                "classifiers": {"w/ D0": "clf_original", "w/ Seq-Z": "clf_debiased"},
                "suites": {"test": "corpus.test"},
            },
        },
        "report": {"before": "stats_original", "after": "stats_debiased"},
    }


@pytest.fixture
def fake_sampler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    import pipeline_fake_sampler

    monkeypatch.setitem(trained_mod.BACKENDS, "hf", pipeline_fake_sampler.FakeBackend)
    monkeypatch.setenv("ZD_FAKE_SAMPLE_SLEEP", "0")


def _status(run: Path) -> dict[str, Any]:
    return json.loads((run / "manifest.json").read_text())


def _wait_for_shard(state: Path, proc: subprocess.Popen[bytes], limit: float) -> None:
    start = time.time()
    while time.time() - start < limit:
        if proc.poll() is not None:
            break
        if state.exists():
            try:
                if json.loads(state.read_text())["shards"]:
                    return
            except (ValueError, KeyError):
                pass
        time.sleep(0.2)
    out = proc.stdout.read().decode() if proc.stdout and proc.poll() is not None else ""
    raise AssertionError(f"no shard written in {limit} s (exit {proc.poll()}): {out[-2000:]}")


def fake_sampler_env(sleep: float) -> dict[str, str]:
    """The environment of a `zdebias run` subprocess that samples with the fake sampler
    (``sleep`` seconds per sample), offline."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "ZD_FAKE_SAMPLER": "1",
        "ZD_FAKE_SAMPLE_SLEEP": str(sleep),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


def test_tiny_pipeline_resumes_after_a_kill_during_sampling(
    tiny_model: Callable[..., Path], tmp_path: Path, fake_sampler: None
) -> None:
    from zdebias.report.html import artifact_summary, build_report, load_run

    gen, clf = tiny_model("gpt2"), tiny_model("bert")
    data = tiny_recipe(gen, clf)

    # A: uninterrupted, in this process
    run_a = tmp_path / "a"
    manifest = run_recipe(recipe_from_dict(data), run_a, progress=False)
    stages = {s["name"]: s for s in manifest["stages"]}
    assert list(stages) == STAGES and {s["status"] for s in stages.values()} == {"done"}
    assert stages["samples"]["rows_out"] == {"samples": 40}
    assert stages["confident"]["rows_in"] == {"input": 40}
    kept = stages["confident"]["rows_out"]["kept"]
    assert kept + stages["confident"]["rows_out"]["rejected"] == 40
    seq = stages["seq_z"]["rows_out"]
    assert seq["total"] == seq["original"] + seq.get("generated", 0)
    assert seq["total"] + seq["rejected"] == 300 + kept
    assert stages["clf_debiased"]["rows_in"] == {"train": seq["total"], "dev": 30}
    results = json.loads((run_a / "evaluate" / "results.json").read_text())
    assert [r["name"] for r in results["table"]["rows"]] == ["w/ D0", "w/ Seq-Z"]
    assert results["documents"][0]["suites"][0]["n"] == 30
    rows = artifact_summary(load_run(run_a))
    assert [r["found"] for r in rows] == [True, True, True]
    html = build_report(run_a)
    assert "<h3>Generated samples in <code>seq_z</code></h3>" in html or "confident" in html
    assert html.count("data:image/png;base64,") == 3  # Gardner before, after; evaluation bars
    assert html.count('<img alt="accuracy of evaluate"') == 1

    # B: a real `zdebias run` killed (SIGTERM) once sampling has written a shard
    run_b = tmp_path / "b"
    recipe_file = tmp_path / "tiny.yaml"
    recipe_file.write_text(yaml.safe_dump(data, sort_keys=False))
    env = fake_sampler_env(sleep=1.0)
    cmd = [
        sys.executable,
        "-m",
        "zdebias.cli",
        "run",
        str(recipe_file),
        "--out",
        str(run_b),
        "--quiet",
        "--no-report",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    state = run_b / "samples.partial" / "state.json"
    try:
        _wait_for_shard(state, proc, limit=180)
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=60)[0].decode()
        written_at_kill = json.loads(state.read_text())["n_written"]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert "Run the same command again to resume" in out
    cut = {s["name"]: s["status"] for s in _status(run_b)["stages"]}
    assert cut == {
        **dict.fromkeys(STAGES[:4], "done"),
        "samples": "interrupted",
        **dict.fromkeys(STAGES[5:], "pending"),
    }
    assert _status(run_b)["status"] == "interrupted"

    # resume: finished stages are skipped, sampling continues from its shards
    resumed = run_recipe(recipe_from_dict(data), run_b, progress=False)
    after = {s["name"]: s for s in resumed["stages"]}
    assert {n: after[n]["status"] for n in STAGES[:4]} == dict.fromkeys(STAGES[:4], "skipped")
    assert after["samples"]["status"] == "done" and after["samples"]["resumed"] is True
    assert 0 < written_at_kill < 40
    assert after["samples"]["notes"] == [
        f"resumed sampling: {written_at_kill} of 40 samples were already written"
    ]

    # same outputs as the uninterrupted run
    for stage, name in [
        ("samples", "samples.jsonl"),
        ("confident", "kept.jsonl"),
        ("seq_z", "data.jsonl"),
        ("zfilter", "kept.jsonl"),
        ("stats_debiased", "stats.json"),
    ]:
        assert (run_a / stage / name).read_bytes() == (run_b / stage / name).read_bytes(), stage
    table_a = json.loads((run_a / "evaluate" / "results.json").read_text())["table"]
    table_b = json.loads((run_b / "evaluate" / "results.json").read_text())["table"]
    assert table_a == table_b
    for stage in STAGES:
        assert (
            json.loads((run_a / stage / MARKER).read_text())["outputs"].keys()
            == json.loads((run_b / stage / MARKER).read_text())["outputs"].keys()
        )
