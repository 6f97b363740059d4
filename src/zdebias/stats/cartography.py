"""Dataset cartography (Swayamdipta et al. 2020; docs/design.md §12): per-example training
dynamics and the regions of the data map, on arrays.

Per example, over the epochs it was trained on (training-mode forward passes):

- confidence = mean probability of the gold label;
- variability = its population standard deviation (ddof 0);
- correctness = share of those epochs in which the prediction (argmax) was the gold label.

Regions, each the ``fraction`` of the examples (n·fraction rounded half up) first in its order:

- ``ambiguous``: highest variability first;
- ``hard-to-learn``: lowest confidence first;
- ``easy``: highest confidence first.

Ties are broken in a seeded random order of the examples (never by id: ids in string order
would keep '1', '100', '1000', ... of a tied region), so a selection is the same for the same
seed. ``ambiguous`` needs at least two epochs: with one, every variability is 0 and the region
would be nothing but ties (:func:`check_epochs`). No I/O here (the file format is
:mod:`zdebias.stats.dynamics`); numpy only.

>>> conf, var, corr = cartography_statistics(np.array([[0.2, 0.4]]), np.array([[0, 1]]))
>>> float(conf[0]), round(float(var[0]), 6), float(corr[0])
(0.30000000000000004, 0.1, 0.5)
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from zdebias.errors import ConfigError
from zdebias.settings import DEFAULT_SEED

Region = Literal["ambiguous", "hard-to-learn", "easy"]
REGIONS: tuple[str, ...] = ("ambiguous", "hard-to-learn", "easy")
#: what orders each region, as shown in summaries and reasons
REGION_ORDER = {
    "ambiguous": "highest variability",
    "hard-to-learn": "lowest confidence",
    "easy": "highest confidence",
}


def cartography_statistics(
    gold_probs: np.ndarray, correct: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(confidence, variability, correctness)``, each ``[N]``, of ``gold_probs`` ``[N, E]``
    (the gold label's probability per epoch; NaN where an example was not seen in an epoch)
    and ``correct`` ``[N, E]`` (1/0, or True/False; NaN where not seen). Each statistic is
    over the epochs an example was seen in; an example never seen is an error."""
    probs = np.asarray(gold_probs, dtype=np.float64)
    right = np.asarray(correct, dtype=np.float64)
    if probs.ndim != 2 or probs.shape != right.shape:
        raise ConfigError(
            f"gold probabilities {probs.shape} and correctness {right.shape} must both be [N, E]"
        )
    seen = ~np.isnan(probs)
    if np.any(seen != ~np.isnan(right)):
        raise ConfigError("gold probabilities and correctness must be missing in the same places")
    counts = seen.sum(axis=1)
    if probs.shape[0] and counts.min() == 0:
        first = int(np.flatnonzero(counts == 0)[0])
        raise ConfigError(f"example {first} has no epoch recorded")
    filled = np.where(seen, probs, 0.0)
    n = np.maximum(counts, 1)
    confidence = filled.sum(axis=1) / n
    deviation = np.where(seen, probs - confidence[:, None], 0.0)
    variability = np.sqrt((deviation**2).sum(axis=1) / n)
    correctness = np.where(seen, right, 0.0).sum(axis=1) / n
    return confidence, variability, correctness


def region_size(n: int, fraction: float) -> int:
    """How many of ``n`` examples a region at ``fraction`` holds: n·fraction rounded half up.

    >>> region_size(9, 1 / 3), region_size(10, 0.33), region_size(3, 0.5)
    (3, 3, 2)
    """
    if not 0 < fraction <= 1:
        raise ConfigError(f"fraction must be in (0, 1], got {fraction}")
    return min(n, int(np.floor(n * fraction + 0.5)))


#: the regions ordered by variability, which one epoch cannot give
NEEDS_VARIABILITY = ("ambiguous",)


def check_epochs(region: str, n_epochs: int, source: str) -> None:
    """Refuse a region ordered by variability on dynamics of fewer than two epochs (every
    variability is 0 there, so the region would be an arbitrary pick among ties)."""
    if region in NEEDS_VARIABILITY and n_epochs < 2:
        raise ConfigError(
            f"{source}: --region {region} orders rows by variability, which needs training "
            f"dynamics of at least 2 epochs; these have {n_epochs} (train the classifier for "
            "2 or more epochs, or choose --region easy or hard-to-learn)"
        )


def region_order(
    confidence: np.ndarray, variability: np.ndarray, region: str, *, seed: int = DEFAULT_SEED
) -> np.ndarray:
    """Indices of the examples in ``region``'s order (module doc), ties in a random order
    drawn from ``seed``."""
    if region not in REGIONS:
        raise ConfigError(f"unknown region {region!r}; expected one of {', '.join(REGIONS)}")
    conf = np.asarray(confidence, dtype=np.float64)
    var = np.asarray(variability, dtype=np.float64)
    key = {"ambiguous": -var, "hard-to-learn": conf, "easy": -conf}[region]
    tiebreak = np.random.default_rng(seed).permutation(len(key))
    return np.lexsort((tiebreak, key))


def select_region(
    confidence: np.ndarray,
    variability: np.ndarray,
    *,
    region: str,
    fraction: float,
    seed: int = DEFAULT_SEED,
) -> np.ndarray:
    """Boolean ``[N]`` mask of the examples in ``region`` at ``fraction`` (module doc).

    >>> select_region(np.array([.9, .5, .1]), np.array([.1, .3, .2]),
    ...               region="ambiguous", fraction=1 / 3).tolist()
    [False, True, False]
    """
    order = region_order(confidence, variability, region, seed=seed)
    keep = np.zeros(len(order), dtype=bool)
    keep[order[: region_size(len(order), fraction)]] = True
    return keep


__all__ = [
    "NEEDS_VARIABILITY",
    "REGIONS",
    "REGION_ORDER",
    "Region",
    "cartography_statistics",
    "check_epochs",
    "region_order",
    "region_size",
    "select_region",
]
