"""Recipe validation: shipped configs, unknown keys, references, overrides, --dry-run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from zdebias.errors import ConfigError
from zdebias.pipeline.config import expand_env
from zdebias.pipeline.loader import (
    apply_overrides,
    load_recipe,
    parse_override,
    recipe_from_dict,
)

CONFIGS = sorted((Path(__file__).resolve().parents[3] / "configs").glob("*.yaml"))


def _base() -> dict:
    return {
        "name": "t",
        "task": "nli",
        "data": {"train": "train.jsonl", "test": {"path": "test.jsonl", "format": "jsonl"}},
        "stages": {
            "zf": {"stage": "filter", "input": "train", "zfilter_batch_size": 100},
            "st": {"stage": "stats", "input": "zf"},
            "clf": {"stage": "train-classifier", "model": "minilm", "train": "zf.data"},
            "ev": {"stage": "evaluate", "classifiers": {"a": "clf"}, "suites": {"t": "test"}},
        },
    }


def test_there_are_shipped_configs() -> None:
    names = {p.stem for p in CONFIGS}
    assert {
        "demo",
        "snli-z-aug",
        "snli-par-z",
        "snli-seq-z",
        "snli-poe-seq-z",
        "mnli-z-aug",
        "mnli-par-z",
        "mnli-seq-z",
        "mnli-poe-z-aug",
        "autocad-snli",
        "autocad-sst2",
    } <= names


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_shipped_config_validates(path: Path) -> None:
    recipe = load_recipe(path)
    assert recipe.name == path.stem
    assert recipe.stages
    # every stage kind and setting survives a round trip through the resolved form
    again = recipe_from_dict(recipe.to_dict())
    assert again.to_dict() == recipe.to_dict()


def test_paper_configs_use_the_paper_models_and_settings() -> None:
    by_name = {p.stem: load_recipe(p) for p in CONFIGS}
    seq = by_name["snli-seq-z"]
    gen = seq.stages["generator"]
    assert gen.model == "gpt2-large" and gen.learning_rate == 1e-5 and gen.batch_size == 24
    assert gen.epochs == 5 and gen.consistency_weight == 0.5 and gen.max_length == 128
    assert seq.stages["debiased_generator"].alpha == 1.0
    assert seq.stages["samples"].n == 5_000_000
    assert seq.stages["confident"].threshold == 0.95
    assert seq.stages["clf_nli"].model == "roberta-large"
    assert seq.stages["seq_z"].biased_k == 20 and seq.stages["seq_z"].recipe == "seq-z"
    clf = seq.stages["clf_debiased"]
    assert (clf.model, clf.learning_rate, clf.batch_size, clf.warmup_steps, clf.patience) == (
        "bert-base-uncased",
        1e-5,
        32,
        2000,
        3,
    )
    assert clf.seeds == [1, 2, 3, 4, 5]
    assert by_name["mnli-seq-z"].stages["samples"].n == 4_000_000
    poe = by_name["snli-poe-seq-z"].stages["clf_poe"]
    assert (poe.loss, poe.beta, poe.gamma) == ("poe", 2.0, 0.4)
    # GD-NLI Table 10, MNLI rows: (β, γ) tuned per evaluation set, for MNLI and for Z-Aug MNLI
    mnli = by_name["mnli-poe-z-aug"].stages
    table_10 = {  # the bias expert is a jointly trained hypothesis-only head (robust-nli)
        "clf_poe_original_m_hard": ("train", "joint", 0.8, 1.0),
        "clf_poe_original_mm_hard": ("train", "joint", 2.0, 0.4),
        "clf_poe_original_hans": ("train", "joint", 2.0, 0.8),
        "clf_poe_m_hard": ("z_aug", "joint", 2.0, 0.4),
        "clf_poe_mm_hard": ("z_aug", "joint", 2.0, 0.8),
        "clf_poe_hans": ("z_aug", "joint", 2.0, 1.0),
    }
    for name, (train, bias, beta, gamma) in table_10.items():
        stage = mnli[name]
        assert (stage.loss, stage.train, stage.bias_mode, stage.beta, stage.gamma) == (
            "poe",
            train,
            bias,
            beta,
            gamma,
        ), name
    cad = by_name["autocad-snli"].stages["infiller"]
    assert (cad.model, cad.alpha, cad.batch_size) == ("t5-large", 1.0, 8)
    assert by_name["autocad-sst2"].stages["infiller"].alpha == 0.3
    assert by_name["autocad-sst2"].task == "sentiment"


def test_unknown_keys_fail_with_the_valid_keys() -> None:
    data = _base()
    data["stages"]["zf"]["topk"] = 5
    with pytest.raises(ConfigError) as err:
        recipe_from_dict(data)
    assert str(err.value) == (
        "stages.zf: unknown key 'topk'; valid keys: aflite_k, aflite_l2, aflite_m, "
        "aflite_n, aflite_steps, aflite_target, aflite_tau, biased_k, dynamics, encoder, "
        "feature_options, features, fraction, hypo_len_bins, hypo_only_classifier, "
        "hypo_only_folds, hypo_only_model, input, keep_features, label_prior, len_ratio_bins, "
        "lex_overlap_thresholds, like, lowercase, max_length, method, min_label_share, min_z, "
        "ngram_fields, ngram_range, num_proc, "
        "region, seed, seed_data, segmenter, shuffle, stage, text_len_bins, token_pattern, "
        "warn_label_share, zfilter_batch_size"
    )
    data = _base()
    data["sed"] = 3
    with pytest.raises(
        ConfigError,
        match=r"the recipe: unknown key 'sed'; valid keys: data, "
        r"description, extends, name, out, plugins, report, seed, stages, task",
    ):
        recipe_from_dict(data)
    data = _base()
    data["data"]["test"]["colums"] = {}
    with pytest.raises(
        ConfigError,
        match=r"data\.test: unknown key 'colums'; valid keys: "
        r"columns, format, label_map, limit, on_error, path, split, task",
    ):
        recipe_from_dict(data)


def test_bad_values_and_kinds() -> None:
    data = _base()
    data["stages"]["zf"]["zfilter_batch_size"] = 0
    with pytest.raises(
        ConfigError,
        match=r"stages\.zf\.zfilter_batch_size: Input should be greater "
        r"than or equal to 1 \(got 0\)",
    ):
        recipe_from_dict(data)
    data = _base()
    data["stages"]["zf"]["stage"] = "filtre"
    with pytest.raises(
        ConfigError,
        match=r"unknown stage kind 'filtre'; kinds are combine, "
        r"concat, confidence-filter",
    ):
        recipe_from_dict(data)
    data = _base()
    del data["stages"]["st"]["input"]
    with pytest.raises(ConfigError, match=r"stages\.st\.input: required setting is missing"):
        recipe_from_dict(data)


def test_references_are_checked_before_anything_runs() -> None:
    data = _base()
    data["stages"]["zf"]["input"] = "st"  # a later stage
    with pytest.raises(ConfigError, match="refers to stage 'st', which does not run before"):
        recipe_from_dict(data)
    data = _base()
    data["stages"]["st"]["input"] = "zf.kept"
    with pytest.raises(
        ConfigError,
        match=r"stage 'zf' \(filter\) has no output 'kept'; its "
        r"outputs are data, rejected, summary",
    ):
        recipe_from_dict(data)
    data = _base()
    data["stages"]["st"]["input"] = "zf.summary"
    with pytest.raises(ConfigError, match=r"'zf\.summary' is a json output but a records is"):
        recipe_from_dict(data)
    data = _base()
    data["stages"]["st"]["input"] = "nowhere"
    with pytest.raises(
        ConfigError,
        match=r"'nowhere' names no dataset or earlier stage; "
        r"valid names: train, test, zf",
    ):
        recipe_from_dict(data)
    data = _base()
    data["stages"]["ev"]["classifiers"] = {"a": "clf", "b": "roberta-large-mnli"}
    recipe = recipe_from_dict(data)  # an external model name is fine for a model setting
    assert recipe.stages["ev"].classifiers["b"] == "roberta-large-mnli"


def test_overrides_are_typed_and_dotted() -> None:
    assert parse_override("stages.zf.zfilter_batch_size=50") == (
        ["stages", "zf", "zfilter_batch_size"],
        50,
    )
    assert parse_override("a=1e-5") == (["a"], 1e-5)
    assert parse_override("a=[1, 2]") == (["a"], [1, 2])
    assert parse_override("a=true") == (["a"], True)
    assert parse_override("a=x.jsonl") == (["a"], "x.jsonl")
    data = apply_overrides(
        _base(),
        [
            "seed=7",
            "stages.zf.zfilter_batch_size=50",
            "data.test=t2.jsonl",
            "stages.zf.features=[ngrams]",
        ],
    )
    recipe = recipe_from_dict(data)
    assert recipe.seed == 7
    assert recipe.stages["zf"].zfilter_batch_size == 50 and recipe.stages["zf"].features == [
        "ngrams"
    ]
    assert recipe.data["test"].path == "t2.jsonl" and recipe.data["test"].format == "jsonl"
    assert recipe.stage_seed("zf") == 7
    with pytest.raises(ConfigError, match="no stage 'zz'; stages are zf, st, clf, ev"):
        apply_overrides(_base(), ["stages.zz.top_k=3"])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_override("seed")


def test_environment_expansion(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZD_TEST_DATA", "/data")
    monkeypatch.delenv("ZD_TEST_UNSET", raising=False)
    assert expand_env("${ZD_TEST_DATA}/snli") == "/data/snli"
    assert expand_env("${ZD_TEST_UNSET:-here}/x") == "here/x"
    with pytest.raises(ConfigError, match="needs the environment variable ZD_TEST_UNSET"):
        expand_env("${ZD_TEST_UNSET}/x")


def test_dry_run_prints_the_resolved_recipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from zdebias.cli import app

    monkeypatch.chdir(tmp_path)  # data paths are relative to the working folder
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(_base(), sort_keys=False))
    (tmp_path / "train.jsonl").write_text("")
    result = CliRunner().invoke(
        app, ["run", str(path), "stages.zf.biased_k=7", "--dry-run", "--out", str(tmp_path / "run")]
    )
    assert result.exit_code == 0, result.output
    resolved = yaml.safe_load(result.output)
    assert resolved["stages"]["zf"]["biased_k"] == 7
    assert resolved["stages"]["zf"]["zfilter_batch_size"] == 100
    # defaults are filled in: the packaged MiniLM's schedule (Table 9 is for other models)
    assert resolved["stages"]["clf"]["learning_rate"] == 5e-5
    assert resolved["stages"]["clf"]["min_steps"] == 300
    plan = [line.split() for line in result.output.splitlines() if line.startswith("#   ")]
    assert plan == [
        ["#", "zf", "filter", "run", "(never", "run)"],
        ["#", "st", "stats", "run", "(after", "zf)"],
        ["#", "clf", "train-classifier", "run", "(after", "zf)"],
        ["#", "ev", "evaluate", "run", "(after", "clf)"],
    ]
    assert not (tmp_path / "run").exists()


def test_resolved_recipe_keeps_every_stage_seed() -> None:
    """A dumped recipe (--dry-run, RUN/config.yaml) reloads to the same seeds: operation
    settings default their seed to 0, so the dump must carry the effective one."""
    demo = next(p for p in CONFIGS if p.stem == "demo")
    recipe = load_recipe(demo, ["seed=13", "stages.zfilter.seed=5"])
    again = recipe_from_dict(recipe.to_dict())
    seeds = {name: again.stage_seed(name) for name in again.stages}
    assert seeds == {name: (5 if name == "zfilter" else 13) for name in recipe.stages}
    assert recipe.to_dict()["stages"]["zfilter"]["seed"] == 5
