"""Recipe files: load a YAML recipe, apply ``key=value`` overrides, validate every key.

A recipe names its datasets and its stages; each stage names its kind (``stage: filter``) and
its settings, and refers to earlier stages' outputs by name (``input: zfilter`` is the default
output of stage ``zfilter``, ``zfilter.rejected`` a named one) or to a declared dataset::

    name: snli-seq-z
    task: nli
    seed: 13
    data:
      train: hf:stanfordnlp/snli:train
      snli_hard: {path: "${ZDEBIAS_DATA}/snli_hard/snli_1.0_test_hard.jsonl"}
    stages:
      zfilter:
        stage: filter
        input: train
        batch_size: 2000

Everything is checked before anything runs: unknown keys fail with the list of valid ones,
references must name a dataset or an *earlier* stage output of the right kind.

>>> recipe = load_recipe("configs/demo.yaml", ["stages.samples.n=200"])  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import importlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from zdebias.data.options import ReadOptions
from zdebias.errors import ConfigError
from zdebias.settings import DEFAULT_SEED

# --------------------------------------------------------------------------- references


@dataclass(frozen=True)
class Ref:
    """Marks a stage setting as a reference to data or a model (``Annotated[str, Ref(...)]``).

    ``kind``: what the reference must produce: ``records`` (a dataset), ``model`` (a model
    folder), ``json`` or ``file``. ``external``: a value that names no dataset or stage is
    kept as is (a hub name, a packaged alias such as ``smollm2``, or a local path).
    """

    kind: Literal["records", "model", "json", "file"]
    external: bool = False


def field_refs(model: type[BaseModel]) -> dict[str, Ref]:
    """The settings of a stage config class that are references, by field name."""
    out: dict[str, Ref] = {}
    for name, info in model.model_fields.items():
        for meta in info.metadata:
            if isinstance(meta, Ref):
                out[name] = meta
    return out


def iter_leaves(value: Any) -> Iterator[Any]:
    """Every value other than None inside a setting: the value itself, or the items of a list /
    the values of a dict, nested (a string is a leaf)."""
    if value is None:
        return
    if isinstance(value, Mapping):
        for item in value.values():
            yield from iter_leaves(item)
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for item in value:
            yield from iter_leaves(item)
    else:
        yield value


def iter_ref_values(value: Any) -> Iterator[str]:
    """Every reference string inside a setting (a string, a list, or a dict's values)."""
    return (item for item in iter_leaves(value) if isinstance(item, str))


# --------------------------------------------------------------------------- models


class StageConfig(BaseModel):
    """Base of every stage's settings. ``stage`` names the kind; ``seed`` overrides the recipe's."""

    model_config = ConfigDict(extra="forbid", validate_default=True)
    #: bump in a subclass when a stage's behaviour changes so old outputs are redone
    version: ClassVar[int] = 1

    stage: str
    seed: int | None = Field(default=None, description="random seed (default: the recipe's)")


class DataSpec(ReadOptions):
    """A dataset the recipe reads: a path (a file, a ``save_to_disk`` folder, or
    ``hf:NAME[@CONFIG][:SPLIT[@REVISION]]``) and its reader options."""

    path: str

    @field_validator("path")
    @classmethod
    def _expand(cls, value: str) -> str:
        return expand_env(value)


class ReportConfig(BaseModel):
    """What the HTML report compares: the stats stages shown as *before* and *after*."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = None
    before: str | None = None
    after: str | None = None
    top_n: int = Field(default=5, ge=1)
    examples: int = Field(default=8, ge=0)


class Recipe(BaseModel):
    """A whole recipe: datasets, stages in order, and run-wide settings."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str | None = None
    task: str = "nli"
    seed: int = DEFAULT_SEED
    out: str | None = Field(default=None, description="default run folder")
    plugins: list[str] = Field(
        default_factory=list, description="modules to import first (they register stages)"
    )
    data: dict[str, DataSpec] = Field(default_factory=dict)
    stages: dict[str, StageConfig]
    report: ReportConfig = Field(default_factory=ReportConfig)

    @field_validator("data", mode="before")
    @classmethod
    def _short_data(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: {"path": v} if isinstance(v, str) else v for k, v in value.items()}
        return value

    def stage_seed(self, name: str) -> int:
        """The effective random seed of a stage: its own ``seed`` if set, else the recipe's."""
        cfg = self.stages[name]
        own = cfg.seed if "seed" in cfg.model_fields_set else None
        return self.seed if own is None else own

    def _stage_dict(self, name: str) -> dict[str, Any]:
        """A stage's settings; an operation's seed (an int, default 0) shows the effective seed
        so that the dump reloads to the same run (an unset plain ``seed`` stays null)."""
        cfg = self.stages[name]
        out = cfg.model_dump(mode="json")
        if type(cfg).model_fields["seed"].default is not None or cfg.seed is not None:
            out["seed"] = self.stage_seed(name)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The resolved recipe as plain data (what ``--dry-run`` prints and the manifest keeps)."""
        out = self.model_dump(mode="json", exclude={"stages"})
        out["stages"] = {n: self._stage_dict(n) for n in self.stages}
        return out


# --------------------------------------------------------------------------- stage kinds

#: stage kind → settings class; filled by :func:`zdebias.pipeline.stages.register_stage`.
STAGE_CONFIGS: dict[str, type[StageConfig]] = {}
#: stage kind → {output name: output kind}; the first output is the default one.
STAGE_OUTPUTS: dict[str, dict[str, str]] = {}


def _known_stages() -> dict[str, type[StageConfig]]:
    import zdebias.pipeline.stages  # noqa: F401 - registers the built-in stages

    return STAGE_CONFIGS


# --------------------------------------------------------------------------- loading

_FLOAT_RE = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")
_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(text: str) -> str:
    """Expand ``${VAR}`` and ``${VAR:-default}``; an unset variable without default fails."""

    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = os.environ.get(name)
        if value:
            return value
        if default is not None:
            return default
        raise ConfigError(
            f"{text!r} needs the environment variable {name} (or write ${{{name}:-DEFAULT}}, "
            f"or override the path on the command line)"
        )

    return _ENV_RE.sub(sub, text)


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
    for text in overrides:
        path, value = parse_override(text)
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


def _describe_error(err: dict[str, Any], model: type[BaseModel], where: str) -> str:
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
    for module in data.get("plugins") or []:
        try:
            importlib.import_module(str(module))
        except ImportError as err:
            raise ConfigError(f"{source}: plugin {module!r} cannot be imported: {err}") from None
    kinds = _known_stages()
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
        stages[str(name)] = _validate(kinds[kind], dict(settings), f"stages.{name}")
    recipe = _validate(Recipe, {**data, "stages": {}}, "")
    recipe.stages = stages
    _check_references(recipe)
    from zdebias.data.labels import get_task

    get_task(recipe.task)
    return recipe


def _check_references(recipe: Recipe) -> None:
    """Every reference names a dataset or an earlier stage output of the kind it needs."""
    clash = set(recipe.data) & set(recipe.stages)
    if clash:
        raise ConfigError(f"names used for both a dataset and a stage: {', '.join(sorted(clash))}")
    earlier: list[str] = []
    for name, cfg in recipe.stages.items():
        for fld, ref in field_refs(type(cfg)).items():
            for value in iter_ref_values(getattr(cfg, fld)):
                resolve_reference(recipe, value, ref, earlier, where=f"stages.{name}.{fld}")
        earlier.append(name)


@dataclass(frozen=True)
class Target:
    """What a reference points at: a dataset, a stage output, or an external model name."""

    kind: Literal["data", "stage", "external"]
    name: str
    output: str | None = None


def resolve_reference(
    recipe: Recipe, value: str, ref: Ref, earlier: Sequence[str], *, where: str
) -> Target:
    """Resolve one reference string, failing with what would have been valid."""
    head, _, tail = value.partition(".")
    if head in recipe.stages and head not in earlier:
        raise ConfigError(
            f"{where}: {value!r} refers to stage {head!r}, which does not run before this one"
        )
    if head in earlier:
        kind = recipe.stages[head].stage
        outputs = STAGE_OUTPUTS[kind]
        output = tail or next(iter(outputs))
        if output not in outputs:
            raise ConfigError(
                f"{where}: stage {head!r} ({kind}) has no output {output!r}; its outputs are "
                f"{', '.join(outputs)}"
            )
        if outputs[output] != ref.kind:
            raise ConfigError(
                f"{where}: {value!r} is a {outputs[output]} output but a {ref.kind} is needed"
            )
        return Target("stage", head, output)
    if value in recipe.data:
        if ref.kind != "records":
            raise ConfigError(f"{where}: {value!r} is a dataset but a {ref.kind} is needed")
        return Target("data", value)
    if ref.external:
        return Target("external", value)
    choices = [*recipe.data, *earlier]
    raise ConfigError(
        f"{where}: {value!r} names no dataset or earlier stage; valid names: "
        f"{', '.join(choices) or '(none)'}"
    )


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


def dump_yaml(data: Any) -> str:
    """YAML text of plain data, keys in their given order."""
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
