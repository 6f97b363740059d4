"""Recipe files: read a YAML recipe, apply ``key=value`` overrides, validate every key.

Everything is checked before anything runs: unknown keys fail with the list of valid ones,
each stage's settings are validated by its kind's settings class (the built-in kinds and those
the recipe's ``plugins:`` register), and references must name a dataset or an *earlier* stage
output of the right kind (:mod:`zdebias.pipeline.references`).

>>> recipe = load_recipe("configs/demo.yaml", ["stages.samples.n=200"])  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from zdebias.errors import ConfigError
from zdebias.pipeline.catalogue import load_plugins
from zdebias.pipeline.config import Recipe, StageConfig
from zdebias.pipeline.references import check_references
from zdebias.pipeline.registry import STAGES

# --------------------------------------------------------------------------- overrides

_FLOAT_RE = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b.c=VALUE`` → (["a", "b", "c"], VALUE parsed as YAML: numbers, bools, lists)."""
    import yaml

    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"bad override {text!r}: expected KEY=VALUE, e.g. seed=3")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    if isinstance(value, str) and _FLOAT_RE.fullmatch(value.strip()):
        value = float(value)  # YAML 1.1 reads 1e-5 as a string
    return [part for part in key.strip().split(".")], value


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """A copy of ``data`` with each ``key=value`` set (intermediate mappings are created)."""
    data = copy.deepcopy(data)
    given: dict[str, str] = {}  # each key once: a second would silently replace the first
    for text in overrides:
        path, value = parse_override(text)
        key = ".".join(path)
        if path[0] == "data" and len(path) == 2:  # data.train=FILE sets data.train.path
            key += ".path"
        if key in given:
            raise ConfigError(
                f"override {key} is given twice ({given[key]} and {text}); give it once"
            )
        given[key] = text
        node: Any = data
        for i, part in enumerate(path[:-1]):
            if not isinstance(node, dict):
                where = ".".join(path[:i])
                raise ConfigError(f"override {text!r}: {where} is not a mapping")
            if part not in node or node[part] is None:
                if part == "stages" or (i == 1 and path[0] == "stages"):
                    if i == 1:
                        raise ConfigError(
                            f"override {text!r}: no stage {part!r}; stages are "
                            f"{', '.join(data.get('stages') or {})}"
                        )
                node[part] = {}
            if i == 1 and path[0] == "data" and isinstance(node[part], str):
                node[part] = {"path": node[part]}  # data.train.limit=N on `train: FILE`
            node = node[part]
        if not isinstance(node, dict):
            raise ConfigError(f"override {text!r}: {'.'.join(path[:-1])} is not a mapping")
        if path[0] == "data" and len(path) == 2 and isinstance(node.get(path[1]), dict):
            node[path[1]]["path"] = value  # data.train=FILE keeps the reader options
        else:
            node[path[-1]] = value
    return data


# --------------------------------------------------------------------------- validation


def _describe_error(err: ErrorDetails, model: type[BaseModel], where: str) -> str:
    loc = [str(x) for x in err.get("loc", ())]
    place = ".".join([where, *loc]) if where else ".".join(loc)
    if err.get("type") == "extra_forbidden":
        target = _model_at(model, loc[:-1])
        valid = sorted(target.model_fields) if target is not None else []
        parent = ".".join([where, *loc[:-1]]) if where else ".".join(loc[:-1])
        hint = f"; valid keys: {', '.join(valid)}" if valid else ""
        return f"{parent or 'the recipe'}: unknown key {loc[-1]!r}{hint}"
    if err.get("type") == "missing":
        return f"{place}: required setting is missing"
    return f"{place}: {err.get('msg', 'invalid value')} (got {err.get('input')!r})"


def _model_at(model: type[BaseModel], path: list[str]) -> type[BaseModel] | None:
    """The settings class found by following ``path`` (field names and dict keys)."""
    current: Any = model
    for part in path:
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part)
            if field is None:
                return None
            current = field.annotation
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        else:
            return None
        while get_origin(current) is not dict and not (
            isinstance(current, type) and issubclass(current, BaseModel)
        ):
            inner = [a for a in get_args(current) if a is not type(None)]
            if len(inner) != 1:
                break
            current = inner[0]
    if isinstance(current, type) and issubclass(current, BaseModel):
        return current
    return None


def _validate(model: type[BaseModel], data: Any, where: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [_describe_error(e, model, where) for e in exc.errors()]
        raise ConfigError("; ".join(problems)) from None


def recipe_from_dict(data: Mapping[str, Any], *, source: str = "recipe") -> Recipe:
    """Validate a recipe mapping: top-level keys, datasets, each stage's settings, references."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: a recipe is a mapping of settings, not {type(data).__name__}")
    data = dict(data)
    load_plugins(data.get("plugins") or [], source=source)
    kinds = STAGES
    raw_stages = data.get("stages")
    if not isinstance(raw_stages, Mapping) or not raw_stages:
        raise ConfigError(f"{source}: 'stages' must map stage names to their settings")
    stages: dict[str, StageConfig] = {}
    for name, settings in raw_stages.items():
        if not re.fullmatch(r"[A-Za-z0-9_-]+", str(name)):
            raise ConfigError(
                f"{source}: stage name {name!r} may use only letters, digits, '_' and '-'"
            )
        if not isinstance(settings, Mapping) or "stage" not in settings:
            raise ConfigError(
                f"{source}: stages.{name} needs 'stage: KIND'; kinds are {', '.join(kinds)}"
            )
        kind = settings["stage"]
        if kind not in kinds:
            raise ConfigError(
                f"{source}: stages.{name}: unknown stage kind {kind!r}; kinds are "
                f"{', '.join(sorted(kinds))}"
            )
        stages[str(name)] = _validate(kinds[kind].config, dict(settings), f"stages.{name}")
    recipe = _validate(Recipe, {**data, "stages": {}}, "")
    recipe.stages = stages
    check_references(recipe)
    from zdebias.data.labels import get_task

    get_task(recipe.task)
    return recipe


def load_recipe(path: str | Path, overrides: Sequence[str] = ()) -> Recipe:
    """Read a YAML recipe, apply ``key=value`` overrides, and validate it."""
    from zdebias.data.documents import read_document

    path = Path(path)
    data = read_document(path, missing=f"{path}: no such recipe file")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a recipe is a YAML mapping")
    data = apply_overrides(data, overrides)
    try:
        return recipe_from_dict(data, source=str(path))
    except ConfigError as err:
        text = str(err)
        raise ConfigError(text if text.startswith(f"{path}:") else f"{path}: {text}") from None
