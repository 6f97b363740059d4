"""scripts/results_pages.py: a seed that trained far worse than its siblings is flagged."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "results_pages.py"
spec = importlib.util.spec_from_file_location("results_pages", SCRIPT)
assert spec and spec.loader
pages = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pages)


def _seeds(*devs: float | None) -> list[dict[str, object]]:
    return [{"seed": i + 1, "best_dev_accuracy": d} for i, d in enumerate(devs)]


def test_outlier_seed_is_flagged_not_averaged() -> None:
    # the pool experiment's seed 2: 0.62 against 0.75-0.77
    found = pages.outliers(_seeds(0.76, 0.62, 0.75, 0.77, 0.755))
    assert [(s["seed"], why) for s, why in found] == [
        (2, "dev 62.0 against the others' median 75.8")
    ]
    assert pages.outliers(_seeds(0.76, 0.72, 0.75)) == []  # 3.5 points: within the spread
    assert [s["seed"] for s, _ in pages.outliers(_seeds(0.80, 0.50, 0.79))] == [2]
    assert pages.outliers(_seeds(0.8, 0.5)) == []  # two seeds: no majority to judge by
    assert pages.outliers(_seeds(0.8, None, 0.79, 0.6)) == [
        (_seeds(0.8, None, 0.79, 0.6)[3], "dev 60.0 against the others' median 79.5")
    ]


def test_cells_show_interval_and_holm_mark() -> None:
    test = {"difference": -0.072, "ci": [-0.091, -0.053], "significant": True}
    assert pages._cell(test) == "-7.2 [-9.1, -5.3]*"
    assert pages._cell({"difference": 0.004, "ci": None, "significant": False}) == "+0.4"
    assert pages._cell(None) == "–"
