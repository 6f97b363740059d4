"""The evaluation bar chart of the run report."""


def test_evaluation_bars_draw_the_table() -> None:
    from zdebias.report.plots import evaluation_bars

    def table(mean: float) -> dict:
        cell = {"mean": mean, "std": 0.01, "n_runs": 3}
        rows = [
            {"name": "D0", "cells": {"SNLI": cell, "HANS": {"mean": 0.5, "std": 0.0}}},
            {"name": "Z(D0)", "cells": {"SNLI": {"mean": 0.8, "std": 0.02}, "HANS": None}},
        ]
        return {"columns": ["SNLI", "HANS"], "rows": rows}

    one = evaluation_bars(table(0.9), title="evaluate")
    assert one[:8] == b"\x89PNG\r\n\x1a\n"
    assert evaluation_bars(table(0.9), title="evaluate") == one  # same table, same bytes
    assert evaluation_bars(table(0.6), title="evaluate") != one  # a bar's height shows


def test_up_to_20_methods_get_20_different_colours() -> None:
    from zdebias.report.plots import COLORS, method_colors

    assert method_colors(3) == COLORS[:3]
    twelve = method_colors(12)  # the targeted recipe's evaluation: 12 methods
    assert len(set(twelve)) == 12
    assert len(set(method_colors(20))) == 20
    assert method_colors(21)[10] == COLORS[0]  # beyond tab20: tab10 repeats
