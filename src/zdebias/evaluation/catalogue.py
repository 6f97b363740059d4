"""The built-in evaluation metrics, one line each, in the order their keys take in a results
document (a run's ``metrics``, per suite): accuracy, HANS-style group cells, macro-F1,
balanced accuracy, per-label accuracy and F1; then the shortcut split's group accuracy.

A new built-in metric is a module with its :class:`~zdebias.evaluation.registry.Metric`
class and one line here; a metric of the user's needs no line (``evaluate --metrics
pkg.module:Class``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from zdebias.errors import ConfigError
from zdebias.evaluation.groups import GroupAccuracy
from zdebias.evaluation.metrics import (
    Accuracy,
    BalancedAccuracy,
    HeuristicCells,
    MacroF1,
    PerLabel,
)
from zdebias.evaluation.registry import Metric, MetricSpec, Scored, register_metric, registered

register_metric(Accuracy, builtin=True)
register_metric(HeuristicCells, builtin=True)
register_metric(MacroF1, builtin=True)
register_metric(BalancedAccuracy, builtin=True)
register_metric(PerLabel, builtin=True)
register_metric(GroupAccuracy, builtin=True)  # scope "split": the shortcut split's rows


def registered_metrics() -> dict[str, MetricSpec]:
    """Name → :class:`MetricSpec` of every registered metric, built-ins first."""
    return registered()


def lookup_metric(name: str) -> Metric:
    """A suite metric of that name (registered) or dotted path ``pkg.module:Class``, made;
    anything else is one :class:`ConfigError` line naming the valid ones."""
    specs = registered_metrics()
    spec = specs.get(name)
    if spec is None and ":" in name:
        module, _, attr = name.partition(":")
        try:
            klass = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as err:
            raise ConfigError(f"metric {name!r}: cannot load it ({err})") from None
        if not (isinstance(klass, type) and issubclass(klass, Metric)):
            raise ConfigError(f"metric {name!r}: not a zdebias.evaluation.registry.Metric class")
        return klass()
    if spec is None or spec.scope != "suite":
        valid = ", ".join(n for n, s in specs.items() if s.scope == "suite")
        raise ConfigError(
            f"unknown metric {name!r}; expected one of {valid}, or a dotted path pkg.module:Class"
        )
    metric: Metric = spec.factory()
    return metric


def suite_metrics(extra: Sequence[str] | None = None) -> list[Metric]:
    """The metrics an evaluation runs on each suite: the built-ins in catalogue order, then
    ``extra`` (names or dotted paths), each once."""
    specs = registered_metrics()
    builtin = [s.factory() for s in specs.values() if s.builtin and s.scope == "suite"]
    names = [n for n in dict.fromkeys(extra or ()) if not (n in specs and specs[n].builtin)]
    return [*builtin, *(lookup_metric(n) for n in names)]


def flat_scores(metrics: Sequence[Metric], scored: Scored) -> dict[str, float]:
    """Every metric's flat numbers of one scored suite, in the metrics' order."""
    out: dict[str, float] = {}
    for metric in metrics:
        out.update(metric.compute(scored))
    return out


def compared_keys(suites: Sequence[str], extra: Sequence[str] | None = None) -> list[str]:
    """The primary keys ``compare`` t-tests by default beyond each suite's accuracy: per
    suite, each tested metric's (built-ins, then ``extra``)."""
    metrics = [m for m in suite_metrics(extra) if m.tested]
    return [m.key(s) for s in suites for m in metrics if m.key(s) != s]


def tested_keys(doc: Mapping[str, Any], suites: Sequence[str]) -> list[str]:
    """The keys of ``suites`` ``compare`` tests beside their accuracy (each tested metric's
    primary key: macro-F1, balanced accuracy, and those of the metrics the document names
    under ``extra_metrics``) that every run of ``doc`` has."""
    runs = doc.get("runs", [])
    keys = compared_keys(suites, doc.get("extra_metrics"))
    return [k for k in keys if runs and all(k in run.get("metrics", {}) for run in runs)]


__all__ = [
    "compared_keys",
    "flat_scores",
    "lookup_metric",
    "registered_metrics",
    "suite_metrics",
    "tested_keys",
]
