"""Shortcut-breaking cells (docs/design.md §12): the rows Z-Aug needs per cell, checked by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from zdebias.data.schema import Record
from zdebias.errors import DataError
from zdebias.stats.cells import (
    Cell,
    cell_report,
    cells_from_report,
    cells_of,
    load_cells,
    rows_needed,
    shortcut_cells,
    spread,
    z_value,
)

LABELS = ["entailment", "neutral", "contradiction"]


def test_rows_needed_by_hand() -> None:
    # f in 40 rows, 30 entailment: z = (0.75 − 1/3) / sqrt((2/9) / 40) = 5.590
    assert z_value(30, 40, 3) == pytest.approx(5.5902, abs=1e-4)
    # 17 rows more (n = 57): z = (30/57 − 1/3) / sqrt((2/9) / 57) = 3.091 > 3;
    # 18 rows more (n = 58): (30/58 − 1/3) / sqrt((2/9) / 58) = 2.971 <= 3
    assert z_value(30, 57, 3) == pytest.approx(3.0907, abs=1e-4)
    assert z_value(30, 58, 3) == pytest.approx(2.9712, abs=1e-4)
    assert rows_needed(c=30, n=40, num_labels=3, threshold=3.0) == 18
    # already below the threshold: nothing
    assert rows_needed(c=20, n=40, num_labels=3, threshold=3.0) == 0
    # two labels: p0 = 1/2, 9 of 10: z = 0.4 / sqrt(0.25 / 10) = 2.530; n = 16 gives
    # (9/16 − 0.5) / sqrt(0.25 / 16) = 0.5 <= 1, n = 15 gives 0.1 / 0.1291 = 0.775 <= 1,
    # n = 14: 0.1429 / 0.1336 = 1.069 > 1 → 5 rows
    assert rows_needed(c=9, n=10, num_labels=2, threshold=1.0) == 5


def test_spread_fills_the_emptiest_cell_first() -> None:
    assert spread([6, 4], 18, 30) == [8, 10]  # 4 → 6, then 8 each: 14, 14
    assert spread([9, 0], 5, 10) == [0, 5]
    assert spread([10, 0], 4, 10) == [0, 4]  # a cell at the cap takes nothing
    assert spread([3, 3], 3, 10) == [2, 1]  # ties: the first cell first
    with pytest.raises(ValueError, match="cannot take"):
        spread([9, 9], 3, 10)


def test_cells_of_a_hand_made_table() -> None:
    counts = np.array(
        [
            [30, 6, 4],  # entailment z 5.59; at t = 1: n 78 gives 0.961, n 77 gives 1.048
            [10, 10, 0],  # z 1.58 for entailment and neutral (the first wins): n 24 → 0.866
            [5, 5, 5],  # balanced: no cell
            [0, 1, 9],  # contradiction z 3.80: n 21 gives 0.926, n 20 gives 1.107
        ]
    )
    cells = shortcut_cells(counts, ["a@hypothesis", "b", "c", "d"], LABELS, threshold=1.0)
    z_a, z_b, z_d = z_value(30, 40, 3), z_value(10, 20, 3), z_value(9, 10, 3)
    assert (round(z_a, 3), round(z_b, 3), round(z_d, 3)) == (5.590, 1.581, 3.801)
    assert cells == [
        # 38 rows: contradiction 4 → 6, then 18 each: 24 and 24
        Cell("a@hypothesis", "entailment", "neutral", z_a, 40, 6, 18),
        Cell("a@hypothesis", "entailment", "contradiction", z_a, 40, 4, 20),
        # 11 rows: entailment 0 → 1, then 5 each: 6 and 6
        Cell("d", "contradiction", "entailment", z_d, 10, 0, 6),
        Cell("d", "contradiction", "neutral", z_d, 10, 1, 5),
        # 4 rows, all contradiction: neutral is already at entailment's 10
        Cell("b", "entailment", "neutral", z_b, 20, 10, 0),
        Cell("b", "entailment", "contradiction", z_b, 20, 0, 4),
    ]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 400), min_size=2, max_size=4),
    st.floats(0.5, 6.0),
)
def test_needed_rows_are_the_fewest_that_clear_every_label(row: list[int], t: float) -> None:
    counts = np.array([row])
    cells = shortcut_cells(counts, ["f"], [f"l{i}" for i in range(len(row))], threshold=t)
    if not cells:
        assert all(z_value(c, sum(row), len(row)) <= t for c in row)
        return
    after = list(row)
    for c in cells:
        after[int(c.label[1:])] += c.needed
    n = sum(after)
    assert all(z_value(c, n, len(row)) <= t + 1e-9 for c in after)  # every label cleared
    fav = int(cells[0].favoured[1:])
    assert z_value(row[fav], n - 1, len(row)) > t  # one row fewer is not enough


def _records(n_biased: int) -> list[Record]:
    """Every label 30 times; 'sleeping' in n_biased contradiction hypotheses and in 2
    entailment and 1 neutral ones."""
    rows = []
    for i in range(90):
        label = LABELS[i % 3]
        words = "a man is outside"
        if (label == "contradiction" and i // 3 < n_biased) or (
            label != "contradiction" and i // 3 < (2 if label == "entailment" else 1)
        ):
            words = "a man is sleeping"
        rows.append(
            Record(id=str(i), premise="A man is on a bench.", hypothesis=words, label=label)
        )
    return rows


def test_cells_on_the_fly_and_from_a_saved_report(tmp_path: Path) -> None:
    from zdebias.stats.measure import measure

    m = measure(_records(20), features=["unigrams"])
    t = m.report["z_critical"]
    cells = {(c.feature, c.label): c for c in cells_of(m)}
    # sleeping@hypothesis: 23 rows, 20 contradiction
    c = cells[("sleeping@hypothesis", "entailment")]
    assert (c.favoured, c.n, c.rows) == ("contradiction", 23, 2)
    need = rows_needed(c=20, n=23, num_labels=3, threshold=t)
    both = c.needed + cells[("sleeping@hypothesis", "neutral")].needed
    assert need > 0 and both == need
    assert z_value(20, 23 + need, 3) <= t < z_value(20, 22 + need, 3)
    # from the JSON `zdebias stats --out` writes: the same cells (features seen > min_n)
    report = {**m.report, "gardner": m.gardner_points(0)}
    again = cells_from_report(json.loads(json.dumps(report)))
    assert again == cells_of(m)


def test_stats_cells_cli(tmp_path: Path) -> None:
    from zdebias.cli import app

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in _records(25)))
    out = tmp_path / "cells.json"
    result = CliRunner().invoke(
        app, ["stats", str(data), "--features", "unigrams", "--cells", str(out)]
    )
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert written["labels"] == LABELS and written["n_cells"] == 2 * written["n_features"]
    first = written["cells"][0]
    assert (first["feature"], first["favoured"], first["label"]) == (
        "sleeping@hypothesis",
        "contradiction",
        "entailment",
    )
    assert written["rows_needed"] == sum(c["needed"] for c in written["cells"])
    assert "shortcut-breaking cells" in result.output
    assert f"written to {out}" in result.output.replace("\n", "")


def _pair(i: int, hypothesis: str, label: str) -> Record:
    return Record(id=f"r{i}", premise="A man sits.", hypothesis=hypothesis, label=label)


def test_cell_report_z_before_and_after_by_hand() -> None:
    """D0: "nobody" in 5 hypotheses, 4 contradiction and 1 entailment; the samples add 2
    entailment rows with it (and one without, which changes nothing)."""
    d0 = [_pair(i, "Nobody sits.", "contradiction") for i in range(4)]
    d0 += [_pair(4, "Nobody is here.", "entailment"), _pair(5, "A man sits.", "neutral")]
    samples = [_pair(10, "Nobody sits down.", "entailment"), _pair(11, "nobody.", "entailment")]
    samples.append(_pair(12, "A man rests.", "entailment"))
    cell = Cell("nobody@hypothesis", "contradiction", "entailment", 4.9, 5, 1, 2)
    (row,) = cell_report(d0, samples, [cell], labels=LABELS)
    p0 = 1 / 3
    before = (4 / 5 - p0) / np.sqrt(p0 * (1 - p0) / 5)  # 2.2136
    after = (4 / 7 - p0) / np.sqrt(p0 * (1 - p0) / 7)  # 1.3363
    assert row["cell"] == "nobody@hypothesis→entailment"
    assert row["z_before"] == pytest.approx(before, abs=1e-4) == pytest.approx(2.2136, abs=1e-4)
    assert row["z_after"] == pytest.approx(after, abs=1e-4) == pytest.approx(1.3363, abs=1e-4)
    assert (row["n_before"], row["n_after"], row["rows_before"], row["rows_after"]) == (5, 7, 1, 3)
    other = Cell("hypo-only-pred=contradiction", "contradiction", "neutral", 9.0, 9, 0, 3)
    assert cell_report(d0, samples, [other], labels=LABELS)[0]["z_after"] is None


def test_load_cells_from_cells_json_and_from_a_report(tmp_path: Path) -> None:
    cell = Cell("nobody@hypothesis", "contradiction", "entailment", 4.9, 5, 1, 2)
    path = tmp_path / "cells.json"
    path.write_text(json.dumps({"cells": [cell.to_dict()]}))
    assert load_cells(path) == [cell]
    path.write_text(json.dumps({"top": []}))
    with pytest.raises(DataError, match=r"cells.json: field 'cells': expected `zdebias stats"):
        load_cells(path)
