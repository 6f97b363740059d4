"""What putting a z-filter's feature matrix together outside ``extract_features`` needs: the
feature groups its settings name (:func:`feature_specs`) and the hypothesis-only feature's
distinct hypotheses (:func:`distinct_hypotheses`).

The sharded z-filter merges its workers' blocks (:mod:`zdebias.stats.merge`) and the kept-rows
summary refits the hypothesis-only feature on a subset of a matrix
(:mod:`zdebias.stats.kept`); both must leave the features as extraction over records would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def feature_specs(
    feature_names: Sequence[str] | None, pair: bool, settings: dict[str, Any]
) -> list[Any]:
    """The feature groups ``feature_names`` names (the defaults for pairs or single texts when
    None), each once, checked against the feature ``settings``."""
    from zdebias.features.registry import (
        DEFAULT_PAIR_FEATURES,
        DEFAULT_TEXT_FEATURES,
        _check_settings,
        get_feature,
    )

    if feature_names is None:
        feature_names = DEFAULT_PAIR_FEATURES if pair else DEFAULT_TEXT_FEATURES
    specs = [get_feature(n) for n in dict.fromkeys(feature_names)]
    _check_settings(specs, settings)
    return specs


def distinct_hypotheses(ctx: Any, codes: np.ndarray) -> None:
    """Give ``ctx`` (no records) the hypothesis n-grams per distinct text and each row's text,
    as extraction over records leaves them (distinct texts in first-seen order; ``codes``: each
    row's hypothesis as an integer, equal texts equal codes): the hypothesis-only model then
    fits on distinct hypotheses, exactly as in one process."""
    from zdebias.features.parallel import HYPO_NGRAM_KEYS

    if not all(key in ctx.cache for key in HYPO_NGRAM_KEYS):
        return  # no hypothesis-only feature
    uniq, first, inv = np.unique(codes, return_index=True, return_inverse=True)
    if len(uniq) == len(codes):
        return  # every text distinct: one row per record, as extraction leaves it
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    ctx.cache[("inverse", "hypothesis")] = rank[inv.ravel()]
    for key in HYPO_NGRAM_KEYS:
        ctx.cache[("distinct", *key)] = ctx.cache[key][0][first[order]]


__all__ = ["distinct_hypotheses", "feature_specs"]
