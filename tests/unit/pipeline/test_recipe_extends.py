"""A recipe that ``extends`` another repeats the stages it shares with it exactly (same kind,
settings, seed, datasets and inputs), so it runs in that recipe's run folder and skips what is
done there: the stages' hashes are equal, and the run folder of the extended recipe is
accepted (another recipe's is still refused)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zdebias.data.ownership import MARKER
from zdebias.errors import ConfigError
from zdebias.pipeline.config import Recipe
from zdebias.pipeline.digests import stage_hash
from zdebias.pipeline.loader import load_recipe
from zdebias.pipeline.registry import DataInput, ExternalInput, OutputInput
from zdebias.pipeline.run_folder import check_run_dir
from zdebias.pipeline.runner import Runner

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
TARGETED = CONFIGS / "snli20k-targeted-cpu.yaml"


def chained_hashes(recipe: Recipe, tmp_path: Path) -> dict[str, str]:
    """Each stage's hash as the runner computes it (:func:`stage_hash`), an earlier stage's
    output standing for itself by that stage's hash (its output digest is unknown before a
    run) and a dataset by its resolved reader spec: equal hashes, equal runs."""
    runner = Runner(recipe, tmp_path / "never-written")
    hashes: dict[str, str] = {}

    def digest(value: Any) -> Any:
        if isinstance(value, DataInput):
            return {"data": value.spec.model_dump(mode="json")}
        if isinstance(value, ExternalInput):
            return {"external": value.value}
        if isinstance(value, OutputInput):
            return {"stage": hashes[value.stage], "output": value.output}
        if isinstance(value, dict):
            return {k: digest(v) for k, v in value.items()}
        if isinstance(value, list):
            return [digest(v) for v in value]
        return None

    for name, cfg in recipe.stages.items():
        hashes[name] = stage_hash(recipe, name, cfg, digest(runner._resolve(name, cfg)))
    return hashes


EXTENDING = [p for p in sorted(CONFIGS.glob("*.yaml")) if load_recipe(p).extends]


def test_the_recipes_that_extend_others() -> None:
    assert {p.stem: load_recipe(p).extends for p in EXTENDING} == {
        "mnli-poe-z-aug": ["mnli-z-aug"],
        "snli-poe-seq-z": ["snli-seq-z"],
        "snli20k-core-cpu": ["snli20k-cpu"],
        "snli20k-filters-cpu": ["snli20k-cpu"],
        "snli20k-targeted-cpu": ["snli20k-cpu"],
    }


@pytest.mark.parametrize("path", EXTENDING, ids=lambda p: p.stem)
def test_shared_stages_hash_as_in_the_extended_recipe(path: Path, tmp_path: Path) -> None:
    recipe = load_recipe(path)
    for base in recipe.extends:
        other = load_recipe(CONFIGS / f"{base}.yaml")
        assert other.name == base
        mine, theirs = chained_hashes(recipe, tmp_path), chained_hashes(other, tmp_path)
        shared = [n for n in theirs if n in mine]
        assert shared, f"{path.name} shares no stage with {base}"
        assert {n: mine[n] for n in shared} == {n: theirs[n] for n in shared}
        # in the same order (a shared stage reads only shared stages before it)
        assert [n for n in recipe.stages if n in theirs] == shared


def test_the_targeted_recipe_repeats_the_snli20k_cpu_stages_it_reads() -> None:
    recipe, base = load_recipe(TARGETED), load_recipe(CONFIGS / "snli20k-cpu.yaml")
    repeated = [n for n in base.stages if n in recipe.stages]
    assert list(recipe.stages)[: len(repeated)] == repeated  # first, in snli20k-cpu's order
    # left out: what no targeted stage reads (the GD-NLI rows that only snli20k-cpu reports)
    assert set(base.stages) - set(recipe.stages) == {
        "par_z", "seq_z", "stats_par_z", "stats_seq_z", "clf_par_z", "clf_seq_z",
        "clf_poe_z_aug", "split_hypothesis_only", "evaluate", "evaluate_hypothesis_only",
        "split_independent",  # issue 55.3: the split by an independent bias model
        "evaluate_independent",  # and the classifiers graded on it
    }  # fmt: skip


def test_a_changed_setting_changes_the_hash(tmp_path: Path) -> None:
    # the comparison above can fail: a shared stage's setting, and what reads it downstream
    plain = chained_hashes(load_recipe(TARGETED), tmp_path)
    changed = chained_hashes(load_recipe(TARGETED, ["stages.generator.epochs=2"]), tmp_path)
    differ = {n for n in plain if plain[n] != changed[n]}
    assert {"generator", "debiased_generator", "samples", "samples_targeted"} <= differ
    assert "clf_d0" not in differ
    filters = CONFIGS / "snli20k-filters-cpu.yaml"
    plain = chained_hashes(load_recipe(filters), tmp_path)
    changed = chained_hashes(load_recipe(filters, ["stages.zfilter.biased_k=10"]), tmp_path)
    differ = {n for n in plain if plain[n] != changed[n]}
    assert {"zfilter", "clf_zfilter", "random_subset", "evaluate_filters"} <= differ
    assert {"aflite", "carto_ambiguous", "carto_hard"} <= differ  # like: zfilter, its size
    assert "clf_carto" not in differ and "clf_hypo" not in differ


def _run_folder(tmp_path: Path, recipe: str) -> Path:
    folder = tmp_path / recipe
    folder.mkdir()
    (folder / MARKER).write_text(f'{{"kind": "run", "recipe": "{recipe}"}}')
    return folder


def test_a_run_folder_of_an_extended_recipe_is_accepted(tmp_path: Path) -> None:
    folder = _run_folder(tmp_path, "snli20k-cpu")
    check_run_dir(folder, "snli20k-targeted-cpu", ["snli20k-cpu"])
    with pytest.raises(ConfigError, match="holds a run of recipe 'snli20k-cpu', not 'other'"):
        check_run_dir(folder, "other", ["demo"])
    recipe = load_recipe(TARGETED)
    runner = Runner(recipe, folder)
    assert runner.problems([]) == []
    refused = Runner(recipe, _run_folder(tmp_path, "demo"))
    assert refused.problems([]) == [
        f"{tmp_path / 'demo'} holds a run of recipe 'demo', not 'snli20k-targeted-cpu' (nor of "
        "'snli20k-cpu', which it extends); choose a new --out, or list that recipe under the "
        "recipe's `extends`"
    ]


#: every stage hash of the shipped recipes as the code of 7300a0b computed them (data under
#: /data): a stage whose settings, inputs and kind did not change must keep its hash, or every
#: user's finished run folders would redo it
BEFORE = Path(__file__).parent / "data" / "stage_hashes_7300a0b.json"


def test_shipped_recipes_keep_their_stage_hashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = json.loads(BEFORE.read_text(encoding="utf-8"))
    monkeypatch.setenv("ZDEBIAS_DATA", before["ZDEBIAS_DATA"])
    monkeypatch.setenv("ZDEBIAS_LIU", before["ZDEBIAS_LIU"])
    compared = 0
    for name, old in before["hashes"].items():
        now = chained_hashes(load_recipe(CONFIGS / f"{name}.yaml"), tmp_path)
        shared = [s for s in old if s in now and s not in RESCHEDULED.get(name, ())]
        assert {s: now[s] for s in shared} == {s: old[s] for s in shared}, name
        assert all(now[s] != old[s] for s in RESCHEDULED.get(name, ())), name
        compared += len(shared)
    assert compared == 155  # all but the PoE recipes' `evaluate` (now `evaluate_poe`) and
    # the rescheduled stages of snli20k-cpu and autocad-sst2-cpu


#: stages whose recipe settings changed on purpose since 7300a0b, with all that reads them:
#: issue 38 moved snli20k-cpu's MiniLM trainings (the hypothesis-only feature included) to the
#: schedule that learns and 5 seeds, so everything downstream of clf_hypo or of a classifier
#: hashes anew; only the generator and the evaluation subsets read none of them; in
#: autocad-sst2-cpu everything but the 2,000-sentence subset reads the classifier
RESCHEDULED = {
    "snli20k-cpu": {
        "clf_hypo", "stats_original", "zfilter", "stats_zfilter", "random_subset",
        "stats_random", "clf_d0", "clf_zfilter", "clf_random", "debiased_generator", "samples",
        "confident", "stats_confident", "z_aug", "par_z", "seq_z", "stats_z_aug", "stats_par_z",
        "stats_seq_z", "clf_z_aug", "clf_par_z", "clf_seq_z", "evaluate",
    },
    "autocad-sst2-cpu": {
        "clf_original", "rationales", "rationales_dev", "infiller", "counterfactuals",
        "all_outputs", "cf_metrics", "augmented", "clf_augmented", "evaluate",
    },
}  # fmt: skip


def test_the_filters_compared_keep_z_filtering_s_size() -> None:
    stages = load_recipe(CONFIGS / "snli20k-filters-cpu.yaml").stages
    for name in ("aflite", "carto_ambiguous", "carto_hard"):
        assert stages[name].like == "zfilter", name
    assert stages["random_subset"].like == "zfilter"
