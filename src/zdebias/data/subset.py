"""Seeded random subsets of a dataset, optionally stratified (the `subset` recipe stage).

>>> records = [Record(str(i), "neutral", "p", "h") for i in range(10)]
>>> draw_subset(records, SubsetSettings(n=3, seed=1))
[1, 2, 4]
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import ClassVar

from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.settings import DEFAULT_SEED, Settings, setting


class SubsetSettings(Settings):
    """A seeded random subset of N records, kept in file order."""

    help_panel: ClassVar[str] = "Subset"

    n: int | None = setting(None, "How many records (or, in a recipe, `like: DATASET`).", ge=1)
    stratify: str | None = setting(
        None,
        "'label' or a meta key (e.g. heuristic, subcase): each group keeps its share of the "
        "subset (largest remainders).",
    )
    seed: int = setting(DEFAULT_SEED, "Random seed.")


def _group_of(record: Record, key: str | None) -> str:
    if key is None:
        return ""
    if key == "label":
        return str(record.label)
    if key not in record.meta:
        raise ConfigError(f"record {record.id!r} has no meta field {key!r} to stratify by")
    return str(record.meta[key])


def draw_subset(
    records: list[Record], settings: SubsetSettings | None = None, **overrides: object
) -> list[int]:
    """Indices of a seeded random subset of ``n`` records, in file order; with ``stratify``
    every group gets ``n`` times its share (largest remainders, ties to the earlier group)."""
    cfg = SubsetSettings.of(settings, **overrides)
    n = len(records) if cfg.n is None else cfg.n
    if n > len(records):
        raise ConfigError(f"cannot draw {n:,} records from {len(records):,}")
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        groups[_group_of(r, cfg.stratify)].append(i)
    exact = {g: n * len(idx) / len(records) for g, idx in groups.items()}
    sizes = {g: int(v) for g, v in exact.items()}
    order = sorted(groups, key=lambda g: -(exact[g] - sizes[g]))
    for g in order[: n - sum(sizes.values())]:
        sizes[g] += 1
    rng = random.Random(cfg.seed)
    chosen: list[int] = []
    for g in groups:  # first-seen order: deterministic for a given file
        chosen += rng.sample(groups[g], sizes[g])
    return sorted(chosen)
