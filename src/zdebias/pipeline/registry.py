"""The stage registry: a stage kind is a plain function of its settings, inputs and context.

::

    class CountConfig(StageConfig):
        input: Annotated[str, Ref("records")]

    @register_stage("count", config=CountConfig, outputs={"summary": "json"})
    def count(cfg: CountConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
        records = inputs.records("input")
        write_json({"n": len(records)}, ctx.out_dir / "summary.json")
        return StageResult({"summary": "summary.json"})

The function writes only inside ``ctx.out_dir`` (a work folder that the runner renames into
place once the stage has finished and its done-marker is written), reads its inputs through
:class:`Inputs` (which counts rows in), and returns the relative path of each declared output
plus row counts out and a few metrics for the manifest.

A module registers its stage kinds when it is imported: the built-in ones are imported by
:mod:`zdebias.pipeline.catalogue`, a plug-in by the recipe that names it under ``plugins:``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from zdebias.data.labels import Task
from zdebias.data.mapping import ReadReport
from zdebias.data.options import counted, dataset_warnings
from zdebias.data.schema import Record
from zdebias.data.where import where_text
from zdebias.errors import ConfigError
from zdebias.pipeline.config import DataSpec, StageConfig

OUTPUT_KINDS = ("records", "model", "json", "file")


@dataclass
class StageResult:
    """What a stage made: output name → path relative to its folder, rows out, metrics."""

    outputs: dict[str, str]
    rows_out: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class StageContext:
    """Where and how a stage runs."""

    name: str
    kind: str
    out_dir: Path
    run_dir: Path
    task: Task
    seed: int
    resumed: bool = False
    progress: bool = True
    rows_in: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def note(self, message: str) -> None:
        """Record something the user should know (skipped rows, dropped samples)."""
        self.notes.append(message)


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class DataInput:
    """A dataset declared in the recipe's ``data`` section."""

    name: str
    spec: DataSpec


@dataclass(frozen=True)
class OutputInput:
    """An earlier stage's output: a file or folder inside the run."""

    stage: str
    output: str
    kind: str
    path: Path


@dataclass(frozen=True)
class ExternalInput:
    """A model named outside the recipe: hub name, packaged alias or local path."""

    value: str


Resolved = DataInput | OutputInput | ExternalInput


def read_data(spec: DataSpec, task: Task, ctx: StageContext | None = None) -> list[Record]:
    """Read a declared dataset, telling the context what the reader skipped."""
    records, rep = spec.read(spec.path, task=task, what="recipe data")
    if ctx is not None:
        note_skipped(ctx, spec.path, rep)
    return records


def note_skipped(ctx: StageContext, path: str, report: ReadReport) -> None:
    """Note in the run what reading the declared dataset ``path`` skipped, if anything, and
    how its raw labels were read when they were not the task's names, and the records it
    named FILE:LINE where others have an id."""
    if report.n_unlabelled or report.n_errors:
        ctx.note(
            f"{path}: skipped {counted(report.n_unlabelled, 'row')} without a gold label and "
            f"{counted(report.n_errors, 'bad row')}"
        )
    if report.n_skipped_by_where:
        ctx.note(
            f"{path}: left out {counted(report.n_skipped_by_where, 'row')} not selected by where "
            f"{where_text(report.where or {})}"
        )
    if (mapping := report.mapping_line()) is not None:
        ctx.note(mapping)
    if (derived := report.derived_ids_line()) is not None:
        ctx.note(derived)


class Inputs:
    """A stage's resolved references, by setting name; reading records counts rows in."""

    def __init__(self, values: Mapping[str, Any], ctx: StageContext) -> None:
        self._values = dict(values)
        self._ctx = ctx

    def __contains__(self, name: str) -> bool:
        return self._values.get(name) is not None

    def get(self, name: str) -> Any:
        """The resolved value (a :data:`Resolved`, or a list / dict of them, or None)."""
        return self._values.get(name)

    def records(self, name: str, key: str | None = None) -> list[Record]:
        """The records of a reference setting (``key`` picks one entry of a dict setting)."""
        value = self._values.get(name)
        if isinstance(value, Mapping) and key is not None:
            value = value[key]
        if value is None:
            raise ConfigError(f"stage {self._ctx.name!r}: setting {name!r} is not set")
        records = self.read(value)
        label = name if key is None else f"{name}.{key}"
        self._ctx.rows_in[label] = len(records)
        where = f"stage {self._ctx.name!r}, input {label!r}"
        for line in dataset_warnings(records, where, min_records=0):
            self._ctx.note(line)  # a single label, duplicate ids: told, with counts
        return records

    def read(self, value: Resolved) -> list[Record]:
        """Records of one resolved reference (not counted)."""
        if isinstance(value, DataInput):
            return read_data(value.spec, self._ctx.task, self._ctx)
        if isinstance(value, OutputInput) and value.kind == "records":
            from zdebias.data.readers import read_records

            return read_records(value.path, format="jsonl", task=self._ctx.task)
        raise ConfigError(f"stage {self._ctx.name!r}: {value} is not a dataset")

    def path(self, name: str) -> str | None:
        """A model / json reference as something to load: a folder path or an external name."""
        value = self._values.get(name)
        return None if value is None else as_path(value)

    def json(self, name: str) -> Any:
        """The content of a json reference."""
        value = self._values.get(name)
        if not isinstance(value, OutputInput):
            raise ConfigError(f"stage {self._ctx.name!r}: setting {name!r} is not a json output")
        return json.loads(value.path.read_text(encoding="utf-8"))


def as_path(value: Resolved) -> str:
    """A resolved model reference as a string ``from_pretrained`` / ``resolve_model`` takes."""
    if isinstance(value, OutputInput):
        return str(value.path)
    if isinstance(value, ExternalInput):
        return value.value
    return value.spec.path


# --------------------------------------------------------------------------- registry

StageFn = Callable[[Any, Inputs, StageContext], StageResult]
F = TypeVar("F", bound=StageFn)


@dataclass(frozen=True)
class StageSpec:
    """A registered stage kind."""

    kind: str
    config: type[StageConfig]
    outputs: dict[str, str]
    fn: StageFn
    doc: str = ""


#: stage kind → its spec, filled by :func:`register_stage` as stage modules are imported
STAGES: dict[str, StageSpec] = {}


def register_stage(
    kind: str, *, config: type[StageConfig], outputs: Mapping[str, str]
) -> Callable[[F], F]:
    """Register a stage kind; ``outputs`` maps output names to kinds (first = default)."""
    if not outputs:
        raise ValueError(f"stage {kind!r} must declare at least one output")
    bad = [k for k in outputs.values() if k not in OUTPUT_KINDS]
    if bad:
        raise ValueError(f"stage {kind!r}: output kinds must be {OUTPUT_KINDS}, not {bad}")

    def decorate(fn: F) -> F:
        if kind in STAGES and STAGES[kind].fn is not fn:
            raise ValueError(f"stage kind {kind!r} is already registered")
        doc = (fn.__doc__ or "").strip().splitlines()
        STAGES[kind] = StageSpec(kind, config, dict(outputs), fn, doc[0] if doc else "")
        return fn

    return decorate


def map_refs(value: Any, fn: Callable[[str], Any]) -> Any:
    """Apply ``fn`` to every reference string in a setting, keeping its list / dict shape."""
    if value is None:
        return None
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, Mapping):
        return {k: map_refs(v, fn) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [map_refs(v, fn) for v in value]
    return value
