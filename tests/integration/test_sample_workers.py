"""Sampling on 2 workers with the fake sampler (demo-grammar samples seeded by the round, 2 a
round from a pool of 5 seeds, so rounds repeat each other's samples): worker 1 is SIGKILLed
after its first shard and run again, and the merge is byte for byte the one-process run's
samples.jsonl (records, ids ``gen-s0:i``, order and meta, round included); ``--workers 2``
gives the same file."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_pipeline_tiny import _wait_for_shard, fake_sampler, fake_sampler_env  # noqa: F401

from helpers.cli_main import run_main
from zdebias.errors import ConfigError
from zdebias.generation import trained as trained_mod
from zdebias.generation.sample import sample_generator
from zdebias.generation.store import read_samples
from zdebias.generation.workers import merge_samples

N, BATCH, SHARD = 60, 8, 8
#: `zdebias` with the fake sampler installed (the test's plugin module, ZD_FAKE_SAMPLER=1)
ZDEBIAS = [
    sys.executable,
    "-c",
    "import workers_fake_sampler; from zdebias.cli import main; main()",
]


@pytest.fixture
def repeating(fake_sampler: None, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    import workers_fake_sampler

    monkeypatch.setitem(trained_mod.BACKENDS, "hf", workers_fake_sampler.RepeatingBackend)


@pytest.fixture
def generator(tmp_path: Path) -> Path:
    from zdebias.generation.tiny import make_tiny_generator

    return make_tiny_generator(tmp_path / "generator", max_length=48)


def _args(gen: Path, out: Path, *more: object) -> list[str]:
    options = ["--n", N, "--batch-size", BATCH, "--shard-size", SHARD, "-q", *more]
    return [str(a) for a in ["sample", "--generator", gen, "--out", out, *options]]


def test_two_workers_one_killed_merge_to_the_one_process_run(
    generator: Path,
    tmp_path: Path,
    repeating: None,
) -> None:
    one = sample_generator(
        generator, tmp_path / "one", N, batch_size=BATCH, shard_size=SHARD, progress=False
    )
    assert one["complete"] and one["n_duplicates"] > 0  # the rounds do repeat each other

    out = tmp_path / "w"
    env = fake_sampler_env(sleep=0.25)  # a round takes 0.5 s: time to kill worker 1 mid-way
    procs = [
        subprocess.Popen(
            [*ZDEBIAS, *_args(generator, out, "--worker", f"{i}/2")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for i in range(2)
    ]
    state1 = out / "worker-1-of-2" / "state.json"
    _wait_for_shard(state1, procs[1], limit=120)
    procs[1].send_signal(signal.SIGKILL)
    procs[1].wait()
    assert procs[0].wait(timeout=120) == 0, procs[0].stdout.read().decode()  # type: ignore[union-attr]
    killed = json.loads(state1.read_text())
    assert killed["shards"] and killed["n_written"] < 30  # stopped before its share

    # run again, the same command, until the merge is ready (the merge names who is left)
    for _ in range(4):
        try:
            merged = merge_samples(out)
            break
        except ConfigError as err:
            for part in re.findall(r"(\d+/2) \(", str(err).split("run again: worker ")[1]):
                assert run_main(_args(generator, out, "--worker", part)) == 0
    else:
        raise AssertionError("the merge never became ready")
    resumed = json.loads(state1.read_text())
    assert resumed["shards"][: len(killed["shards"])] == killed["shards"]  # continued, not redone

    assert (out / "samples.jsonl").read_bytes() == (tmp_path / "one" / "samples.jsonl").read_bytes()
    records = read_samples(out)
    assert [r.id for r in records] == [f"gen-s0:{i}" for i in range(N)]
    assert merged["n_written"] == N and merged["rounds"] == one["n_generated"] // BATCH == 16
    assert merged["n_cross_worker_duplicates"] == 5  # found by both workers: kept once
    assert merged["n_generated"] == BATCH * merged["rounds_sampled"]
    assert merged["n_generated"] == (
        N + merged["n_malformed"] + merged["n_duplicates"] + merged["n_surplus"]
    )


def test_recipe_workers_setting_runs_processes_and_merges(
    generator: Path,
    tmp_path: Path,
    repeating: None,
) -> None:
    from zdebias.pipeline.loader import recipe_from_dict
    from zdebias.pipeline.runner import run_recipe

    sample_generator(
        generator, tmp_path / "one", N, batch_size=BATCH, shard_size=SHARD, progress=False
    )
    stage = {"stage": "sample", "generator": str(generator), "n": N, "batch_size": BATCH}
    stage |= {"shard_size": SHARD, "workers": 2}
    recipe = {"name": "w", "task": "nli", "seed": 0, "stages": {"samples": stage}}
    manifest = run_recipe(recipe_from_dict(recipe), tmp_path / "run", progress=False)
    assert [(s["name"], s["status"]) for s in manifest["stages"]] == [("samples", "done")]
    folder = tmp_path / "run" / "samples"
    assert sorted(p.name for p in folder.glob("worker-*")) == ["worker-0-of-2", "worker-1-of-2"]
    assert (folder / "samples.jsonl").read_bytes() == (
        tmp_path / "one" / "samples.jsonl"
    ).read_bytes()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["workers"] == 2 and summary["n_cross_worker_duplicates"] == 5

    stage |= {"workers": 1, "worker": "0/2"}
    with pytest.raises(ConfigError, match="a stage runs them all with workers: N"):
        run_recipe(recipe_from_dict(recipe), tmp_path / "run2", progress=False)
