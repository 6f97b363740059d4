"""A seed that trained far worse than its siblings is flagged in the evaluate tables."""

from __future__ import annotations

from zdebias.evaluation.tables import (
    outlier_runs,
    render_markdown,
    summary_table,
    table_markdown,
    unlearned_lines,
)


def _doc(*devs: float | None) -> dict[str, object]:
    runs = [
        {
            "model": f"clf/seed-{i + 1}",
            "seed": i + 1,
            "best_dev_accuracy": d,
            "metrics": {"SNLI": 0.7 if d is None else d},
            "results": {},
        }
        for i, d in enumerate(devs)
    ]
    return {"name": "M", "suites": [{"name": "SNLI"}], "runs": runs}


def test_the_poor_seed_is_flagged_in_the_table_and_under_it() -> None:
    doc = _doc(0.76, 0.626, 0.75, 0.77, 0.755)  # the pool experiment's seed 2
    [poor] = outlier_runs(doc["runs"])  # type: ignore[arg-type]
    assert (poor["seed"], poor["dev"]) == (2, 0.626)
    assert abs(poor["median"] - 0.7575) < 1e-12  # of 0.76, 0.75, 0.77, 0.755
    table = summary_table([doc])
    assert table_markdown(table).splitlines()[2].startswith("| M ⚠ seed 2 |")
    assert unlearned_lines(table) == [
        "M: seed 2 reached 62.6 % best dev accuracy against 75.8 % for its other seeds "
        "(median): an outlier, kept in the means; see docs/classify.md, 'A seed that trains "
        "poorly'"
    ]
    assert "- clf/seed-2: 62.6 % against the others' median 75.8 %" in render_markdown(doc)


def test_spread_within_five_points_or_too_few_seeds_is_not_flagged() -> None:
    assert outlier_runs(_doc(0.76, 0.72, 0.75)["runs"]) == []  # type: ignore[arg-type]
    assert outlier_runs(_doc(0.8, 0.5)["runs"]) == []  # type: ignore[arg-type]  # no majority
    assert outlier_runs(_doc(None, None, 0.5)["runs"]) == []  # type: ignore[arg-type]
    table = summary_table([_doc(0.76, 0.72, 0.75)])
    assert "⚠" not in table_markdown(table) and unlearned_lines(table) == []
