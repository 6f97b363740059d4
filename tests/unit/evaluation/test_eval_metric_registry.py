"""The metric registry: the built-ins in the order a results document keeps, the keys compare
tests derived from it, and a toy metric of a test module (``toy_metric.py``, loaded by dotted
path) seen through the CLI's evaluate and compare, a recipe's evaluate stage and Python."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zdebias.data.schema import Record
from zdebias.data.writers import write_records
from zdebias.errors import ConfigError
from zdebias.evaluation import catalogue
from zdebias.evaluation.catalogue import compared_keys, registered_metrics, suite_metrics
from zdebias.evaluation.significance import compare_results
from zdebias.evaluation.suites import Suite, evaluate_models

TOY = "toy_metric:EntailmentShare"
LABELS = ["entailment", "neutral", "contradiction"]
GOLD = ["entailment", "neutral", "contradiction", "entailment"]
#: per fake model: how many leading rows it calls entailment (the rest: gold)
ENTAILS = {"A0": 0, "A1": 0, "B0": 2, "B1": 4}


class _Fake:
    """A classifier that calls the first :data:`ENTAILS` rows entailment, the rest right."""

    input = "pair"

    def __init__(self, name: str) -> None:
        self.k = ENTAILS[Path(name).name]
        self.labels = list(LABELS)

    def predict_each(self, sets: list[list[Record]], **_: Any) -> list[np.ndarray]:
        out = []
        for records in sets:
            probs = np.zeros((len(records), 3))
            for i, r in enumerate(records):
                pred = "entailment" if int(r.id) < self.k else r.label
                probs[i, LABELS.index(pred)] = 1.0
            out.append(probs)
        return out


@pytest.fixture
def test_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import zdebias.classify.on_ray as on_ray

    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # where toy_metric.py lives
    monkeypatch.setattr(on_ray, "classifier_for", lambda model, *a, **k: _Fake(str(model)))
    path = tmp_path / "test.jsonl"
    write_records([Record(str(i), g, f"p{i}", f"h{i}") for i, g in enumerate(GOLD)], path)
    return path


def test_builtins_in_results_order_and_the_tested_keys_derive_from_the_registry() -> None:
    specs = registered_metrics()
    builtin = [n for n, s in specs.items() if s.builtin]
    assert builtin == [
        "accuracy",
        "heuristics",
        "macro-f1",
        "balanced-accuracy",
        "per-label",
        "groups",
    ]
    assert specs["groups"].scope == "split" and not specs["groups"].tested
    assert [m.name for m in suite_metrics()] == builtin[:-1]
    assert compared_keys(["snli", "hans"]) == [
        "snli macro-F1",
        "snli balanced accuracy",
        "hans macro-F1",
        "hans balanced accuracy",
    ]


def test_an_unknown_metric_is_one_line_naming_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="unknown metric 'f2'; expected one of accuracy, "):
        suite_metrics(["f2"])
    with pytest.raises(ConfigError, match="metric 'no_such_module:X': cannot load it"):
        suite_metrics(["no_such_module:X"])


def test_python_evaluate_and_compare_carry_the_toy_metric(test_set: Path) -> None:
    suite = Suite("t", str(test_set), format="jsonl")
    plain = evaluate_models(["A0", "A1"], [suite], progress=False)
    assert "extra_metrics" not in plain and "t entailment share" not in plain["summary"]
    base = evaluate_models(["A0", "A1"], [suite], progress=False, metrics=[TOY])
    other = evaluate_models(["B0", "B1"], [suite], progress=False, metrics=[TOY])
    assert base["extra_metrics"] == [TOY]
    # the built-ins' keys as before, the toy metric's after them
    assert list(base["runs"][0]["metrics"])[-1] == "t entailment share"
    assert base["runs"][0]["metrics"] == {**plain["runs"][0]["metrics"], "t entailment share": 0.5}
    assert other["summary"]["t entailment share"]["values"] == [0.75, 1.0]
    assert catalogue.tested_keys(base, ["t"]) == [
        "t macro-F1",
        "t balanced accuracy",
        "t entailment share",
    ]
    tests = compare_results([base, other])["comparisons"][0]["tests"]
    assert list(tests) == ["t", "t macro-F1", "t balanced accuracy", "t entailment share"]
    assert tests["t entailment share"]["difference"] == pytest.approx(0.875 - 0.5)


def test_cli_evaluate_and_compare_with_a_metric_by_dotted_path(
    test_set: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from typer.testing import CliRunner

    from zdebias.cli import app, main

    runner = CliRunner()
    for method in ("A", "B"):
        args = ["evaluate", f"{method}0", f"{method}1", "--suite", f"t={test_set}"]
        out = tmp_path / f"{method}.json"
        result = runner.invoke(app, [*args, "--out", str(out), "--metrics", TOY])
        assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "B.json").read_text())
    assert doc["summary"]["t entailment share"]["mean"] == pytest.approx(0.875)
    cmp_out = tmp_path / "cmp.json"
    args = ["compare", str(tmp_path / "A.json"), str(tmp_path / "B.json"), "--out", str(cmp_out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    tests = json.loads(cmp_out.read_text())["comparisons"][0]["tests"]
    assert tests["t entailment share"]["difference"] == pytest.approx(0.375)
    args = ["evaluate", "A0", "--suite", f"t={test_set}", "--out", str(tmp_path / "x.json")]
    with pytest.raises(SystemExit) as bad:
        main([*args, "--metrics", "f2"])
    assert bad.value.code == 2
    assert "unknown metric 'f2'; expected one of accuracy" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_recipe_evaluate_stage_with_a_metric(
    test_set: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zdebias.pipeline.digests import stage_hash
    from zdebias.pipeline.loader import recipe_from_dict
    from zdebias.pipeline.runner import run_recipe

    monkeypatch.chdir(tmp_path)
    stage = {
        "stage": "evaluate",
        "classifiers": {"A": "A0", "B": "B1"},
        "suites": {"t": "test"},
    }
    recipe = {"name": "m", "task": "nli", "data": {"test": str(test_set)}, "stages": {}}
    plain = recipe_from_dict({**recipe, "stages": {"eval": stage}})
    empty = recipe_from_dict({**recipe, "stages": {"eval": {**stage, "metrics": []}}})
    toy = recipe_from_dict({**recipe, "stages": {"eval": {**stage, "metrics": [TOY]}}})
    run_recipe(toy, tmp_path / "run")
    results = json.loads((tmp_path / "run" / "eval" / "results.json").read_text())
    assert [d["summary"]["t entailment share"]["mean"] for d in results["documents"]] == [0.5, 1]
    # unset (or empty), the setting leaves the stage hash as it was before it existed
    hashes = [stage_hash(r, "eval", r.stages["eval"], {}) for r in (plain, empty, toy)]
    assert hashes[0] == hashes[1] != hashes[2]
