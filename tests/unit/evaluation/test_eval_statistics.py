"""Statistics a reviewer accepts (issue 55.4): paired t over shared seeds, Welch otherwise,
McNemar over rows for single runs, a 95 % interval for every difference, Holm within a
declared family; against hand computations."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.evaluation.significance import (
    adjust,
    bootstrap_interval,
    compare_results,
    comparison_markdown,
    holm,
    mcnemar,
    paired_ttest,
    ttest,
)
from zdebias.evaluation.suites import score_predictions

BASE = [0.80, 0.70, 0.90]
OTHER = [0.82, 0.71, 0.93]  # per-seed differences 0.02, 0.01, 0.03: mean 0.02, sd 0.01


def _doc(name: str, values: list[float], seeds: list[int] | None) -> dict[str, Any]:
    runs = [
        {
            "model": f"{name}/{i}",
            **({"seed": seeds[i]} if seeds else {}),
            "metrics": {"hans": v},
            "results": {},
        }
        for i, v in enumerate(values)
    ]
    return {"kind": "zdebias-evaluation", "name": name, "runs": runs, "suites": [{"name": "hans"}]}


def test_paired_t_over_seeds_matches_hand_computation() -> None:
    out = paired_ttest(BASE, OTHER)
    t = 0.02 / (0.01 / math.sqrt(3))  # = 2·√3
    assert out["test"] == "paired-t" and out["n_pairs"] == 3 and out["df"] == 2.0
    assert out["t"] == pytest.approx(t)
    # two-tailed p with 2 degrees of freedom: 1 − t / √(t² + 2)
    assert out["p"] == pytest.approx(1 - t / math.sqrt(t * t + 2), rel=1e-9)
    # t interval: 0.02 ± t(0.975, 2) · 0.01 / √3, t(0.975, 2) = 4.302653
    half = 4.302652729911275 * 0.01 / math.sqrt(3)
    assert out["ci"] == pytest.approx([0.02 - half, 0.02 + half])


def test_welch_on_the_same_numbers_differs_from_paired() -> None:
    out = ttest(BASE, OTHER)  # Welch by default
    qa, qb = 0.01 / 3, 0.0121 / 3  # sample variances 0.01 and 0.0121, over n = 3
    t = 0.02 / math.sqrt(qa + qb)
    df = (qa + qb) ** 2 / (qa**2 / 2 + qb**2 / 2)
    assert out["test"] == "welch"
    assert out["t"] == pytest.approx(t) and out["df"] == pytest.approx(df)
    assert out["p"] == pytest.approx(2 * stats.t.sf(t, df))
    half = stats.t.ppf(0.975, df) * math.sqrt(qa + qb)
    assert out["ci"] == pytest.approx([0.02 - half, 0.02 + half])
    # the paired test sees the seeds' shared ups and downs: p 0.074 instead of 0.83
    assert out["p"] > 0.8 and paired_ttest(BASE, OTHER)["p"] == pytest.approx(0.0742, abs=1e-4)


def test_student_interval_only_when_asked_for() -> None:
    out = ttest([1, 2, 3], [4, 5, 6], equal_var=True)
    # pooled sd 1, se √(2/3), df 4, t(0.975, 4) = 2.776445
    half = 2.7764451051977987 * math.sqrt(2 / 3)
    assert out["test"] == "student" and out["ci"] == pytest.approx([3 - half, 3 + half])


def test_compare_picks_the_test_from_the_seeds() -> None:
    paired = compare_results([_doc("D0", BASE, [1, 2, 3]), _doc("Z", OTHER, [1, 2, 3])])
    test = paired["comparisons"][0]["tests"]["hans"]
    assert test["test"] == "paired-t" and test["p"] == pytest.approx(0.0742, abs=1e-4)
    assert test["n_unpaired"] == 0
    unseeded = compare_results([_doc("D0", BASE, None), _doc("Z", OTHER, None)])
    assert unseeded["comparisons"][0]["tests"]["hans"]["test"] == "welch"
    # seeds 2 and 3 in common: paired over those two, the other two runs counted
    shifted = compare_results([_doc("D0", BASE, [1, 2, 3]), _doc("Z", OTHER, [2, 3, 4])])
    test = shifted["comparisons"][0]["tests"]["hans"]
    assert test["test"] == "paired-t" and test["n_pairs"] == 2 and test["n_unpaired"] == 2
    # OTHER[0], OTHER[1] have seeds 2, 3: paired with BASE[1], BASE[2]
    assert test["t"] == pytest.approx(stats.ttest_rel([0.82, 0.71], [0.70, 0.90]).statistic)
    forced = compare_results([_doc("D0", BASE, [1, 2, 3]), _doc("Z", OTHER, [1, 2, 3])], welch=True)
    assert forced["comparisons"][0]["tests"]["hans"]["test"] == "welch"
    student = compare_results(
        [_doc("D0", BASE, [1, 2, 3]), _doc("Z", OTHER, [1, 2, 3])], equal_var=True
    )
    assert student["comparisons"][0]["tests"]["hans"]["test"] == "student"


def test_holm_against_hand_computation() -> None:
    assert holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]
    # sorted 0.005·4, 0.02·3, 0.04·2, 0.5·1 → 0.02, 0.06, 0.08, 0.5
    assert holm([0.005, 0.5, 0.02, 0.04]) == [0.02, 0.5, 0.06, 0.08]
    assert holm([0.6, 0.9]) == [1.0, 1.0] and holm([]) == []


def test_holm_on_six_values_and_against_statsmodels_where_installed() -> None:
    ps = [0.001, 0.2, 0.013, 0.04, 0.5, 0.0049]
    # sorted: 0.001·6, 0.0049·5, 0.013·4, 0.04·3, 0.2·2, then 0.5·1 (already above 0.4)
    assert holm(ps) == pytest.approx([0.006, 0.4, 0.052, 0.12, 0.5, 0.0245])
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    _reject, expected, _s, _b = multitest.multipletests(ps, method="holm")
    assert holm(ps) == pytest.approx(list(expected), rel=1e-9)


def _test(p: float | None) -> dict[str, Any]:
    return {"p": p, "alpha": 0.05, "test": "welch", "difference": 0.01}


def test_holm_family_spans_every_baseline() -> None:
    """Default family: each method against D0 and against the control, on the suites."""
    d0 = {
        "baseline": "D0",
        "alpha": 0.05,
        "suites": ["hans"],
        "comparisons": [
            {"name": "Seq-Z", "tests": {"hans": _test(0.01), "hans macro-F1": _test(0.02)}},
            {"name": "ctrl", "tests": {"hans": _test(0.04)}},
        ],
    }
    ctrl = {
        "baseline": "ctrl",
        "alpha": 0.05,
        "suites": ["hans"],
        "comparisons": [{"name": "Seq-Z", "tests": {"hans": _test(0.03), "Avg.": _test(None)}}],
    }
    adjust([d0, ctrl])
    primary = [d0["comparisons"][0]["tests"]["hans"], d0["comparisons"][1]["tests"]["hans"]]
    primary.append(ctrl["comparisons"][0]["tests"]["hans"])
    assert [t["p_holm"] for t in primary] == [0.03, 0.06, 0.06]
    assert [t["significant"] for t in primary] == [True, False, False]
    secondary = d0["comparisons"][0]["tests"]["hans macro-F1"]
    assert secondary["family"] == "secondary" and secondary["p_holm"] == 0.02
    untested = ctrl["comparisons"][0]["tests"]["Avg."]
    assert untested["p_holm"] is None and untested["significant"] is False
    assert d0["families"] == {
        "primary": {"metrics": ["hans"], "size": 3},
        "secondary": {"size": 1},
    }
    assert "against D0, ctrl" in d0["legend"] and "primary = hans (3 tests" in d0["legend"]
    # a declared family: the macro-F1 alone is primary, the accuracies secondary
    adjust([d0, ctrl], ["hans macro-F1"])
    assert d0["comparisons"][0]["tests"]["hans macro-F1"]["family"] == "primary"
    assert d0["comparisons"][0]["tests"]["hans"]["p_holm"] == 0.03
    with pytest.raises(ConfigError, match="family: 'snli' not among the tested metrics"):
        adjust([d0], ["snli"])


def test_mcnemar_on_hand_made_rows() -> None:
    # both right 4, only the baseline 1, only the other 5
    a = [True] * 4 + [True] + [False] * 5
    b = [True] * 4 + [False] + [True] * 5
    out = mcnemar(a, b)
    assert (out["only_baseline"], out["only_other"], out["n_rows"]) == (1, 5, 10)
    # exact two-sided binomial on 6 discordant rows, 5 one way: 2 · (6 + 1) / 64
    assert out["p"] == pytest.approx(14 / 64)
    lo, hi = out["ci"]
    assert lo < 0.4 < hi and -1 <= lo and hi <= 1
    sure = mcnemar([False] * 10, [True] * 10)
    assert sure["p"] == pytest.approx(2 / 1024) and sure["ci"] == [1.0, 1.0]
    same = mcnemar([True, False], [True, False])
    assert same["p"] == 1.0 and same["ci"] == [0.0, 0.0]


def test_bootstrap_interval_is_near_the_normal_one_on_many_rows() -> None:
    # 1,000 rows, 60 only the other model gets right, 30 only the baseline: d = 0.03,
    # se = √((0.06 + 0.03 − 0.03²) / 1000) = 0.009439
    se = math.sqrt((0.09 - 0.0009) / 1000)
    lo, hi = bootstrap_interval(60, 30, 1000)
    assert lo == pytest.approx(0.03 - 1.96 * se, abs=0.0015)
    assert hi == pytest.approx(0.03 + 1.96 * se, abs=0.0015)
    assert bootstrap_interval(60, 30, 1000) == [lo, hi]  # fixed seed: the same every time


def _pair(i: int, label: str) -> Record:
    return Record(f"r{i}", label, "a premise", f"hypothesis {i}", None, {})


def _single(name: str, right: list[bool]) -> dict[str, Any]:
    labels = ["entailment", "neutral", "contradiction"]
    records = [_pair(i, "entailment") for i in range(len(right))]
    probs = np.array([[0.8, 0.1, 0.1] if ok else [0.1, 0.8, 0.1] for ok in right])
    result = score_predictions(probs, labels, records)
    run = {"model": name, "metrics": {"hans": result["accuracy"]}, "results": {"hans": result}}
    return {"kind": "zdebias-evaluation", "name": name, "runs": [run], "suites": [{"name": "hans"}]}


def test_single_runs_get_mcnemar_over_rows() -> None:
    base = _single("D0", [True] * 5 + [False] * 5)
    other = _single("PoE", [True] * 4 + [False] + [True] * 5)
    assert base["runs"][0]["results"]["hans"]["outcomes"] == "1111100000"
    test = compare_results([base, other])["comparisons"][0]["tests"]["hans"]
    assert test["test"] == "mcnemar" and test["p"] == pytest.approx(14 / 64)
    assert test["difference"] == pytest.approx(0.4)
    # results without the rows' outcomes: said, no silent fallback
    for run in other["runs"]:
        del run["results"]["hans"]["outcomes"]
    test = compare_results([base, other])["comparisons"][0]["tests"]["hans"]
    assert test["p"] is None and test["test"] is None
    assert "McNemar" in test["reason"] and "do not keep" in test["reason"]
    # a metric that is not a suite's accuracy: no per-row test, said
    base["runs"][0]["metrics"]["hans macro-F1"] = 0.4
    other["runs"][0]["metrics"]["hans macro-F1"] = 0.6
    tests = compare_results([base, other], keys=["hans", "hans macro-F1"])["comparisons"][0]
    assert (
        "applies to a suite's accuracy, not to 'hans macro-F1'"
        in tests["tests"]["hans macro-F1"]["reason"]
    )
    # other rows: not paired
    moved = _single("PoE", [True] * 11)
    test = compare_results([base, moved])["comparisons"][0]["tests"]["hans"]
    assert test["p"] is None and "not scored on the same rows" in test["reason"]


def test_comparison_markdown_has_test_interval_and_adjusted_p() -> None:
    cmp = compare_results([_doc("D0", BASE, [1, 2, 3]), _doc("Z", OTHER, [1, 2, 3])])
    text = comparison_markdown(cmp)
    assert text.splitlines()[0] == (
        "| method | metric | baseline | method | Δ (points) | 95 % CI | test | t | p | p (Holm) | |"
    )
    assert "| Z | hans | 80.00±10.00 | 82.00±11.00 | +2.00 |" in text
    assert "| +2.00 | [-0.48, +4.48] | paired-t (3 seeds) | 3.464 | 0.0742 | 0.0742 |  |" in text
    assert "primary = hans (1 tests" in cmp["legend"]


def test_evaluate_stage_adjusts_over_all_baselines() -> None:
    from zdebias.pipeline.stages.classify import baseline_comparisons

    docs = [
        _doc("D0", BASE, [1, 2, 3]),
        _doc("ctrl", [0.81, 0.69, 0.92], [1, 2, 3]),
        _doc("Seq-Z", OTHER, [1, 2, 3]),
    ]
    cfg = SimpleNamespace(detail=False, average=False, baselines=["D0", "ctrl"], family=None)
    comparisons = baseline_comparisons(docs, cfg)  # type: ignore[arg-type]
    assert [c["baseline"] for c in comparisons] == ["D0", "ctrl"]
    tests = [t for c in comparisons for item in c["comparisons"] for t in item["tests"].values()]
    # ctrl and Seq-Z against D0, then D0 (the same test as ctrl against D0) and Seq-Z
    # against ctrl: three tests in the family, the repeat counted once
    assert len(tests) == 4 and comparisons[0]["families"]["primary"]["size"] == 3
    assert [t["p_holm"] for t in tests[:2] + tests[3:]] == holm(
        [t["p"] for t in tests[:2] + tests[3:]]
    )
    assert (
        tests[2]["p"] == pytest.approx(tests[0]["p"]) and tests[2]["p_holm"] == tests[0]["p_holm"]
    )
    assert "against D0, ctrl" in comparisons[1]["legend"]


def test_compare_cli_prints_test_interval_and_adjusted_p(tmp_path: Path) -> None:
    from zdebias.cli import app

    paths = []
    for doc in (_doc("D0", BASE, [1, 2, 3]), _doc("Z", OTHER, [1, 2, 3])):
        for run in doc["runs"]:
            run["results"] = {"hans": {"accuracy": run["metrics"]["hans"]}}
        path = tmp_path / f"{doc['name']}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        paths.append(str(path))
    result = CliRunner().invoke(app, ["compare", *paths, "--out", str(tmp_path / "cmp.json")])
    assert result.exit_code == 0, result.output
    assert "[-0.48, +4.48] | paired-t (3 seeds) | 3.464 | 0.0742 | 0.0742 |" in result.output
    assert "* Holm-adjusted p < 0.05 (two-tailed) against D0" in result.output
    saved = json.loads((tmp_path / "cmp.json").read_text(encoding="utf-8"))
    test = saved["comparisons"][0]["tests"]["hans"]
    assert test["test"] == "paired-t" and test["p_holm"] == pytest.approx(0.0742, abs=1e-4)
    assert test["ci"][0] == pytest.approx(0.02 - 4.302652729911275 * 0.01 / math.sqrt(3))


def test_report_page_prints_the_legend_under_the_table() -> None:
    from zdebias.evaluation.tables import summary_table
    from zdebias.report.html import evaluation_tables

    docs = [_doc("D0", BASE, [1, 2, 3]), _doc("Z", OTHER, [1, 2, 3])]
    cmp = compare_results(docs)
    shown = evaluation_tables(
        "ev", {"table": summary_table(docs, comparison=cmp), "comparison": cmp}
    )
    assert shown["legend"].startswith("Underlined: Holm-adjusted p < 0.05 (two-tailed) against D0")
    assert "paired-t: paired t-test over seeds" in shown["legend"]
    assert evaluation_tables("ev", {"table": summary_table(docs)})["legend"] is None


def test_compare_cli_refuses_two_tests_and_an_unknown_family(tmp_path: Path) -> None:
    from zdebias.cli import app

    paths = []
    for doc in (_doc("D0", BASE, [1, 2, 3]), _doc("Z", OTHER, [1, 2, 3])):
        path = tmp_path / f"{doc['name']}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        paths.append(str(path))
    # ConfigError: the command line prints its one line and exits 2
    both = CliRunner().invoke(app, ["compare", *paths, "--welch", "--student"])
    assert isinstance(both.exception, ConfigError)
    assert "welch and student exclude each other" in str(both.exception)
    family = CliRunner().invoke(app, ["compare", *paths, "--family", "snli"])
    assert isinstance(family.exception, ConfigError)
    assert "family: 'snli' not among the tested metrics (hans)" in str(family.exception)


class _Fixed:
    """A classifier that gets right the rows listed for its name (row ids ``r0`` ...)."""

    input = "text"
    RIGHT: ClassVar[dict[str, set[int]]] = {"m0": set(range(5)), "m1": {0, 1, 2, 3, 5, 6, 7, 8, 9}}

    def __init__(self, name: str) -> None:
        self.name = Path(name).name
        self.labels = ["negative", "positive"]

    def predict_each(self, sets: list[list[Record]], **_: Any) -> list[np.ndarray]:
        out = []
        for records in sets:
            probs = np.zeros((len(records), 2))
            for i, r in enumerate(records):
                gold = self.labels.index(r.label)
                ok = int(r.id[1:]) in self.RIGHT[self.name]
                probs[i, gold if ok else 1 - gold] = 1.0
            out.append(probs)
        return out


def test_evaluate_stage_single_runs_get_mcnemar_and_one_legend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zdebias.classify.on_ray as on_ray
    from zdebias.data.writers import write_records
    from zdebias.pipeline.loader import recipe_from_dict
    from zdebias.pipeline.runner import run_recipe

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(on_ray, "classifier_for", lambda model, *a, **k: _Fixed(str(model)))
    rows = [Record(f"r{i}", ["negative", "positive"][i % 2], text=f"text {i}") for i in range(10)]
    write_records(rows, tmp_path / "test.jsonl")
    recipe = recipe_from_dict(
        {
            "name": "s",
            "task": "sentiment",
            "data": {"test": "test.jsonl"},
            "stages": {
                "eval": {
                    "stage": "evaluate",
                    "classifiers": {"D0": "m0", "PoE": "m1"},
                    "suites": {"test": "test"},
                }
            },
        }
    )
    run_recipe(recipe, tmp_path / "run")
    results = json.loads((tmp_path / "run" / "eval" / "results.json").read_text())
    test = results["comparison"]["comparisons"][0]["tests"]["test"]
    # D0 right on rows 0-4, PoE on 0-3 and 5-9: 1 row only D0, 5 rows only PoE
    assert test["test"] == "mcnemar" and (test["only_baseline"], test["only_other"]) == (1, 5)
    assert test["p"] == pytest.approx(14 / 64) and test["difference"] == pytest.approx(0.4)
    table = (tmp_path / "run" / "eval" / "table.md").read_text()
    assert "| PoE | test | 50.00 | 90.00 | +40.00 | [" in table and "| mcnemar | – |" in table
    assert table.count("* Holm-adjusted p < 0.05 (two-tailed) against D0") == 1
    assert "mcnemar: McNemar's exact test over rows, paired bootstrap interval" in table


def test_recipe_family_names_must_be_suites_metrics() -> None:
    from zdebias.pipeline.loader import recipe_from_dict

    stage = {
        "stage": "evaluate",
        "classifiers": {"A": "models/a", "B": "models/b"},
        "suites": {"hans": "t", "snli-hard": "t"},
        "family": ["hans", "hnas"],
    }
    data = {"name": "e", "data": {"t": "t.jsonl"}, "stages": {"ev": stage}}
    with pytest.raises(ConfigError, match=r"family \['hnas'\] names no suite of suites"):
        recipe_from_dict(data)
    stage["family"] = ["hans", "snli-hard macro-F1", "hans/lexical_overlap", "reliance-gap"]
    assert recipe_from_dict(data).stages["ev"].family == stage["family"]
