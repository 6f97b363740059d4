"""The feature registry: feature groups by name (docs/design.md §2).

A *feature group* is a registered function that turns records into binary features, each named
as in GD-NLI Table 12 (``sleeping@hypothesis``, ``hypo-len<5``, ``lex-overlap>0.8``,
``hypo-only-pred=contradiction``, ``<null>``). Two kinds are supported:

- per-record functions ``fn(record, **settings) -> Iterable[str]`` (the easy way for users):

  >>> @register_feature("has-negation")                       # doctest: +SKIP
  ... def has_negation(record):
  ...     return ["negation@hypothesis"] if " not " in record.hypothesis else []

- batch functions ``fn(ctx: FeatureContext) -> (csr_matrix, names[, keys])``, registered with
  ``batch=True`` (the built-ins: vectorised over the whole dataset, sharing one tokenisation,
  and returning a :class:`~zdebias.features.keys.FeatureKey` per column; see
  :mod:`zdebias.features.context`).

This module only keeps the names: it knows no feature of its own. The built-in groups register
themselves when :mod:`zdebias.features.catalogue` imports them, and
:func:`~zdebias.features.extract.extract_features` runs them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from zdebias.errors import ConfigError
from zdebias.features.tokenize import load_function


@dataclass(frozen=True)
class FeatureSpec:
    """A registered feature group."""

    name: str
    fn: Callable[..., Any]
    batch: bool = False
    pair_only: bool = False
    #: Setting names the function takes (``None``: any, it has ``**kwargs``).
    settings: frozenset[str] | None = frozenset()
    doc: str = ""


_REGISTRY: dict[str, FeatureSpec] = {}
#: Other names of registered groups (``length`` → ``hypo-len``).
_ALIASES: dict[str, str] = {}


def _setting_names(fn: Callable[..., Any], *, skip_first: bool) -> frozenset[str] | None:
    params = list(inspect.signature(fn).parameters.values())
    if skip_first and params:
        params = params[1:]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return frozenset(
        p.name
        for p in params
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    )


def register_feature(
    name: str,
    *,
    batch: bool = False,
    pair_only: bool = False,
    settings: Iterable[str] | None = None,
    aliases: Iterable[str] = (),
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a feature group under ``name`` (decorator); ``aliases``: other names for it.

    A per-record function gets the record and, by keyword, the settings its signature names.
    A batch function (``batch=True``) gets a :class:`~zdebias.features.context.FeatureContext`
    and returns ``(csr_matrix [n_records, n_cols], column_names)`` (or a list of matrices whose
    columns follow each other, to save a copy), optionally with a third item, the columns'
    :class:`~zdebias.features.keys.FeatureKey` (else they are ``custom``); declare the settings
    it reads in ``settings`` so unknown settings can be reported.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        accepted: frozenset[str] | None
        if batch:
            accepted = frozenset(settings or ())
        else:
            accepted = _setting_names(fn, skip_first=True)
        _REGISTRY[name] = FeatureSpec(
            name=name,
            fn=fn,
            batch=batch,
            pair_only=pair_only,
            settings=accepted,
            doc=(inspect.getdoc(fn) or "").split("\n", 1)[0],
        )
        for alias in aliases:
            _ALIASES[alias] = name
        fn.zdebias_feature = name  # type: ignore[attr-defined]
        return fn

    return decorate


def registered() -> dict[str, FeatureSpec]:
    """The groups registered so far, by name (a copy)."""
    return dict(_REGISTRY)


def lookup(name: str) -> FeatureSpec:
    """The registered group of that name (or alias), or a user function named by dotted path.

    Unknown names raise :class:`ConfigError` listing the registered ones. Only groups already
    registered are found: :func:`zdebias.features.catalogue.get_feature` registers the
    built-ins first.
    """
    key = _ALIASES.get(name, name)
    if key in _REGISTRY:
        return _REGISTRY[key]
    if "." in name or ":" in name:
        fn = load_function(name)
        registered = getattr(fn, "zdebias_feature", None)
        if registered in _REGISTRY and _REGISTRY[registered].fn is fn:
            return _REGISTRY[registered]
        return FeatureSpec(
            name=name,
            fn=fn,
            batch=False,
            settings=_setting_names(fn, skip_first=True),
            doc=(inspect.getdoc(fn) or "").split("\n", 1)[0],
        )
    valid = ", ".join(sorted(_REGISTRY))
    raise ConfigError(
        f"unknown feature {name!r}; expected one of {valid}, or a dotted path pkg.module:function"
    )
