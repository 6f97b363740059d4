"""The feature groups there are: the built-ins, registered, and the user's, found by name.

Importing this module imports the built-in groups' modules, which register themselves with
:mod:`zdebias.features.registry`; :func:`get_feature` then finds a built-in, a group the user
registered, or a user function by dotted path. The default groups and the settings every
extraction accepts are here too, so that unknown names and settings fail before any work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zdebias.errors import ConfigError
from zdebias.features import (  # noqa: F401  (imported for their registrations)
    hypothesis_only,
    lengths,
    ngrams,
    null,
    overlap,
)
from zdebias.features.registry import FeatureSpec, lookup, registered

#: Default feature groups for pair (NLI) records, in column order.
DEFAULT_PAIR_FEATURES = ("ngrams", "hypo-len", "len-ratio", "lex-overlap", "hypo-only", "null")
#: Default feature groups for single-text records (n-grams and length on ``text``).
DEFAULT_TEXT_FEATURES = ("ngrams", "hypo-len", "null")

#: Settings every extraction understands, whatever groups it runs.
GLOBAL_SETTINGS = frozenset({"lowercase", "token_pattern", "tokenizer", "segmenter", "seed"})


def available_features() -> dict[str, str]:
    """Registered group names → one-line description."""
    return {name: spec.doc for name, spec in sorted(registered().items())}


def get_feature(name: str) -> FeatureSpec:
    """The feature group of that name (built-in or registered), or a user function named by
    dotted path (``pkg.module:function``).

    Unknown names raise :class:`ConfigError` listing the valid ones.
    """
    return lookup(name)


def check_settings(specs: list[FeatureSpec], settings: dict[str, Any]) -> None:
    """Raise :class:`ConfigError` for a setting that no registered group nor ``specs`` reads
    (none is unknown when one of them takes ``**kwargs``)."""
    known = set(GLOBAL_SETTINGS)
    for spec in (*registered().values(), *specs):
        if spec.settings is None:
            return
        known |= spec.settings
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ConfigError(
            f"unknown feature setting(s) {', '.join(unknown)}; known settings: "
            f"{', '.join(sorted(known))}"
        )


def feature_specs(
    names: Sequence[str] | None, *, pair: bool, settings: dict[str, Any]
) -> list[FeatureSpec]:
    """The groups to run, in order, once each: ``names``, or the defaults for pair or
    single-text records; the settings checked against them."""
    if names is None:
        names = DEFAULT_PAIR_FEATURES if pair else DEFAULT_TEXT_FEATURES
    specs = [get_feature(n) for n in dict.fromkeys(names)]
    check_settings(specs, settings)
    return specs
