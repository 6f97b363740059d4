"""One front door: each generator setting is declared once (``zdebias.generation.settings``)
and its stage config, its command's options and its library function agree with it."""

from __future__ import annotations

import inspect
import logging
import random
from typing import Any, Literal, get_args, get_origin

import pytest
import typer.main

from zdebias.cli import app
from zdebias.generation.sample import sample_generator
from zdebias.generation.settings import (
    DebiasSettings,
    GeneratorSettings,
    PromptSettings,
    SampleSettings,
)
from zdebias.generation.trainer import debias_generator, train_generator
from zdebias.pipeline.stages.generation import (
    DebiasGeneratorConfig,
    SampleConfig,
    TrainGeneratorConfig,
)
from zdebias.settings import DEFAULT_SEED, cli_meta
from zdebias.settings_cli import flag_of

CASES = [
    (GeneratorSettings, TrainGeneratorConfig, "train-generator", train_generator),
    (DebiasSettings, DebiasGeneratorConfig, "debias-generator", debias_generator),
    (SampleSettings, SampleConfig, "sample", sample_generator),
]


def _default(info: Any) -> Any:
    return info.default_factory() if info.default_factory is not None else info.default


def _choices(tp: Any) -> tuple[Any, ...] | None:
    for arg in (tp, *get_args(tp)):
        if get_origin(arg) is Literal:
            return get_args(arg)
    return None


@pytest.mark.parametrize(("settings", "config", "name", "fn"), CASES)
def test_stage_config_is_the_settings_plus_references(settings, config, name, fn) -> None:
    assert issubclass(config, settings)
    for field, info in settings.model_fields.items():
        staged = config.model_fields[field]
        assert staged.annotation == info.annotation, field
        assert _default(staged) == _default(info), field
        assert staged.metadata == info.metadata, field  # the constraints (ge, gt ...)
    extra = set(config.model_fields) - set(settings.model_fields) - {"stage"}
    if config is SampleConfig:  # prompted sampling: its settings and its two datasets;
        # targeted sampling: the cells and the D0 that measures them
        extra -= set(PromptSettings.model_fields) | {"premises", "examples", "cells"}
        extra -= {"measure_with"}
    assert extra <= {"model", "train", "generator", "kept", "rejected"}, extra


@pytest.mark.parametrize(("settings", "config", "name", "fn"), CASES)
def test_command_options_are_the_settings_fields(settings, config, name, fn) -> None:
    params = typer.main.get_command(app).commands[name].params  # type: ignore[attr-defined]
    by_flag = {opt: p for p in params for opt in p.opts}
    for field, info in settings.model_fields.items():
        if not cli_meta(info)["cli"]:
            assert field == "keep_dropped", field
            continue
        param = by_flag[flag_of(field, info)]
        if cli_meta(info)["repeat"]:
            assert param.multiple and param.default is None, field  # --set, repeatable
            continue
        if info.is_required():
            assert param.required, field
        else:
            assert param.default == _default(info), field
        choices = _choices(info.annotation)
        if choices is not None:
            assert _choices(param.type_descriptor.annotation) == choices, field
    if settings is not SampleSettings:
        assert "--set" in by_flag and by_flag["--set"].multiple  # extra, KEY=VALUE, repeatable


@pytest.mark.parametrize(("settings", "config", "name", "fn"), CASES)
def test_library_function_takes_the_settings_object(settings, config, name, fn) -> None:
    param = inspect.signature(fn).parameters["settings"]
    assert settings.__name__ in str(param.annotation)
    assert "progress" in inspect.signature(fn).parameters


def test_one_seed_default_and_one_vocabulary() -> None:
    for cls in (GeneratorSettings, DebiasSettings, SampleSettings):
        assert cls.model_fields["seed"].default == DEFAULT_SEED
    assert (
        DebiasSettings().consistency_weight == 0.0 and GeneratorSettings().consistency_weight == 0.5
    )


def test_old_names_still_work_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="zdebias"):
        cfg = TrainGeneratorConfig(stage="train-generator", model="m", train="t", lr=1e-3)
        debias = DebiasSettings.of(None, debias_alpha=2.0, per_device_train_batch_size=8)
    assert cfg.learning_rate == 1e-3
    assert (debias.alpha, debias.batch_size) == (2.0, 8)
    assert "'lr' is deprecated" in caplog.text and "'debias_alpha' is deprecated" in caplog.text


def test_training_arguments_mapping() -> None:
    s = GeneratorSettings.of(None, extra=["logging_steps=5", "label_init=eos"], warmup_steps=3)
    assert s.extra == {"logging_steps": 5, "label_init": "eos", "warmup_steps": 3}
    assert s.training_arguments(progress=False) == {
        "num_train_epochs": 5.0,
        "learning_rate": 1e-5,
        "per_device_train_batch_size": 24,
        "gradient_accumulation_steps": 1,
        "max_length": 128,
        "max_steps": -1,
        "seed": 0,
        "consistency_weight": 0.5,
        "disable_tqdm": True,
        "logging_steps": 5,
        "label_init": "eos",
        "warmup_steps": 3,
    }
    args = DebiasSettings(alpha=0.5).training_arguments()
    assert (args["debias_alpha"], args["consistency_weight"], args["disable_tqdm"]) == (
        0.5,
        0,
        False,
    )


def test_subset_picks_the_rows_of_0_1() -> None:
    rows = list(range(100))
    picked = GeneratorSettings(subset=10, seed=42).pick(rows)
    assert picked == sorted(random.Random(42).sample(range(100), 10))
    assert (
        GeneratorSettings().pick(rows) == rows and GeneratorSettings(subset=500).pick(rows) == rows
    )


def test_sample_run_settings_are_what_state_json_records() -> None:
    s = SampleSettings(n=5)
    assert s.run_settings() == {
        "batch_size": 64,
        "top_p": 0.9,
        "top_k": 0,
        "temperature": 1.0,
        "seed": 0,
        "shard_size": 10_000,
        "backend": "hf",
    }
