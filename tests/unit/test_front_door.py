"""One front door per operation: a stage, its command and its library function agree.

Every stage config that subclasses an operation's settings class must keep each of its fields
with the same type, default and choices (references may re-declare a model name as a ref);
every command generated from a settings class must offer each CLI field with the same flag,
default and choices; the library functions take that settings class.
"""

from __future__ import annotations

import inspect
from typing import Any, Literal, get_args, get_origin

import click
import pytest
import typer.main

from zdebias.cli import app
from zdebias.pipeline.catalogue import get_stage
from zdebias.pipeline.config import Ref, StageConfig
from zdebias.pipeline.registry import STAGES
from zdebias.settings import Settings, cli_meta


def _settings_bases(config: type[StageConfig]) -> list[type[Settings]]:
    """The operation settings a stage config is built on (the most derived ones)."""
    found = [
        k
        for k in config.__mro__[1:]
        if issubclass(k, Settings) and not issubclass(k, StageConfig) and k is not Settings
    ]
    return [k for k in found if not any(o is not k and issubclass(o, k) for o in found)]


def _choices(tp: Any) -> tuple[Any, ...] | None:
    """The choices a CLI option offers for a field: its Literal's values, where the field is
    a Literal (or an optional one); a number-or-keyword field (``float | Literal["critical"]``)
    is text the model parses, its keyword named in the help."""
    args = [a for a in get_args(tp) if a is not type(None)] if get_origin(tp) else []
    if get_origin(tp) is Literal:
        return get_args(tp)
    if len(args) == 1 and get_origin(args[0]) is Literal:
        return get_args(args[0])
    return None


def _keywords(tp: Any) -> tuple[Any, ...]:
    """The Literal values of a number-or-keyword field (empty for any other field)."""
    args = [a for a in get_args(tp) if a is not type(None)] if get_origin(tp) else []
    if len(args) < 2:
        return ()
    return tuple(v for a in args if get_origin(a) is Literal for v in get_args(a))


def _is_ref(info: Any) -> bool:
    return any(isinstance(m, Ref) for m in info.metadata)


def _commands() -> dict[str, click.Command]:
    group = typer.main.get_command(app)
    out: dict[str, click.Command] = {}
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        # a group by what it has: typer >= 0.26 vendors click, so it is no click.Group
        subcommands = getattr(cmd, "commands", None)
        if subcommands:
            out.update({f"{name} {sub}": c for sub, c in subcommands.items()})
        else:
            out[name] = cmd
    return out


def _stage_pairs() -> list[tuple[str, type[Settings]]]:
    get_stage("stats")
    return [(kind, base) for kind, spec in STAGES.items() for base in _settings_bases(spec.config)]


def test_every_operation_stage_is_built_on_a_settings_class() -> None:
    kinds = {kind for kind, _ in _stage_pairs()}
    builtin = {k for k, s in STAGES.items() if s.fn.__module__.startswith("zdebias.")}
    plain = {"concat"}  # concatenation has no settings of its own
    assert builtin - plain <= kinds, sorted(builtin - plain - kinds)


@pytest.mark.parametrize(
    ("kind", "settings"), _stage_pairs(), ids=lambda v: getattr(v, "__name__", v)
)
def test_stage_keeps_every_setting(kind: str, settings: type[Settings]) -> None:
    config = STAGES[kind].config
    for name, info in settings.model_fields.items():
        assert name in config.model_fields, (kind, name)
        mine = config.model_fields[name]
        if _is_ref(mine):
            continue  # a model name re-declared as a reference to a stage output
        assert mine.annotation == info.annotation, (kind, name)
        assert mine.default == info.default, (kind, name)
        assert _choices(mine.annotation) == _choices(info.annotation), (kind, name)
        assert mine.metadata == info.metadata, (kind, name)


def _command_pairs() -> list[tuple[str, Any]]:
    out = []
    for name, cmd in _commands().items():
        fn = getattr(cmd, "callback", None)
        models = getattr(fn, "settings_models", None) or getattr(
            getattr(fn, "__wrapped__", None), "settings_models", None
        )
        if models:
            out.append((name, (fn, models)))
    return out


def test_commands_take_settings() -> None:
    names = {name for name, _ in _command_pairs()}
    assert {"stats", "filter", "combine", "inspect", "convert"} <= names


@pytest.mark.parametrize(
    ("name", "entry"), _command_pairs(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_command_offers_every_setting(name: str, entry: Any) -> None:
    fn, models = entry
    cmd = _commands()[name]
    by_flag = {opt: p for p in cmd.params for opt in p.opts}
    excluded = set(getattr(fn, "settings_excluded", ()))
    for model in models.values():
        for field, info in model.model_fields.items():
            meta = cli_meta(info)
            if not meta["cli"] or field in excluded:
                continue
            flag = meta["flag"] or "--" + field.replace("_", "-")
            assert flag in by_flag, (name, field, flag)
            param = by_flag[flag]
            if info.default_factory is None and not info.is_required():
                assert param.default == info.default, (name, field, param.default)
            choices = _choices(info.annotation)
            if choices is not None:
                offered = tuple(param.type_descriptor.choices or ())
                assert offered == tuple(choices), (name, field, offered)
            for keyword in _keywords(info.annotation):  # e.g. --min-z critical
                assert keyword in (param.help or ""), (name, field, keyword)
            for old in meta["deprecated"]:
                if old.startswith("-"):
                    flag = old.partition("=")[0]  # "--free=false": the hidden flag --free
                    assert flag in by_flag and by_flag[flag].hidden, (name, field, old)


LIBRARY = {
    "zdebias.stats.zfilter:z_filter": "ZFilterSettings",
    "zdebias.stats.aflite:aflite_filter": "AfliteSettings",
    "zdebias.api:aflite_filter": "AfliteSettings",
    "zdebias.stats.recipes:combine": "ZFilterSettings",
    "zdebias.stats.measure:measure": "StatsSettings",
    "zdebias.classify.train:train_classifier": "ClassifierSettings",
    "zdebias.classify.confidence:confidence_filter": "ConfidenceSettings",
    "zdebias.evaluation.suites:evaluate_models": "InferenceSettings",
    "zdebias.evaluation.significance:compare_files": "CompareSettings",
    "zdebias.generation.trainer:train_generator": "GeneratorSettings",
    "zdebias.generation.trainer:debias_generator": "DebiasSettings",
    "zdebias.generation.sample:sample_generator": "SampleSettings",
    "zdebias.counterfactual.rationales:extract_rationales": "RationaleSettings",
    "zdebias.counterfactual.trainer:train_infiller": "InfillSettings",
    "zdebias.counterfactual.select:generate_counterfactuals": "SelectSettings",
    "zdebias.counterfactual.metrics:counterfactual_metrics": "MetricsSettings",
    "zdebias.data.demo:write_demo_corpus": "DemoDataSettings",
}


@pytest.mark.parametrize("target", sorted(LIBRARY))
def test_library_functions_take_the_settings_object(target: str) -> None:
    import importlib

    module, fn_name = target.split(":")
    fn = getattr(importlib.import_module(module), fn_name)
    param = inspect.signature(fn).parameters["settings"]
    assert LIBRARY[target] in str(param.annotation)
