"""Several processes: who is main, and the shipped `accelerate launch` configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from zdebias.errors import ConfigError
from zdebias.models import distributed

CONFIGS = sorted((Path(__file__).resolve().parents[3] / "configs" / "accelerate").glob("*.yaml"))


def test_rank_and_world_size_come_from_the_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert (distributed.rank(), distributed.world_size(), distributed.is_main_process()) == (
        0,
        1,
        True,
    )
    # alone, the collectives are the identity and the barrier returns at once
    distributed.barrier()
    assert distributed.broadcast({"a": 1}) == {"a": 1}
    assert distributed.sum_over_processes(7) == 7
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert (distributed.rank(), distributed.world_size(), distributed.is_main_process()) == (
        3,
        4,
        False,
    )


def test_non_main_processes_print_nothing(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from zdebias.commands._cli import emit
    from zdebias.settings_cli import CliOptions

    monkeypatch.setenv("RANK", "1")
    emit({"out": "x"}, CliOptions(), "wrote x")
    monkeypatch.setenv("RANK", "0")
    emit({"out": "x"}, CliOptions(), "wrote x")
    assert capsys.readouterr().out == "wrote x\n"


def test_accelerate_configs_are_what_accelerate_launch_accepts() -> None:
    """Each file loads with accelerate's own config loader, every key of its fsdp_config /
    deepspeed_config is an `accelerate launch` option, and the launcher's validation turns it
    into the intended launch (no GPU needed)."""
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    expected = {
        "ddp-1node-8gpu.yaml": ("multi_gpu", 8),
        "ddp-multinode.yaml": ("multi_gpu", 16),
        "fsdp-generator.yaml": ("use_fsdp", 8),
        "deepspeed-zero3-generator.yaml": ("use_deepspeed", 8),
    }
    assert sorted(p.name for p in CONFIGS) == sorted(expected)
    for path in CONFIGS:
        config = load_config_from_file(str(path))
        argv = ["--config_file", str(path), "-m", "zdebias.cli", "train-generator"]
        args = launch_command_parser().parse_args(argv)
        for section in ("fsdp_config", "deepspeed_config"):
            unknown = set(getattr(config, section) or {}) - set(vars(args))
            assert not unknown, f"{path.name}: {section} keys accelerate does not know: {unknown}"
        launch = _validate_launch_command(args)[0]
        mode, processes = expected[path.name]
        assert getattr(launch, mode) is True, path.name
        assert launch.num_processes == processes and launch.mixed_precision == "bf16"
    fsdp = load_config_from_file(
        str(CONFIGS[[p.name for p in CONFIGS].index("fsdp-generator.yaml")])
    )
    assert fsdp.fsdp_config["fsdp_state_dict_type"] == "FULL_STATE_DICT"  # one full model


def _gpus(monkeypatch: pytest.MonkeyPatch, gpus: int, processes: int) -> None:
    """CUDA that sees ``gpus`` GPUs, under a launcher that started ``processes`` here."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(processes))
    monkeypatch.setenv("RANK", "0")


@pytest.mark.parametrize(
    ("gpus", "processes", "on_cpu", "note"),
    [
        (0, 1, True, False),
        (0, 2, True, False),
        (1, 1, False, False),
        (1, 2, True, True),
        (2, 2, False, False),
        (8, 4, False, False),
    ],
)
def test_training_takes_the_gpus_only_with_one_per_process(
    monkeypatch: pytest.MonkeyPatch, capsys, gpus: int, processes: int, on_cpu: bool, note: bool
) -> None:
    """DDP needs a GPU per process: 2 processes on 1 GPU train on the CPU (gloo) and say so."""
    _gpus(monkeypatch, gpus, processes)
    assert distributed.train_on_cpu() is on_cpu
    assert distributed.train_on_cpu("cpu") is True
    err = capsys.readouterr().err
    if note:
        assert err.splitlines() == [
            f"note: {processes} processes on this machine but {gpus} CUDA GPU(s) visible: "
            f"training on the CPU (gloo); launch --nproc_per_node {gpus} to train on the GPU(s)"
        ]  # the "cpu" call: no note
    else:
        assert err == ""


def test_device_cuda_with_too_few_gpus_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _gpus(monkeypatch, 1, 2)
    with pytest.raises(ConfigError, match=r"2 processes on this machine but 1 CUDA GPU\(s\)"):
        distributed.train_on_cpu("cuda")
    _gpus(monkeypatch, 0, 1)
    with pytest.raises(ConfigError, match="no CUDA GPU is visible"):
        distributed.train_on_cpu("cuda")


def test_the_trainers_follow_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """On main, each trainer asked only torch.cuda.is_available(): 2 processes on 1 GPU both
    took cuda (NCCL: "Duplicate GPU detected") or cuda:1, which does not exist."""
    from zdebias.classify.train import _device_settings
    from zdebias.generation.trainer import _make_args

    class Run:  # TrainingRun.arguments: the overrides that would build the arguments
        def arguments(self, cls: type, overrides: dict) -> dict:
            return overrides

    _gpus(monkeypatch, 1, 2)
    assert _device_settings(None) == {"use_cpu": True, "bf16": False, "fp16": False}
    assert _make_args(Run(), {})["use_cpu"] is True  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="DDP needs one GPU per process"):
        _device_settings("cuda")
    _gpus(monkeypatch, 1, 1)
    assert _device_settings(None) == {
        "use_cpu": False,
        "bf16": True,
        "fp16": False,
        "accelerator_config": {"non_blocking": True},  # on a GPU (test_classify_speed.py)
    }
    assert "use_cpu" not in _make_args(Run(), {})  # type: ignore[arg-type]
