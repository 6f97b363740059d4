"""The filter-method registry (:mod:`zdebias.stats.methods`): the built-ins are found by
name, the settings' names and stage hashes derive from it, and a user's method from a test
module runs through the CLI, a recipe stage and the API (``zdebias.filter``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import zdebias
from helpers.cli_main import run_main
from zdebias.api import AFLITE_COLUMNS, FILTER_COLUMNS
from zdebias.errors import ConfigError
from zdebias.pipeline.loader import recipe_from_dict
from zdebias.pipeline.runner import run_recipe
from zdebias.stats.methods import FilterMethod, filter_method, method_names
from zdebias.stats.settings import FILTER_METHODS, FilterSettings

TOY = f"{Path(__file__).with_name('toy_filter_method.py')}:EveryOther"
ROWS = [
    {"premise": f"p {i}", "hypothesis": f"h {i}", "label": ["entailment", "neutral"][i % 2]}
    for i in range(7)
]


def test_the_built_ins_are_registered_by_name() -> None:
    assert FILTER_METHODS == ("z", "cartography", "aflite") == method_names()[:3]
    for name in FILTER_METHODS:
        method = filter_method(name)
        assert isinstance(method, FilterMethod) and method.name == name
    assert filter_method("z").columns == FILTER_COLUMNS
    assert filter_method("aflite").columns == AFLITE_COLUMNS
    with pytest.raises(ConfigError, match="unknown filter method 'forest'; expected one of z, "):
        filter_method("forest")
    with pytest.raises(ValueError, match="unknown filter method 'forest'"):
        FilterSettings(method="forest")


def test_a_toy_method_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), **r}) + "\n" for i, r in enumerate(ROWS)))
    assert run_main(["filter", data, "--out", tmp_path / "f", "--method", TOY]) == 0
    printed = capsys.readouterr().out
    assert "input 7: kept 4, rejected 3" in printed
    summary = json.loads((tmp_path / "f" / "summary.json").read_text())
    assert (summary["method"], summary["n_kept"], summary["n_rejected"]) == (TOY, 4, 3)
    kept = [json.loads(line)["id"] for line in (tmp_path / "f" / "kept.jsonl").open()]
    assert kept == ["0", "2", "4", "6"]
    rejected = [json.loads(line) for line in (tmp_path / "f" / "rejected.jsonl").open()]
    assert [r["meta"]["rejected_by"] for r in rejected] == [["every-other"]] * 3
    # a method that honours no features refuses the z-filter's
    args = ["filter", data, "--out", tmp_path / "g", "--method", TOY, "--keep-features", "x"]
    assert run_main(args) == 2
    assert "--keep-features is for z-filtering" in capsys.readouterr().err
    args = ["filter", data, "--out", tmp_path / "g", "--method", "no_such.module:Method"]
    assert run_main(args) == 2
    assert "filter method 'no_such.module:Method': cannot import" in capsys.readouterr().err
    assert not (tmp_path / "g").exists()


def test_a_toy_method_in_a_recipe_stage(tmp_path: Path) -> None:
    corpus = dict(stage="demo-data", n_train=30, n_dev=6, n_test=6)
    stages = {"corpus": corpus, "toy": {"stage": "filter", "input": "corpus.train", "method": TOY}}
    run_recipe(recipe_from_dict({"name": "toy", "seed": 3, "stages": stages}), tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "toy" / "summary.json").read_text())
    assert (summary["method"], summary["n_kept"], summary["n_rejected"]) == (TOY, 15, 15)
    assert len((tmp_path / "run" / "toy" / "kept.jsonl").read_text().splitlines()) == 15


def test_a_toy_method_through_the_api() -> None:
    pd = pytest.importorskip("pandas")
    rows = [*ROWS[:3], {"premise": "p", "hypothesis": "h"}, *ROWS[3:]]  # one unlabelled row
    out, summary = zdebias.filter(pd.DataFrame(rows), method=TOY, return_summary=True)
    assert out["keep"].tolist() == [True, False, True, False, False, True, False, True]
    assert out["position"].tolist() == [0, 1, 2, None, 3, 4, 5, 6]
    assert (summary["n_kept"], summary["n_rows"]) == (4, 8)
    listed = zdebias.filter(ROWS[:3], method=TOY)
    assert [r["keep"] for r in listed] == [True, False, True]


def test_the_filter_door_refuses_two_methods() -> None:
    with pytest.raises(ConfigError, match="method='z' but the settings' method is 'aflite'"):
        zdebias.z_filter(ROWS, FilterSettings(method="aflite"))


def test_a_method_registered_in_python() -> None:
    from zdebias.settings import Settings
    from zdebias.stats.methods import FilterOutcome, register_filter_method
    from zdebias.stats.methods.catalogue import REGISTRY

    @register_filter_method
    class KeepNone(FilterMethod):
        name = "keep-none"
        settings = Settings

        def run(self, records: list, settings: object, inputs: object) -> FilterOutcome:  # type: ignore[override]
            keep = [False] * len(records)
            return FilterOutcome([], list(records), {"n_kept": 0}, {"keep": keep})

    try:
        assert "keep-none" in method_names()
        assert FilterSettings(method="keep-none").method == "keep-none"
        assert [r["keep"] for r in zdebias.filter(ROWS[:2], method="keep-none")] == [False] * 2
    finally:
        REGISTRY.pop("keep-none")  # the next tests see the built-ins only
