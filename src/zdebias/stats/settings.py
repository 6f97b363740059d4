"""Settings of the statistics operations: z-statistics reports and z-filtering (SPEC §3-§5)."""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Literal

from pydantic import model_validator

from zdebias.features.settings import FeatureSettings
from zdebias.settings import setting

#: Algorithm 1's defaults: k (Table 8) and the z-filtering batch
DEFAULT_TOP_K = 20
DEFAULT_BATCH_SIZE = 1000
#: the dataset recipes of GD-NLI §4.2
RECIPE_NAMES = ("z-aug", "par-z", "seq-z")


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
    zfilter_batch_size: int = setting(
        DEFAULT_BATCH_SIZE,
        "Examples per z-filtering batch (smaller filters harder).",
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


class CombineSettings(ZFilterSettings):
    """A dataset recipe (SPEC §5) over the z-filter settings."""

    recipe: Literal["z-aug", "par-z", "seq-z"] = setting(..., "z-aug, par-z or seq-z.")


__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_TOP_K",
    "RECIPE_NAMES",
    "CombineSettings",
    "StatsSettings",
    "ZFilterSettings",
]
