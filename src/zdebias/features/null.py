"""The ``<null>`` feature: present on every example, so its z is the label imbalance."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from zdebias.features.context import FeatureContext
from zdebias.features.keys import NULL_FEATURE, FeatureKey
from zdebias.features.matrix import bins_matrix
from zdebias.features.registry import register_feature

if TYPE_CHECKING:
    import scipy.sparse as sp


@register_feature("null", batch=True, aliases=("<null>",))
def null_feature(ctx: FeatureContext) -> tuple[sp.csr_matrix, list[str], list[FeatureKey]]:
    """<null>: on every example; its z is the label imbalance."""
    n = len(ctx.records)
    return (
        bins_matrix(np.zeros(n, dtype=np.int64), 1),
        [NULL_FEATURE],
        [FeatureKey(NULL_FEATURE, "null")],
    )
