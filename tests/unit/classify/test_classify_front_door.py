"""One front door: the stage configs, the commands and the library agree on every setting."""

from __future__ import annotations

import inspect
import json
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import pytest
import typer.main
from typer.testing import CliRunner

from zdebias.classify.confidence import DEFAULT_TAU
from zdebias.classify.settings import (
    LOSS_NAMES,
    ClassifierSettings,
    ConfidenceSettings,
    InferenceSettings,
)
from zdebias.cli import app
from zdebias.errors import ConfigError
from zdebias.evaluation.settings import CompareSettings, EvaluateSettings
from zdebias.pipeline.stages.classify import (
    ConfidenceFilterConfig,
    EvaluateConfig,
    TrainClassifierConfig,
)
from zdebias.settings import DEFAULT_SEED, cli_meta

STAGES = [
    (ClassifierSettings, TrainClassifierConfig),
    (ConfidenceSettings, ConfidenceFilterConfig),
    (EvaluateSettings, EvaluateConfig),
]
COMMANDS = [
    ("train-classifier", ClassifierSettings),
    ("confidence-filter", ConfidenceSettings),
    ("predict", InferenceSettings),
    ("evaluate", EvaluateSettings),
    ("compare", CompareSettings),
]


def _choices(tp: Any) -> tuple[Any, ...] | None:
    if get_origin(tp) in (Union, types.UnionType):
        inner = [a for a in get_args(tp) if a is not type(None)]
        tp = inner[0] if len(inner) == 1 else tp
    return get_args(tp) if get_origin(tp) is Literal else None


def _constraints(info: Any) -> list[Any]:
    """The pydantic constraints of a field (``ge``, ``gt`` ...), without pipeline refs."""
    return [m for m in info.metadata if type(m).__module__.startswith("annotated_types")]


def _params(command: str) -> dict[str, Any]:
    cmd = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    return {p.name: p for p in cmd.params}


def _cli_choices(param: Any) -> tuple[Any, ...] | None:
    for holder in (getattr(param, "type_descriptor", None), getattr(param, "type", None)):
        choices = getattr(holder, "choices", None)
        if choices is not None:
            return tuple(choices)
    return None


@pytest.mark.parametrize(("settings", "stage"), STAGES, ids=lambda c: c.__name__)
def test_stage_config_is_the_settings_plus_references(settings: Any, stage: Any) -> None:
    assert issubclass(stage, settings)
    for name, info in settings.model_fields.items():
        got = stage.model_fields[name]
        assert got.annotation == info.annotation, name
        assert got.default == info.default, name
        assert _choices(got.annotation) == _choices(info.annotation), name
        assert _constraints(got) == _constraints(info), name
    extra = set(stage.model_fields) - set(settings.model_fields) - {"stage", "seed"}
    refs = {"train", "dev", "seeds"} if stage is TrainClassifierConfig else set()
    refs |= {"input", "classifier"} if stage is ConfidenceFilterConfig else set()
    # evaluate also names which of its methods the t-tests compare against (stage-only: the
    # methods exist only in the recipe; `zdebias compare` takes the baseline file first)
    # and whether it also tests each group of a grouped suite (HANS heuristics; `zdebias
    # compare --detail`), and its primary Holm family (`zdebias compare --family`)
    evaluate = {"classifiers", "suites", "baselines", "detail", "family"}
    refs |= evaluate if stage is EvaluateConfig else set()
    assert extra == refs


@pytest.mark.parametrize(("command", "settings"), COMMANDS, ids=[c for c, _ in COMMANDS])
def test_every_setting_is_an_option_with_its_default_and_choices(
    command: str, settings: Any
) -> None:
    params = _params(command)
    for name, info in settings.model_fields.items():
        meta = cli_meta(info)
        param = params[name]
        assert param.opts[0] == (meta["flag"] or "--" + name.replace("_", "-")), name
        if meta["repeat"]:  # --set KEY=VALUE, repeatable (default: none)
            assert param.multiple and param.default is None, name
            continue
        assert param.default == info.default, name
        assert _cli_choices(param) == _choices(info.annotation), name
        old = [d for d in meta["deprecated"] if d.startswith("-")]
        hidden = [p.opts[0] for p in params.values() if p.name.startswith(f"{name}__deprecated")]
        assert hidden == old, name


def test_old_spellings_and_table_9_defaults() -> None:
    s = ClassifierSettings()
    table_9 = ClassifierSettings(model="bert-base-uncased").schedule()  # the packaged MiniLM
    assert (table_9.learning_rate, s.batch_size, table_9.epochs, table_9.warmup_steps) == (
        1e-5,
        32,
        5.0,
        2000,
    )  # has its own schedule (test_schedule.py)
    assert (s.max_length, s.patience, s.seed, s.loss) == (128, 3, DEFAULT_SEED, "ce")
    old = ClassifierSettings.of(input="hypothesis-only", lr=1e-4, sample=5, dev_sample=3)
    assert (old.input_kind, old.learning_rate, old.subset, old.dev_subset) == (
        "hypothesis-only",
        1e-4,
        5,
        3,
    )
    assert ConfidenceSettings.of(tau=0.5).threshold == 0.5
    assert ConfidenceSettings().threshold == DEFAULT_TAU
    cfg = TrainClassifierConfig.model_validate(
        {"stage": "train-classifier", "train": "d", "input": "text", "lr": 2e-5}
    )
    assert (cfg.input_kind, cfg.learning_rate, cfg.model) == ("text", 2e-5, "minilm")
    assert ClassifierSettings.take(cfg) == ClassifierSettings(input_kind="text", learning_rate=2e-5)
    with pytest.raises(ConfigError, match="unknown loss 'focal'"):
        ClassifierSettings.of(loss="focal")
    with pytest.raises(ConfigError, match="batch_size"):
        ClassifierSettings.of(batch_size=0)
    with pytest.raises(ConfigError, match="cross_fit is for hypothesis-only"):
        ClassifierSettings(cross_fit=3).check()


def test_loss_names_are_the_registered_losses() -> None:
    from zdebias.classify.losses import LOSSES

    assert tuple(LOSSES) == LOSS_NAMES


def test_library_takes_the_settings_object() -> None:
    from zdebias.classify.confidence import confidence_filter
    from zdebias.classify.train import cross_fit_predictions, train_classifier
    from zdebias.evaluation.suites import evaluate_models

    for fn in (train_classifier, cross_fit_predictions, confidence_filter, evaluate_models):
        params = inspect.signature(fn).parameters
        assert params["settings"].default is None
        assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def test_the_command_hands_the_library_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zdebias.classify.train as train_module

    seen: dict[str, Any] = {}

    def fake(train: Any, dev: Any, out: Any, settings: Any, **kwargs: Any) -> dict[str, Any]:
        seen.update(settings=settings, n=len(train), n_dev=len(dev), **kwargs)
        best = {"step": 1, "epoch": 1.0, "dev_accuracy": 0.5}
        return {"n_train": 2, "n_dev": 1, "steps": 1, "best": best, "train_samples_per_second": 1}

    monkeypatch.setattr(train_module, "train_classifier", fake)
    data = tmp_path / "d.jsonl"
    row = {"premise": "p", "hypothesis": "h", "label": "entailment"}
    data.write_text("\n".join(json.dumps(row) for _ in range(4)) + "\n")
    args = ["train-classifier", "--train", str(data), "--dev", str(data), "--out"]
    result = CliRunner().invoke(
        app, [*args, str(tmp_path / "o"), "--lr", "1e-4", "--sample", "2", "--json", "-q"]
    )
    assert result.exit_code == 0, result.output
    assert seen["settings"] == ClassifierSettings(learning_rate=1e-4, subset=2)
    assert (seen["task"], seen["progress"], seen["overwrite"]) == ("nli", False, False)
    assert json.loads(result.stdout)["best"]["dev_accuracy"] == 0.5
