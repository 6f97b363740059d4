"""Length features: ``hypo-len<5`` ... ``hypo-len>=15`` and ``len-ratio<0.25`` ... ``len-ratio>=1``.

Each example falls in exactly one bin of each. Lengths count word tokens (the default
tokenisation). Single-text records get ``text-len<...`` bins on ``text`` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.errors import ConfigError
from zdebias.features.context import FeatureContext
from zdebias.features.keys import FeatureKey
from zdebias.features.matrix import bins_matrix
from zdebias.features.registry import register_feature

if TYPE_CHECKING:
    import scipy.sparse as sp

DEFAULT_HYPO_LEN_BINS = (5, 10, 15)
DEFAULT_TEXT_LEN_BINS = (5, 10, 20, 40, 80, 160, 320)
DEFAULT_LEN_RATIO_BINS = (0.25, 0.5, 0.75, 1.0)


def parse_edges(value: Any, setting: str) -> list[float]:
    """Bin edges or thresholds from a setting: strictly increasing numbers, as a list or a
    comma-separated string (a :class:`ConfigError` naming ``setting`` otherwise)."""
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    try:
        edges = [float(v) for v in value]
    except (TypeError, ValueError):
        raise ConfigError(f"{setting} must be a list of numbers, not {value!r}") from None
    if not edges or any(b <= a for a, b in pairwise(edges)):
        raise ConfigError(f"{setting} must be strictly increasing numbers, not {value!r}")
    return edges


def bin_names(prefix: str, edges: Sequence[float]) -> list[str]:
    """``["hypo-len<5", "hypo-len<10", "hypo-len<15", "hypo-len>=15"]`` for edges 5, 10, 15."""
    return [f"{prefix}<{e:g}" for e in edges] + [f"{prefix}>={edges[-1]:g}"]


def bin_index(values: np.ndarray, edges: Sequence[float]) -> np.ndarray:
    """Bin of each value: ``i`` where ``edges[i-1] <= v < edges[i]`` (the last bin is open)."""
    return np.searchsorted(np.asarray(edges, dtype=np.float64), values, side="right")


@register_feature(
    "hypo-len",
    batch=True,
    settings=("hypo_len_bins", "text_len_bins"),
    aliases=("length", "text-len"),
)
def hypothesis_length(ctx: FeatureContext) -> tuple[sp.csr_matrix, list[str], list[FeatureKey]]:
    """Hypothesis length bins (hypo-len<5 ...), or text length bins (text-len<...) for text."""
    if ctx.pair:
        edges = parse_edges(
            ctx.settings.get("hypo_len_bins", DEFAULT_HYPO_LEN_BINS), "hypo_len_bins"
        )
        prefix = "hypo-len"
    else:
        edges = parse_edges(
            ctx.settings.get("text_len_bins", DEFAULT_TEXT_LEN_BINS), "text_len_bins"
        )
        prefix = "text-len"
    lengths = ctx.tokens(ctx.main_field).lengths
    names = bin_names(prefix, edges)
    keys = FeatureKey.many(names, "length", ctx.main_field)
    return bins_matrix(bin_index(lengths, edges), len(edges) + 1), names, keys


@register_feature("len-ratio", batch=True, pair_only=True, settings=("len_ratio_bins",))
def length_ratio(ctx: FeatureContext) -> tuple[sp.csr_matrix, list[str], list[FeatureKey]]:
    """Hypothesis / premise token-count ratio bins (len-ratio<0.25 ... len-ratio>=1)."""
    edges = parse_edges(
        ctx.settings.get("len_ratio_bins", DEFAULT_LEN_RATIO_BINS), "len_ratio_bins"
    )
    hyp = ctx.tokens("hypothesis").lengths
    prem = ctx.tokens("premise").lengths
    bins = np.full(len(hyp), -1, dtype=np.int64)
    ok = prem > 0
    bins[ok] = bin_index(hyp[ok] / prem[ok], edges)
    names = bin_names("len-ratio", edges)
    return bins_matrix(bins, len(edges) + 1), names, FeatureKey.many(names, "ratio")
