"""Several processes: who is main, and the shipped `accelerate launch` configs."""

from __future__ import annotations

from pathlib import Path

import pytest

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
