"""The one cell formatter of the Markdown tables, the HTML report and the terminal summary."""

from __future__ import annotations

import pytest

from zdebias.evaluation.cells import MISSING, format_cell, format_number, format_percent

TWO_RUNS = {"mean": 0.8034, "std": 0.0046, "n_runs": 2}


@pytest.mark.parametrize(
    ("cell", "options", "text"),
    [
        (None, {}, "–"),
        ({"mean": 0.9025, "std": 0.0, "n_runs": 1}, {}, "90.25"),
        ({"mean": 0.9025}, {}, "90.25"),  # n_runs defaults to one run
        (TWO_RUNS, {}, "80.34±0.46"),
        ({**TWO_RUNS, "significant": True}, {}, "80.34±0.46*"),
        ({**TWO_RUNS, "significant": False}, {}, "80.34±0.46"),
        ({**TWO_RUNS, "significant": True}, {"mark": ""}, "80.34±0.46"),  # HTML underlines
        ({**TWO_RUNS, "significant": True}, {"std": False, "mark": ""}, "80.34"),  # terminal
        (TWO_RUNS, {"digits": 1}, "80.3±0.5"),
        ({"mean": 1.0, "std": 0.0, "n_runs": 3}, {}, "100.00±0.00"),
    ],
)
def test_format_cell(cell: dict | None, options: dict, text: str) -> None:
    assert format_cell(cell, **options) == text


@pytest.mark.parametrize(
    ("value", "options", "text"),
    [
        (None, {}, "–"),
        (12345, {}, "12,345"),
        (12345, {"digits": 2}, "12,345"),  # ints keep no decimals
        (1234.56, {}, "1,234.6"),
        (0.6, {}, "0.6"),
        (4.4567, {"digits": 2}, "4.46"),
        (12345.0, {"thousands": ""}, "12345.0"),
        (-8.5757, {"digits": 1, "thousands": ""}, "-8.6"),
        ("n/a", {}, "n/a"),
    ],
)
def test_format_number(value: object, options: dict, text: str) -> None:
    assert format_number(value, **options) == text


def test_format_percent() -> None:
    assert format_percent(0.9045) == "90.45"
    assert format_percent(0.9045, digits=1) == "90.5"
    assert format_percent(None) == MISSING == "–"
