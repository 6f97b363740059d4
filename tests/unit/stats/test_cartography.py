"""Dataset cartography on arrays and files (issue 30): the statistics against a hand
computation, the regions' exact members with ties, and the dynamics file's errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from zdebias.errors import ConfigError, DataError
from zdebias.stats.cartography import cartography_statistics, region_size, select_region
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
        ("ambiguous", 1 / 3, ["b", "c"]),  # c and f tie at 0.2: c by id
        ("hard-to-learn", 1 / 3, ["b", "d"]),  # d and f tie at 0.3: d by id
        ("easy", 1 / 3, ["a", "e"]),
        ("easy", 1 / 6, ["a"]),  # a and e tie at 0.9: a by id
        ("ambiguous", 1.0, IDS),
    ],
)
def test_regions_keep_exactly_these_ids(region: str, fraction: float, kept: list[str]) -> None:
    keep = select_region(CONF, VAR, IDS, region=region, fraction=fraction)
    assert [i for i, k in zip(IDS, keep, strict=True) if k] == kept
    # the input's order does not change the choice
    order = np.array([5, 3, 1, 0, 4, 2])
    shuffled = select_region(CONF[order], VAR[order], [IDS[i] for i in order], region=region,
                             fraction=fraction)  # fmt: skip
    assert sorted(IDS[i] for i, k in zip(order, shuffled, strict=True) if k) == kept


def test_region_size_and_bad_choices() -> None:
    assert [region_size(n, 0.33) for n in (1, 2, 3, 10, 100)] == [0, 1, 1, 3, 33]
    with pytest.raises(ConfigError, match=r"fraction must be in \(0, 1\]"):
        region_size(3, 0.0)
    with pytest.raises(ConfigError, match="unknown region 'odd'; expected one of ambiguous"):
        select_region(CONF, VAR, IDS, region="odd", fraction=0.5)


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
    bad = _write(tmp_path / "bad.jsonl", [rows[0], rows[0]])
    with pytest.raises(DataError, match=r"bad.jsonl:2: field 'id': id '0' repeats line 1"):
        read_dynamics(bad)
    bad = _write(tmp_path / "bad2.jsonl", [rows[0], "{oops"])
    with pytest.raises(DataError, match=r"bad2.jsonl:2: not JSON"):
        read_dynamics(bad)
    with pytest.raises(ConfigError, match=r"no training_dynamics\.jsonl"):
        read_dynamics(tmp_path)
