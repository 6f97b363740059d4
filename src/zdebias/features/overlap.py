"""Lexical overlap: ``lex-overlap>0.5`` ... ``lex-overlap>0.9``, ``full-lex-overlap``,
``no-lex-overlap``.

Overlap = the share of hypothesis tokens (counted with repeats) whose word occurs in the
premise. The ``>t`` features are cumulative (an example with overlap 0.95 has all five);
``full-lex-overlap`` is overlap = 1 and ``no-lex-overlap`` overlap = 0. A hypothesis without
word tokens gets none of these features.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from zdebias.features.context import FeatureContext
from zdebias.features.keys import FeatureKey
from zdebias.features.lengths import parse_edges
from zdebias.features.matrix import build_csr
from zdebias.features.registry import register_feature

if TYPE_CHECKING:
    import scipy.sparse as sp

DEFAULT_OVERLAP_THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)


def overlap_ratio(ctx: FeatureContext) -> np.ndarray:
    """Per record: share of hypothesis tokens found in the premise (NaN without tokens)."""
    if "overlap" in ctx.cache:
        return ctx.cache["overlap"]
    import scipy.sparse as sp

    prem = ctx.tokens("premise")
    hyp = ctx.tokens("hypothesis")
    n = len(ctx.records)
    size = max(len(ctx.vocab), 1)
    # Premise word presence [n, V] times hypothesis word counts [n, V], element-wise: per row,
    # the number of hypothesis tokens whose word is in the premise.
    present = prem.expand(build_csr(prem.distinct_row_of_token(), prem.ids, prem.n_distinct, size))
    counts = sp.csr_matrix(
        (np.ones(len(hyp.ids), dtype=np.int32), hyp.ids, hyp.offsets), shape=(hyp.n_distinct, size)
    )
    counts.sum_duplicates()
    counts = hyp.expand(counts)
    hits = np.asarray(counts.multiply(present).sum(axis=1)).ravel()
    lengths = hyp.lengths
    ratio = np.full(n, np.nan)
    ok = lengths > 0
    ratio[ok] = hits[ok] / lengths[ok]
    ctx.cache["overlap"] = ratio
    return ratio


@register_feature("lex-overlap", batch=True, pair_only=True, settings=("lex_overlap_thresholds",))
def lexical_overlap(ctx: FeatureContext) -> tuple[sp.csr_matrix, list[str], list[FeatureKey]]:
    """Share of hypothesis tokens in the premise: lex-overlap>t (cumulative), full-, no-."""
    thresholds = parse_edges(
        ctx.settings.get("lex_overlap_thresholds", DEFAULT_OVERLAP_THRESHOLDS),
        "lex_overlap_thresholds",
    )
    ratio = overlap_ratio(ctx)
    names = [f"lex-overlap>{t:g}" for t in thresholds] + ["full-lex-overlap", "no-lex-overlap"]
    valid = ~np.isnan(ratio)
    r = np.where(valid, ratio, -1.0)
    flags = [r > t for t in thresholds] + [valid & (r == 1.0), valid & (r == 0.0)]
    present = np.stack(flags, axis=1)  # [n, n_features], row-major so rows come out sorted
    rows, cols = np.nonzero(present)
    keys = FeatureKey.many(names, "overlap")
    return build_csr(rows, cols, len(ratio), len(names)), names, keys
