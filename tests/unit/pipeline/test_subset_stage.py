"""The `subset` stage (seeded random subsets, same-size controls, strata), evaluate baselines,
`data.NAME.OPTION=` overrides on a short data entry, and CPU time in the manifest."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from zdebias.data.readers import read_records
from zdebias.data.schema import Record
from zdebias.data.subset import draw_subset
from zdebias.data.writers import write_records
from zdebias.errors import ConfigError
from zdebias.pipeline.loader import apply_overrides, recipe_from_dict
from zdebias.pipeline.runner import run_recipe


def _records(labels: str) -> list[Record]:
    return [
        Record(f"r{i}", "entailment" if c == "e" else "neutral", "p", f"h{i}")
        for i, c in enumerate(labels)
    ]


def test_draw_subset_is_seeded_sorted_and_stratified_by_largest_remainder() -> None:
    records = _records("eeeeeennnn")  # 6 e, 4 n
    picked = draw_subset(records, n=5, seed=3, stratify="label")
    assert picked == sorted(picked) and len(set(picked)) == 5
    assert Counter(records[i].label for i in picked) == {"entailment": 3, "neutral": 2}
    assert draw_subset(records, n=5, seed=3, stratify="label") == picked
    # groups of 4, 2 and 1 records, n 3: exact shares 1.71, 0.86, 0.43 → floors 1, 0, 0; the
    # two largest remainders (0.86, then 0.71) get the two missing places → 2, 1, 0
    strata = [Record(f"s{i}", "neutral", "p", "h", meta={"g": g}) for i, g in enumerate("aaaabbc")]
    chosen = draw_subset(strata, n=3, seed=0, stratify="g")
    assert Counter(strata[i].meta["g"] for i in chosen) == {"a": 2, "b": 1}
    # unstratified: the same draw as random.Random(seed).sample over all indices
    assert draw_subset(records, n=4, seed=9) == sorted(random.Random(9).sample(range(10), 4))


def test_draw_subset_refuses_more_than_there_is_and_a_missing_meta_key() -> None:
    with pytest.raises(ConfigError, match="cannot draw 11 records from 10"):
        draw_subset(_records("e" * 10), n=11, seed=0)
    with pytest.raises(ConfigError, match="record 'r0' has no meta field 'heuristic'"):
        draw_subset(_records("en"), n=1, seed=0, stratify="heuristic")


def test_subset_stage_like_another_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_records(_records("eeeeeennnn"), tmp_path / "all.jsonl")
    write_records(_records("ennn"), tmp_path / "small.jsonl")
    recipe = recipe_from_dict(
        {
            "name": "s",
            "seed": 5,
            "data": {"all": "all.jsonl", "small": "small.jsonl"},
            "stages": {
                "same_size": {"stage": "subset", "input": "all", "like": "small"},
                "strat": {"stage": "subset", "input": "all", "n": 5, "stratify": "label"},
            },
        }
    )
    manifest = run_recipe(recipe, tmp_path / "run")
    stages = {s["name"]: s for s in manifest["stages"]}
    assert stages["same_size"]["rows_out"] == {"total": 4, "left_out": 6}
    assert stages["same_size"]["rows_in"] == {"input": 10, "like": 4}
    kept = read_records(tmp_path / "run" / "same_size" / "data.jsonl", task="nli")
    assert [r.id for r in kept] == [f"r{i}" for i in draw_subset(_records("e" * 10), n=4, seed=5)]
    strat = read_records(tmp_path / "run" / "strat" / "data.jsonl", task="nli")
    assert Counter(r.label for r in strat) == {"entailment": 3, "neutral": 2}
    assert all(
        isinstance(s["cpu_seconds"], float) and s["cpu_seconds"] >= 0 for s in stages.values()
    )
    again = {s["name"]: s for s in run_recipe(recipe, tmp_path / "run")["stages"]}
    assert {s["status"] for s in again.values()} == {"skipped"}
    assert {k: s["cpu_seconds"] for k, s in again.items()} == {
        k: s["cpu_seconds"] for k, s in stages.items()
    }  # a skipped stage shows what it cost when it ran


def test_subset_needs_exactly_one_size() -> None:
    base = {"name": "s", "data": {"a": "a.jsonl"}}
    with pytest.raises(ConfigError, match="exactly one of n"):
        recipe_from_dict({**base, "stages": {"x": {"stage": "subset", "input": "a"}}})
    with pytest.raises(ConfigError, match="exactly one of n"):
        recipe_from_dict(
            {**base, "stages": {"x": {"stage": "subset", "input": "a", "n": 2, "like": "a"}}}
        )


def test_evaluate_baselines_must_be_methods() -> None:
    data = {
        "name": "e",
        "data": {"t": "t.jsonl"},
        "stages": {
            "ev": {
                "stage": "evaluate",
                "classifiers": {"A": "models/a", "B": "models/b"},
                "suites": {"test": "t"},
                "baselines": ["A", "C"],
            }
        },
    }
    with pytest.raises(ConfigError, match=r"baselines \['C'\] are not methods of classifiers"):
        recipe_from_dict(data)
    data["stages"]["ev"]["baselines"] = ["B", "A"]
    assert recipe_from_dict(data).stages["ev"].baselines == ["B", "A"]


def _doc(name: str, runs: list[tuple[float, float, float]]) -> dict:
    """A results document as ``evaluate_models`` writes it: per run the flat metrics."""
    keys = ("HANS", "HANS/lexical_overlap", "HANS/lexical_overlap/entailment")
    metrics = [dict(zip(keys, run, strict=True)) for run in runs]
    return {
        "name": name,
        "suites": [{"name": "HANS"}],
        "runs": [{"metrics": m} for m in metrics],
        "summary": {k: {"mean": sum(m[k] for m in metrics) / len(metrics)} for k in keys},
    }


def test_evaluate_detail_tests_each_heuristic_and_label() -> None:
    from zdebias.pipeline.stages.classify import EvaluateConfig, baseline_comparisons

    docs = [
        _doc("D0", [(0.50, 0.40, 0.90), (0.52, 0.41, 0.92), (0.51, 0.42, 0.91)]),
        _doc("new", [(0.60, 0.70, 0.60), (0.61, 0.72, 0.62), (0.62, 0.71, 0.61)]),
        _doc("one seed", [(0.55, 0.50, 0.80)]),
    ]
    settings = {"stage": "evaluate", "classifiers": {"D0": "a", "new": "b", "one seed": "c"}}
    plain = baseline_comparisons(docs, EvaluateConfig(suites={"HANS": "h"}, **settings))
    (detail,) = baseline_comparisons(
        docs, EvaluateConfig(suites={"HANS": "h"}, detail=True, **settings)
    )
    assert [list(c["tests"]) for c in plain[0]["comparisons"]] == [["HANS"], ["HANS"]]
    new, one = detail["comparisons"]
    assert list(new["tests"]) == list(docs[0]["summary"])
    entailment = new["tests"]["HANS/lexical_overlap/entailment"]
    assert entailment["difference"] == pytest.approx(-0.30)
    assert entailment["p"] < 0.05 and entailment["significant"]
    assert one["tests"]["HANS/lexical_overlap"]["t"] is None  # one run: no t-test
    # unset, the setting stays out of the stage's settings (and so of its hash)
    assert "detail" not in EvaluateConfig(suites={"HANS": "h"}, **settings).model_dump()


def test_a_reader_option_override_on_a_short_data_entry() -> None:
    data = {"name": "o", "data": {"train": "t.jsonl"}, "stages": {}}
    out = apply_overrides(data, ["data.train.limit=300", "data.dev=d.jsonl"])
    assert out["data"]["train"] == {"path": "t.jsonl", "limit": 300}
    assert out["data"]["dev"] == "d.jsonl"
    assert data["data"]["train"] == "t.jsonl"  # the input is not changed


def test_subset_writes_the_rest_and_counts_one_type_of_like(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A seed set and its pool from one file; a random control as large as what a Z-Aug
    stage added (its ``generated`` rows), drawn from the pool."""
    monkeypatch.chdir(tmp_path)
    write_records(_records("eeeeeennnn"), tmp_path / "all.jsonl")
    added = [Record(f"g{i}", "neutral", "p", f"x{i}", meta={"type": "generated"}) for i in range(3)]
    write_records([*_records("ee"), *added], tmp_path / "aug.jsonl")
    stages = {
        "seed_set": {"stage": "subset", "input": "all", "n": 4},
        "control": {
            "stage": "subset",
            "input": "seed_set.rest",
            "like": "aug",
            "like_type": "generated",
        },
        "nothing": {"stage": "subset", "input": "all", "like": "aug", "like_type": "original"},
    }
    data = {"name": "s", "seed": 2, "data": {"all": "all.jsonl", "aug": "aug.jsonl"}}
    recipe = recipe_from_dict({**data, "stages": {k: stages[k] for k in ("seed_set", "control")}})
    manifest = {s["name"]: s for s in run_recipe(recipe, tmp_path / "run")["stages"]}
    seed_ids = [r.id for r in read_records(tmp_path / "run/seed_set/data.jsonl", task="nli")]
    rest_ids = [r.id for r in read_records(tmp_path / "run/seed_set/rest.jsonl", task="nli")]
    assert seed_ids == [f"r{i}" for i in draw_subset(_records("e" * 10), n=4, seed=2)]
    assert rest_ids == [f"r{i}" for i in range(10) if f"r{i}" not in seed_ids]  # file order
    assert manifest["seed_set"]["rows_out"] == {"total": 4, "left_out": 6}
    control = read_records(tmp_path / "run/control/data.jsonl", task="nli")
    assert len(control) == 3 and {r.id for r in control} <= set(rest_ids)
    assert manifest["control"]["rows_out"] == {"total": 3, "left_out": 3}
    with pytest.raises(ConfigError, match="has no records of meta type 'original'"):
        run_recipe(
            recipe_from_dict({**data, "stages": {"nothing": stages["nothing"]}}), tmp_path / "r2"
        )
    with pytest.raises(ConfigError, match="like_type counts records of like"):
        recipe_from_dict(
            {**data, "stages": {"x": {"stage": "subset", "input": "all", "n": 2, "like_type": "g"}}}
        )
