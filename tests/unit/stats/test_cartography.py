"""Dataset cartography on arrays and files (issue 30): the statistics against a hand
computation, the regions' exact members with ties, and the dynamics file's errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from zdebias.errors import ConfigError, DataError
from zdebias.stats.cartography import (
    cartography_statistics,
    check_epochs,
    region_size,
    select_region,
)
from zdebias.stats.dynamics import read_dynamics

# 3 examples x 3 epochs: p(gold) and whether the argmax was gold
PROBS = np.array([[0.2, 0.5, 0.8], [0.9, 0.9, 0.9], [0.1, 0.4, 0.1]])
RIGHT = np.array([[0, 1, 1], [1, 1, 1], [0, 0, 0]])


def test_statistics_equal_a_hand_computation() -> None:
    conf, var, corr = cartography_statistics(PROBS, RIGHT)
    # means: 1.5/3, 2.7/3, 0.6/3; population std: sqrt((.09 + 0 + .09)/3), 0,
    # sqrt((.01 + .04 + .01)/3); share of epochs right: 2/3, 3/3, 0/3
    assert conf.tolist() == pytest.approx([0.5, 0.9, 0.2], abs=1e-15)
    assert var.tolist() == pytest.approx([0.06**0.5, 0.0, 0.02**0.5], abs=1e-15)
    assert corr.tolist() == pytest.approx([2 / 3, 1.0, 0.0], abs=1e-15)


def test_statistics_skip_epochs_an_example_was_not_trained_on() -> None:
    probs = np.array([[0.2, np.nan, 0.6]])
    conf, var, corr = cartography_statistics(probs, np.array([[0, np.nan, 1]]))
    assert (conf[0], var[0], corr[0]) == pytest.approx((0.4, 0.2, 0.5))
    with pytest.raises(ConfigError, match="example 0 has no epoch"):
        cartography_statistics(np.array([[np.nan]]), np.array([[np.nan]]))


IDS = ["a", "b", "c", "d", "e", "f"]
CONF = np.array([0.9, 0.2, 0.5, 0.3, 0.9, 0.3])
VAR = np.array([0.05, 0.3, 0.2, 0.1, 0.05, 0.2])


@pytest.mark.parametrize(
    ("region", "fraction", "kept"),
    [
        ("ambiguous", 1 / 6, ["b"]),
        ("hard-to-learn", 1 / 6, ["b"]),
        ("easy", 1 / 3, ["a", "e"]),  # a and e tie at 0.9, both kept
        ("ambiguous", 1.0, IDS),
    ],
)
def test_regions_keep_exactly_these_ids(region: str, fraction: float, kept: list[str]) -> None:
    keep = select_region(CONF, VAR, region=region, fraction=fraction)
    assert [i for i, k in zip(IDS, keep, strict=True) if k] == kept
    # without ties inside the cut, the input's order does not change the choice
    order = np.array([5, 3, 1, 0, 4, 2])
    shuffled = select_region(CONF[order], VAR[order], region=region, fraction=fraction)
    assert sorted(IDS[i] for i, k in zip(order, shuffled, strict=True) if k) == kept


@pytest.mark.parametrize(
    ("region", "fraction", "sure", "tied"),
    [
        ("ambiguous", 1 / 3, "b", ("c", "f")),  # c and f tie at variability 0.2
        ("hard-to-learn", 1 / 3, "b", ("d", "f")),  # d and f tie at confidence 0.3
        ("easy", 1 / 6, None, ("a", "e")),  # a and e tie at confidence 0.9
    ],
)
def test_ties_follow_the_seed_not_the_ids(
    region: str, fraction: float, sure: str | None, tied: tuple[str, str]
) -> None:
    """Issue 39.2: ties went by id string order; now a seeded order decides them."""
    picks = []
    for seed in range(12):
        keep = select_region(CONF, VAR, region=region, fraction=fraction, seed=seed)
        again = select_region(CONF, VAR, region=region, fraction=fraction, seed=seed)
        assert keep.tolist() == again.tolist()
        kept = [i for i, k in zip(IDS, keep, strict=True) if k]
        assert kept == sorted([*([sure] if sure else []), *(set(kept) & set(tied))])
        assert len(set(kept) & set(tied)) == 1
        picks.append(next(k for k in kept if k in tied))
    assert set(picks) == set(tied)  # both sides of the tie are taken, by some seed


def test_one_epoch_ties_are_not_taken_in_id_order() -> None:
    """Issue 39.2: 1,000 rows of one epoch all tie; the first ids in string order ('1', '10',
    '100', ...) were kept. A seeded draw keeps rows from all over the file instead."""
    ids = [str(i) for i in range(1, 1001)]
    conf = np.full(1000, 0.5)
    keep = select_region(conf, np.zeros(1000), region="easy", fraction=0.33, seed=0)
    assert int(keep.sum()) == 330
    by_string = sorted(range(1000), key=lambda i: ids[i])[:330]
    assert set(np.flatnonzero(keep).tolist()) != set(by_string)
    positions = np.flatnonzero(keep)
    assert positions.min() < 100 and positions.max() > 900  # spread, not one block
    other = select_region(conf, np.zeros(1000), region="easy", fraction=0.33, seed=1)
    assert keep.tolist() != other.tolist()


def test_ambiguous_needs_two_epochs() -> None:
    check_epochs("ambiguous", 2, "d.jsonl")
    check_epochs("easy", 1, "d.jsonl")
    check_epochs("hard-to-learn", 1, "d.jsonl")
    with pytest.raises(
        ConfigError,
        match=r"d\.jsonl: --region ambiguous orders rows by variability, which needs training "
        r"dynamics of at least 2 epochs; these have 1 \(train the classifier",
    ):
        check_epochs("ambiguous", 1, "d.jsonl")


def test_region_size_and_bad_choices() -> None:
    assert [region_size(n, 0.33) for n in (1, 2, 3, 10, 100)] == [0, 1, 1, 3, 33]
    with pytest.raises(ConfigError, match=r"fraction must be in \(0, 1\]"):
        region_size(3, 0.0)
    with pytest.raises(ConfigError, match="unknown region 'odd'; expected one of ambiguous"):
        select_region(CONF, VAR, region="odd", fraction=0.5)


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_read_dynamics_recomputes_and_locates_bad_lines(tmp_path: Path) -> None:
    rows = [
        {"id": str(i), "gold_probs": p.tolist(), "correct": [bool(c) for c in r]}
        for i, (p, r) in enumerate(zip(PROBS, RIGHT, strict=True))
    ]
    dyn = read_dynamics(_write(tmp_path / "d.jsonl", rows))
    assert dyn.ids == ["0", "1", "2"] and dyn.n_epochs == 3
    assert dyn.confidence.tolist() == pytest.approx([0.5, 0.9, 0.2])
    twice = read_dynamics(_write(tmp_path / "twice.jsonl", [rows[0], rows[0]]))
    assert twice.ids == ["0", "0"]  # repeated ids are read; the filter matches them by position
    bad = _write(tmp_path / "bad2.jsonl", [rows[0], "{oops"])
    with pytest.raises(DataError, match=r"bad2.jsonl:2: not JSON"):
        read_dynamics(bad)
    with pytest.raises(ConfigError, match=r"no training_dynamics\.jsonl"):
        read_dynamics(tmp_path)


def test_a_number_over_the_digit_limit_is_a_located_data_error(tmp_path: Path) -> None:
    """json.loads raises a plain ValueError (no ``msg``) for an int of 5000 digits, and a
    RecursionError for deep nesting: each is one located line, not an AttributeError."""
    long = _write(tmp_path / "long.jsonl", ['{"id": "a", "gold_probs": [' + "7" * 5000 + "]}"])
    with pytest.raises(DataError, match=r"long\.jsonl:1: not JSON \(.*digits"):
        read_dynamics(long)
    deep = _write(tmp_path / "deep.jsonl", ["[" * 100_000 + "]" * 100_000])
    with pytest.raises(DataError, match=r"deep\.jsonl:1: not JSON"):
        read_dynamics(deep)


def test_the_seed_stays_in_every_filter_stage_hash() -> None:
    """The cartography settings gained ``seed`` (its ties); it is every method's seed, so no
    method's stage hash may leave it out (a z-filter stage with another seed is redone)."""
    from zdebias.stats.settings import FilterSettings

    for method in ("z", "cartography", "aflite"):
        excluded = FilterSettings(method=method).hash_excluded()
        assert "seed" not in excluded, method
    assert {"region", "fraction", "dynamics"} <= FilterSettings(method="z").hash_excluded()
