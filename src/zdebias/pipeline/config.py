"""What a recipe is: its settings classes, and the settings that refer to data or models.

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

A stage kind's settings class subclasses :class:`StageConfig` and marks its references with
:class:`Ref`. Reading a recipe file and checking it against the registered stage kinds is
:mod:`zdebias.pipeline.loader`'s job; this module knows no stage kind.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from zdebias.data.options import ReadOptions, split_input
from zdebias.errors import ConfigError
from zdebias.settings import DEFAULT_SEED, OwnErrors

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


class StageConfig(OwnErrors):
    """Base of every stage's settings. ``stage`` names the kind; ``seed`` overrides the recipe's."""

    model_config = ConfigDict(extra="forbid", validate_default=True)
    #: bump in a subclass when a stage's behaviour changes so old outputs are redone
    version: ClassVar[int] = 1
    stage: str
    if TYPE_CHECKING:
        # read-only to the type checker, so that a stage kind whose operation's settings hold
        # an int seed (default DEFAULT_SEED) may narrow it
        @property
        def seed(self) -> int | None: ...
    else:
        seed: int | None = Field(default=None, description="random seed (default: the recipe's)")

    def hash_excluded(self) -> set[str]:
        """Settings left out of the stage hash: none here; a stage kind with several methods
        leaves out the others' (a setting added later is left out while unset by its field's
        ``exclude_if``)."""
        return set()

    def filled(self, settings: dict[str, Any]) -> dict[str, Any]:
        """The settings with what an unset one resolves to, as the resolved recipe shows them
        (as dumped here)."""
        return settings

    def hashed(self, settings: dict[str, Any]) -> dict[str, Any]:
        """The settings as the stage hash holds them (as dumped here)."""
        return settings

    def extension_settings(self) -> frozenset[str]:
        """Settings whose change extends a finished stage instead of redoing it (none here;
        a training stage's ``seeds``): a marker whose hash without them matches is resumed."""
        return frozenset()


class DataSpec(ReadOptions):
    """A dataset the recipe reads: a path (a file, a ``save_to_disk`` folder, or
    ``hf:NAME[@CONFIG][:SPLIT[@REVISION]]``) and its reader options."""

    path: str

    @model_validator(mode="before")
    @classmethod
    def _input_options(cls, data: Any) -> Any:
        """``path: FILE::KEY=VALUE;...`` (the CLI's form) → the path and those options as
        keys of the entry, so runs hash and show them as if written as keys."""
        if not isinstance(data, Mapping) or not isinstance(data.get("path"), str):
            return data
        path, options = split_input(data["path"])
        twice = sorted(set(options) & set(data))
        if twice:
            raise ConfigError(f"data {data['path']!r}: {twice[0]!r} given twice (key and ::)")
        return {**data, **options, "path": path}

    @field_validator("path")
    @classmethod
    def _expand(cls, value: str) -> str:
        return expand_env(value)


class ReportConfig(OwnErrors):
    """What the HTML report compares: the stats stages shown as *before* and *after*."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = None
    before: str | None = None
    after: str | None = None
    top_n: int = Field(default=5, ge=1)
    examples: int = Field(default=8, ge=0)


class Recipe(OwnErrors):
    """A whole recipe: datasets, stages in order, and run-wide settings."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str | None = None
    task: str = "nli"
    seed: int = DEFAULT_SEED
    out: str | None = Field(default=None, description="default run folder")
    extends: list[str] = Field(
        default_factory=list,
        description="recipes whose run folders this recipe may run in: it adds stages to "
        "their runs, reusing every finished stage with the same settings",
    )
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
        out = cfg.filled(cfg.model_dump(mode="json"))
        if type(cfg).model_fields["seed"].default is not None or cfg.seed is not None:
            out["seed"] = self.stage_seed(name)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The resolved recipe as plain data (what ``--dry-run`` prints and the manifest keeps)."""
        out = self.model_dump(mode="json", exclude={"stages"})
        out["stages"] = {n: self._stage_dict(n) for n in self.stages}
        return out


# --------------------------------------------------------------------------- text

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


def dump_yaml(data: Any) -> str:
    """YAML text of plain data, keys in their given order."""
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
