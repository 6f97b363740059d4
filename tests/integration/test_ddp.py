"""Data-parallel training under a standard launcher: 2 CPU processes (gloo) vs 1 process.

The four training commands (the classifier twice: plain and joint PoE) run once in one
process with batch 2B and once under ``python -m torch.distributed.run --nproc_per_node 2``
(``torchrun``) with ``--batch-size B`` per process, same seed, on tiny random models with
dropout off (processes draw their own dropout masks, so with dropout only the distribution of
the curve would agree). The global batch is then the same, and so must be the loss logged at
every step: within 1e-4 relative (measured: at most 2e-7, float summation order). Only rank 0
writes the output and prints its line; nothing else is left beside the outputs (no temporary
or checkpoint folder).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli_main import run_main
from helpers.nli_toy import toy_records

#: relative tolerance of a logged loss (2 processes vs 1)
RTOL = 1e-4
STEPS = 6  # 24 records, global batch 8, 2 epochs


def _gloo() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_gloo_available()


pytestmark = pytest.mark.skipif(not _gloo(), reason="torch.distributed without gloo")


def _no_dropout(path: Path) -> Path:
    config = json.loads((path / "config.json").read_text())
    for key in list(config):
        if "dropout" in key or key.endswith("_pdrop"):
            config[key] = 0.0
    (path / "config.json").write_text(json.dumps(config))
    return path


def _commands(root: Path, models: dict[str, Path], batch: int, tag: str) -> list[list[str]]:
    """The four trainings (the classifier twice: plain, and joint PoE, whose bias head runs
    outside the DDP-wrapped forward), each writing ``root/<what><tag>``."""
    common = ["--epochs", "2", "--batch-size", str(batch), "--set", "logging_steps=1"]
    data = str(root / "train.jsonl")
    classifier = ["train-classifier", "--train", data, "--model", str(models["bert"])]
    classifier += ["--learning-rate", "1e-2", "--warmup-steps", "0", "--no-group-by-length"]
    classifier += ["--device", "cpu", *common]
    # every run on the CPU, also where CUDA is visible: 2 gloo processes against 1 process
    # (the rule for 2 processes on 1 GPU: tests/unit/models/test_distributed.py)
    cpu = ["--set", "use_cpu=true"]
    return [
        [*classifier, "--out", str(root / f"clf{tag}")],
        [*classifier, "--out", str(root / f"poe{tag}"), "--loss", "poe", "--gamma", "0.4"],
        [
            "train-generator",
            "--train",
            data,
            "--model",
            str(models["gpt2"]),
            "--out",
            str(root / f"gen{tag}"),
            "--learning-rate",
            "1e-2",
            *common,
            *cpu,
        ],
        [
            "debias-generator",
            "--generator",
            str(root / "gen1"),  # the 1-process generator: the same start for both runs
            "--train",
            data,
            "--out",
            str(root / f"deb{tag}"),
            "--zfilter-batch-size",
            "8",
            "--learning-rate",
            "1e-2",
            *common,
            *cpu,
        ],
        [
            "counterfactual",
            "train",
            "--train",
            data,
            "--model",
            str(models["t5"]),
            "--spans",
            "random",
            "--out",
            str(root / f"inf{tag}"),
            "--learning-rate",
            "1e-2",
            *common,
            *cpu,
        ],
    ]


@pytest.fixture(scope="module")
def runs(_tiny_model_store, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Train everything in 1 process (in this one) and then in 2 (one launch)."""
    from zdebias.data.writers import write_records

    root = tmp_path_factory.mktemp("ddp")
    models = {}
    for kind in ("bert", "gpt2", "t5"):
        models[kind] = _no_dropout(Path(shutil.copytree(_tiny_model_store(kind), root / kind)))
    records = [r.replace(id=f"{r.id}:{i}") for i, r in enumerate(toy_records() * 2)]
    write_records(records, root / "train.jsonl")
    for argv in _commands(root, models, 8, "1"):
        assert run_main([*argv, "-q"]) == 0, argv
    spec = root / "argv.json"
    spec.write_text(json.dumps(_commands(root, models, 4, "2")))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    script = Path(__file__).with_name("ddp_commands.py")
    done = subprocess.run(
        [*launch, "--nproc_per_node", "2", str(script), str(spec)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {"root": root, "stdout": done.stdout}


def _curve(summary: dict, key: str) -> list[float]:
    return [row["loss"] for row in summary[key] if "loss" in row]


@pytest.mark.parametrize(
    ("what", "summary_file", "key"),
    [
        ("clf", "metrics.json", "log_history"),
        ("poe", "metrics.json", "log_history"),
        ("gen", "train_summary.json", "log_history"),
        ("deb", "train_summary.json", "log_history"),
        ("inf", "train_summary.json", "history"),
    ],
)
def test_two_processes_follow_the_one_process_curve(
    runs: dict, what: str, summary_file: str, key: str
) -> None:
    root = runs["root"]
    one = json.loads((root / f"{what}1" / summary_file).read_text())
    two = json.loads((root / f"{what}2" / summary_file).read_text())
    curve1, curve2 = _curve(one, key), _curve(two, key)
    assert len(curve1) == len(curve2) == STEPS  # one logged loss per optimizer step
    assert curve1 == pytest.approx(curve2, rel=RTOL)
    if what not in ("clf", "poe"):  # the curves move (the classifier's 24 toy pairs barely do)
        assert curve1[-1] < 0.9 * curve1[0]
    if what in ("gen", "deb"):  # the processes' token counts add up to the one process's
        assert two["train_tokens"] == one["train_tokens"] and two["processes"] == 2


def test_the_classifier_weights_agree(runs: dict) -> None:
    from safetensors.numpy import load_file

    root = runs["root"]
    one = load_file(str(root / "clf1" / "model.safetensors"))
    two = load_file(str(root / "clf2" / "model.safetensors"))
    assert one.keys() == two.keys()
    moved = max(
        abs(one[k] - load_file(str(root / "bert" / "model.safetensors"))[k]).max()
        for k in one
        if "classifier" in k
    )
    assert moved > 1e-3  # trained
    assert max(abs(one[k] - two[k]).max() for k in one) < 1e-4


def test_the_classifier_training_dynamics_agree(runs: dict) -> None:
    """Each process records its own batches; merged, every example has one value per epoch,
    the one process's values (issue 30)."""
    root = runs["root"]
    for what in ("clf", "poe"):
        one, two = (
            [json.loads(line) for line in (root / f"{what}{n}" / "training_dynamics.jsonl").open()]
            for n in (1, 2)
        )
        assert [r["id"] for r in one] == [r["id"] for r in two] and len(one) == 24
        assert {r["epochs"] for r in one} == {r["epochs"] for r in two} == {2}
        probs = [p for r in one for p in r["gold_probs"]]
        assert probs == pytest.approx([p for r in two for p in r["gold_probs"]], abs=1e-4)


def test_only_rank_0_writes_and_prints(runs: dict) -> None:
    root, stdout = runs["root"], runs["stdout"]
    assert stdout.count(f"wrote {root / 'clf2'}") == 1
    assert stdout.count(f"wrote {root / 'poe2'}") == 1
    assert stdout.count(f"generator saved to {root / 'gen2'}") == 1
    assert stdout.count(f"generator saved to {root / 'deb2'}") == 1
    assert stdout.count(f"out: {root / 'inf2'}") == 1
    assert len(stdout.strip().splitlines()) == 8  # those, 2 "trained on ...", the z-filter
    expected = {"argv.json", "train.jsonl", "bert", "gpt2", "t5"}
    expected |= {f"{what}{n}" for what in ("clf", "poe", "gen", "deb", "inf") for n in (1, 2)}
    assert {p.name for p in root.iterdir()} == expected  # no temporary or checkpoint folder
