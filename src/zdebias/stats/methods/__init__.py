"""The filter methods: one object per method, found by name (docs/architecture.md, "Adding a
filter method").

A filter method is a :class:`FilterMethod`: its ``name``, the ``settings`` class whose fields
it honours, :meth:`FilterMethod.run` on records (a :class:`FilterOutcome`: kept, rejected,
summary and the in-memory API's columns), :meth:`FilterMethod.open` on a file (a
:class:`FileJob`: the way ``zdebias filter`` and the ``filter`` stage run it; by default:
read, :meth:`run`, write) and
``text``, the ``pkg.module:function`` that renders its summary for the terminal.

:data:`~zdebias.stats.methods.catalogue.CATALOGUE` names the built-ins by dotted path, so
that nothing is imported before a method runs (``zdebias filter`` starts fast). A user's
method is named by dotted path (``--method pkg.module:Toy`` or ``path/to/toy.py:Toy``, as
``--features`` names a function) or registered with :func:`register_filter_method`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from zdebias.errors import ConfigError
from zdebias.stats.methods.catalogue import (
    CATALOGUE,
    DEFAULT_METHOD,
    REGISTRY,
    method_names,
    unknown_method,
)

if TYPE_CHECKING:
    from zdebias.data.schema import Record
    from zdebias.settings import Settings
    from zdebias.stats.aflite import Embed
    from zdebias.stats.execution.plan import Filtered
    from zdebias.stats.execution.source import FileInput, HypoOnly
    from zdebias.stats.summaries import FilterSummary


@dataclass
class FilterInputs:
    """What a method may use besides its records and settings: ``seed_records`` (conditional
    z-filtering), ``embed`` / ``embeddings`` (AFLite: a function that embeds records, or the
    rows' embeddings given), ``labels`` (the label set, as read), ``source`` (the input as
    messages name it) and ``progress``."""

    labels: tuple[str, ...] | list[str] | None = None
    seed_records: list[Record] = field(default_factory=list)
    embed: Embed | None = None
    embeddings: Any = None
    source: str = "data"
    progress: bool = False


@dataclass(frozen=True)
class FileJob:
    """What :meth:`FilterMethod.open` is given: the input file ``source``, ``settings`` (of
    the method's class, or the filter's with every method's fields), ``seed`` (a seed dataset:
    conditional z-filtering), ``hypo_only`` (applies a trained hypothesis-only model while
    reading), ``embed`` (a function that embeds records: AFLite) and ``progress``."""

    source: FileInput
    settings: Any
    seed: FileInput | None = None
    hypo_only: HypoOnly | None = None
    embed: Embed | None = None
    progress: bool = False


@dataclass
class FilterOutcome:
    """What a method decided on ``n`` records: ``kept`` and ``rejected`` (copies, each with
    ``meta.rejected_by``), the ``summary`` ``zdebias filter`` writes, ``columns`` (one value
    per input record, in their order: ``keep`` and the method's own, which the in-memory API
    adds to the user's rows) and ``result``, what a list of :class:`Record` is given back as
    (default: the outcome itself)."""

    kept: list[Record]
    rejected: list[Record]
    summary: FilterSummary
    columns: dict[str, list[Any]]
    result: Any = None


class FilterMethod:
    """A filter method. Subclass it, set :attr:`name`, :attr:`settings`, :attr:`columns`
    and write :meth:`run`; override :meth:`open` for a file way of its own (the z-filter's
    shards) and set :attr:`text` to a renderer of its summary."""

    #: The name ``--method`` and ``method:`` take.
    name: ClassVar[str] = ""
    #: The settings class whose fields the method honours.
    settings: ClassVar[type[Settings]]
    #: The columns :meth:`run` gives the in-memory API, ``keep`` first.
    columns: ClassVar[tuple[str, ...]] = ("keep",)
    #: ``pkg.module:function(summary, out) -> str``, what ``zdebias filter`` prints (None:
    #: the counts, the labels and the files written).
    text: ClassVar[str | None] = None
    #: Whether it looks at features (``keep_features`` applies) and takes a seed dataset.
    uses_features: ClassVar[bool] = False
    takes_seed: ClassVar[bool] = False
    #: The setting a recipe stage's ``like:`` sets to another dataset's size (None: none).
    size_setting: ClassVar[str | None] = None

    def sized(self, size: int, total: int) -> dict[str, Any]:
        """The settings that keep ``size`` of ``total`` rows (a stage's ``like:``)."""
        return {}

    def run(self, records: list[Record], settings: Any, inputs: FilterInputs) -> FilterOutcome:
        """Filter ``records`` (labelled, as read) with ``settings`` (of :attr:`settings`)."""
        raise NotImplementedError

    def open(self, job: FileJob) -> contextlib.AbstractContextManager[Callable[[Path], Filtered]]:
        """The file way of :func:`~zdebias.stats.execution.operations.run_filter`: read
        ``job.source``, :meth:`run`, the kept rows' z-statistics; gives
        ``write(folder) -> Filtered``."""
        return _read_run_write(self, job)


@contextlib.contextmanager
def _read_run_write(method: FilterMethod, job: FileJob) -> Iterator[Callable[[Path], Filtered]]:
    """:meth:`FilterMethod.open`'s default way, for ``method``."""
    from zdebias.stats.execution.plan import Filtered
    from zdebias.stats.execution.source import read_source
    from zdebias.stats.measure import stats_of_kept

    source, settings, progress = job.source, job.settings, job.progress
    records, report = read_source(source, settings, hypo_only=job.hypo_only, progress=progress)
    inputs = FilterInputs(
        labels=report.labels, embed=job.embed, source=source.shown, progress=progress
    )
    outcome = method.run(records, method.settings.take(settings), inputs)
    kept = outcome.kept
    summary: FilterSummary = {
        "method": method.name,
        "n_input": len(records),
        "n_seed": 0,
        "n_kept": len(kept),
        "n_rejected": len(outcome.rejected),
        "warnings": [],
        **outcome.summary,
    }
    of_kept = stats_of_kept(kept, settings, labels=report.labels) if kept else None

    def write(folder: Path) -> Filtered:
        from zdebias.data.writers import write_files

        write_files(folder, {"kept.jsonl": kept, "rejected.jsonl": outcome.rejected})
        return Filtered(summary, of_kept, report, None)

    yield write


def register_filter_method(cls: type[FilterMethod]) -> type[FilterMethod]:
    """Register a :class:`FilterMethod` subclass under its ``name`` (decorator)."""
    if not cls.name:
        raise ConfigError(f"filter method {cls.__name__} has no name")
    REGISTRY[cls.name] = cls()
    return cls


def filter_method(name: str) -> FilterMethod:
    """The method of that name (built-in or registered), or the :class:`FilterMethod`
    (subclass or instance) at a dotted path ``pkg.module:Name``; :class:`ConfigError`
    naming the valid ones otherwise."""
    from zdebias.features.tokenize import load_function

    if name in REGISTRY:
        return REGISTRY[name]
    why = unknown_method(name)
    if why is not None:
        raise ConfigError(why)
    path = CATALOGUE.get(name, name)
    try:
        found: Any = load_function(path)
    except ConfigError as err:  # its words are the feature functions'
        raise ConfigError(f"filter method {name!r}: {err}") from None
    method = found() if isinstance(found, type) else found
    if not isinstance(method, FilterMethod):
        raise ConfigError(f"{name}: {type(method).__name__} is not a zdebias FilterMethod")
    if name not in CATALOGUE:  # a user's: its summary names it by the path it was given
        method = _named(method, name)
    REGISTRY[name] = method
    return method


def _named(method: FilterMethod, name: str) -> FilterMethod:
    """``method`` under the name it was found by (a dotted path)."""
    if method.name == name:
        return method
    cls = type(type(method).__name__, (type(method),), {"name": name})
    return cls()


def render_text(summary: FilterSummary, out: Path) -> str | None:
    """What ``zdebias filter`` prints for ``summary``, by its method's ``text`` (None when the
    method has none)."""
    from zdebias.features.tokenize import load_function

    method = filter_method(summary.get("method", DEFAULT_METHOD))
    if method.text is None:
        return None
    return str(load_function(method.text)(summary, out))


__all__ = [
    "CATALOGUE",
    "DEFAULT_METHOD",
    "FileJob",
    "FilterInputs",
    "FilterMethod",
    "FilterOutcome",
    "filter_method",
    "method_names",
    "register_filter_method",
    "render_text",
]
