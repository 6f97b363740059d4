"""Settings of the statistics operations: z-statistics reports and z-filtering (SPEC §3-§5)."""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Literal

from pydantic import model_validator

from zdebias.features.settings import FeatureSettings
from zdebias.settings import Settings, setting

#: Algorithm 1's defaults: k (Table 8) and the z-filtering batch of large data (GD-NLI)
DEFAULT_TOP_K = 20
DEFAULT_BATCH_SIZE = 1000
#: Data of fewer than ``SMALL_DATA_BATCHES * DEFAULT_BATCH_SIZE`` rows is cut into this many
#: batches by default, so that an unseeded run's first batch, kept unconditionally, is at most
#: 1/20 of it (:func:`scaled_batch_size`)
SMALL_DATA_BATCHES = 20
#: the dataset recipes of GD-NLI §4.2
RECIPE_NAMES = ("z-aug", "par-z", "seq-z")
#: the filter methods: z-filtering (GD-NLI Algorithm 1), dataset cartography (SPEC §12)
FILTER_METHODS = ("z", "cartography")


class StatsSettings(FeatureSettings):
    """A z-statistics report: top features per label, significance, Gardner-plot points."""

    help_panel: ClassVar[str] = "Statistics"

    top: int = setting(20, "Features per label in the table.", ge=1, deprecated=("--top-k",))
    alpha: float = setting(0.01, "Significance level (Bonferroni-corrected).", gt=0, lt=1)
    min_n: int = setting(20, "Gardner plot: features seen more often than this.", ge=0)
    track: list[str] = setting(
        default_factory=list, help="Features whose z, n, p̂ and rank are always reported."
    )


class ZFilterSettings(FeatureSettings):
    """z-filtering, GD-NLI Algorithm 1: biased features per label, batch, visiting order."""

    help_panel: ClassVar[str] = "z-filter"

    biased_k: int = setting(
        DEFAULT_TOP_K,
        "Biased features per label (k, Table 8).",
        ge=1,
        deprecated=("--top-k", "top_k"),
    )
    zfilter_batch_size: int | None = setting(
        None,
        "Examples per z-filtering batch; smaller ones filter more finely. Default: scaled to the "
        "data, min(1000, ceil(n / 20)) for n examples to filter: 1000 from 20,000 examples "
        "on, else 20 batches, so the first batch (kept unconditionally without a seed) is "
        "at most 5% of the data.",
        ge=1,
        deprecated=("--batch-size", "batch_size"),
    )
    shuffle: bool = setting(True, "Visit examples in a seeded random order (else file order).")
    min_z: float = setting(0.0, "A feature is biased only if its z exceeds this.")

    @model_validator(mode="before")
    @classmethod
    def _shuffle_seed(cls, data: Any) -> Any:
        """0.1's ``shuffle_seed``: a seed, or None for file order."""
        if isinstance(data, dict) and "shuffle_seed" in data:
            data = dict(data)
            value = data.pop("shuffle_seed")
            logging.getLogger("zdebias").warning(
                "'shuffle_seed' is deprecated; use 'seed' (and 'shuffle: false' for file order)"
            )
            if value is None:
                data["shuffle"] = False
            else:
                data["seed"] = value
        return data

    @property
    def shuffle_seed(self) -> int | None:
        """The order seed :func:`z_filter_matrix` takes (None: file order)."""
        return self.seed if self.shuffle else None


def scaled_batch_size(n_rows: int, given: int | None = None) -> int:
    """The z-filtering batch size for ``n_rows`` rows to filter: ``given`` when set, else
    ``min(DEFAULT_BATCH_SIZE, ceil(n_rows / SMALL_DATA_BATCHES))`` (at least 1).

    >>> scaled_batch_size(872), scaled_batch_size(19_993), scaled_batch_size(872, 1000)
    (44, 1000, 1000)
    """
    if given is not None:
        return given
    return max(1, min(DEFAULT_BATCH_SIZE, -(-n_rows // SMALL_DATA_BATCHES)))


#: how a summary names the default batch size's rule
SCALED_RULE = f"min({DEFAULT_BATCH_SIZE}, ceil(n_input / {SMALL_DATA_BATCHES}))"


class CartographySettings(Settings):
    """A dataset-cartography region (Swayamdipta et al. 2020): the filter's ``cartography``
    method keeps the ``fraction`` of the input in ``region`` of a classifier's data map."""

    help_panel: ClassVar[str] = "Cartography"

    dynamics: str | None = setting(
        None,
        "Training dynamics for --method cartography: a classifier folder trained by zdebias "
        "(its training_dynamics.jsonl) or that file; rows are matched by id.",
    )
    region: Literal["ambiguous", "hard-to-learn", "easy"] = setting(
        "ambiguous",
        "Cartography region kept: ambiguous (highest variability), hard-to-learn (lowest "
        "confidence) or easy (highest confidence).",
    )
    fraction: float = setting(
        0.33, "Share of the input the cartography region keeps (rounded half up).", gt=0, le=1
    )


class FilterSettings(ZFilterSettings, CartographySettings):
    """The filter command and stage: z-filtering, or a cartography region (``method``)."""

    method: Literal["z", "cartography"] = setting(
        "z", "z (z-filtering, GD-NLI Algorithm 1) or cartography (a data-map region)."
    )


class CombineSettings(ZFilterSettings):
    """A dataset recipe (SPEC §5) over the z-filter settings."""

    recipe: Literal["z-aug", "par-z", "seq-z"] = setting(..., "z-aug, par-z or seq-z.")


__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_TOP_K",
    "FILTER_METHODS",
    "RECIPE_NAMES",
    "SCALED_RULE",
    "SMALL_DATA_BATCHES",
    "CartographySettings",
    "CombineSettings",
    "FilterSettings",
    "StatsSettings",
    "ZFilterSettings",
    "scaled_batch_size",
]
