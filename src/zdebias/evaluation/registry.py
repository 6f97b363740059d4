"""The metric protocol and registry: how a suite's flat metrics are made (issue 54).

A metric is a class with a name, a primary value, whether more is better and whether
``compare`` t-tests it by default; :meth:`Metric.compute` turns one scored suite into a flat
dict whose keys start with the suite's name (``snli macro-F1``), the sentence-transformers
evaluator's shape. Group metrics over a shortcut split (:class:`~zdebias.evaluation.groups.
GroupAccuracy`, WILDS' ``eval`` convention) are registered with ``scope="split"``: they score
the split's rows together, not one suite.

Built-ins are listed in :mod:`zdebias.evaluation.catalogue` (which finds metrics by name) and
run on every evaluation, in catalogue order (the order of a results document's keys). A
metric of the user's is named in ``evaluate --metrics NAME`` (a name registered with
:func:`register_metric`, or a dotted path ``pkg.module:Class``) and its keys follow the
built-ins'.

>>> class Share(Metric):
...     name, primary = "share-a", "share a"
...     def compute(self, scored):
...         return {self.key(scored.suite): scored.preds.count("a") / len(scored.preds)}
>>> Share().compute(Scored("s", ["a", "b"], ["a", "a"], [], {}))
{'s share a': 1.0}
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

Scope = Literal["suite", "split"]


@dataclass(frozen=True)
class Scored:
    """One suite scored for one run: its name, the gold and predicted label names (after
    the two-way mapping), the records, and :func:`~zdebias.evaluation.suites.score_predictions`'
    breakdown (``result``, what the results document keeps under ``runs[].results``)."""

    suite: str
    gold: Sequence[str]
    preds: Sequence[str]
    records: Sequence[Any]
    result: dict[str, Any]


class Metric(ABC):
    """A suite metric (module doc). ``primary``: the key its primary value takes after the
    suite's name (None: the suite's name itself, as accuracy); ``tested``: ``compare``
    t-tests the primary value by default."""

    name: ClassVar[str]
    primary: ClassVar[str | None] = None
    greater_is_better: ClassVar[bool] = True
    tested: ClassVar[bool] = False
    scope: ClassVar[Scope] = "suite"

    def key(self, suite: str) -> str:
        """The flat key of this metric's primary value on ``suite``."""
        return suite if self.primary is None else f"{suite} {self.primary}"

    @abstractmethod
    def compute(self, scored: Scored) -> dict[str, float]:
        """The flat, suite-prefixed numbers of one scored suite (none: an empty dict)."""


@dataclass(frozen=True)
class MetricSpec:
    """A registered metric: its name, how to make it, its scope and whether it is built in."""

    name: str
    factory: Callable[..., Any]
    scope: Scope
    builtin: bool
    tested: bool
    doc: str


_REGISTRY: dict[str, MetricSpec] = {}


def register_metric(cls: type[Any] | None = None, *, builtin: bool = False) -> Any:
    """Register a metric class under its ``name`` (as a decorator, with or without
    arguments); ``builtin``: it runs on every evaluation (the catalogue's)."""

    def decorate(klass: type[Any]) -> type[Any]:
        name = str(klass.name)
        spec = MetricSpec(
            name,
            klass,
            getattr(klass, "scope", "suite"),
            builtin,
            bool(getattr(klass, "tested", False)),
            (klass.__doc__ or "").strip().split("\n")[0],
        )
        old = _REGISTRY.get(name)
        if old is not None and old.factory is not klass and old.builtin:
            raise ValueError(f"metric {name!r} is already registered")
        _REGISTRY[name] = spec
        return klass

    return decorate if cls is None else decorate(cls)


def registered() -> dict[str, MetricSpec]:
    """Name → :class:`MetricSpec` of the metrics registered so far (the built-ins register on
    importing :mod:`zdebias.evaluation.catalogue`, which looks them up)."""
    return dict(_REGISTRY)


__all__ = ["Metric", "MetricSpec", "Scored", "register_metric", "registered"]
