"""The hypothesis-only feature's distinct hypotheses given to a feature context without records
(:func:`distinct_hypotheses`), as extraction over records leaves them.

The sharded z-filter merges its workers' blocks (:mod:`zdebias.stats.execution.merge`) and
the kept-rows summary refits the hypothesis-only feature on a subset of a matrix
(:mod:`zdebias.stats.execution.kept`); both must leave the features as extraction over records
would.
"""

from __future__ import annotations

from typing import Any

import numpy as np


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


__all__ = ["distinct_hypotheses"]
