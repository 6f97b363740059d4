"""The artifact measure the z-filter did not use (issue 55 item 5): a hypothesis-only (single
text: text) logistic regression, cross-validated, against the majority share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zdebias.data.schema import Record
from zdebias.errors import DataError
from zdebias.stats.artifacts import PAIR_NOTE, SINGLE_NOTE, artifact_accuracy

NLI = ("entailment", "neutral", "contradiction")
FILLER = ["a man", "the dog", "two women", "a child", "some people", "an old cat"]


def _giveaway(n: int = 30) -> list[Record]:
    """``n`` rows per label; one word of the hypothesis names the label, the rest is filler."""
    words = {"entailment": "outdoors", "neutral": "tall", "contradiction": "nobody"}
    return [
        Record(f"{lab}-{i}", lab, "A premise.", f"{FILLER[i % 6]} {words[lab]} here")
        for lab in NLI
        for i in range(n)
    ]


def _blind() -> list[Record]:
    """40 / 30 / 30 rows with the same hypothesis: nothing to learn but the label shares."""
    labels = ["entailment"] * 40 + ["neutral"] * 30 + ["contradiction"] * 30
    return [Record(str(i), lab, f"premise {i}", "a man sleeps") for i, lab in enumerate(labels)]


def _noisy(seed: int = 0) -> list[Record]:
    """Hypotheses that tell the label only sometimes: fold accuracies vary with the split."""
    import random

    rng = random.Random(seed)
    rows = []
    for i in range(150):
        lab = NLI[i % 3]
        word = lab if rng.random() < 0.5 else rng.choice(NLI)
        rows.append(Record(str(i), lab, "p", f"{rng.choice(FILLER)} {word}"))
    return rows


def test_a_hypothesis_that_gives_the_label_away_is_read_perfectly() -> None:
    result = artifact_accuracy(_giveaway())
    assert result.fold_accuracies == (1.0,) * 5
    assert (result.accuracy, result.accuracy_std, result.macro_f1) == (1.0, 0.0, 1.0)
    assert result.majority_share == pytest.approx(1 / 3)
    assert result.above_majority == pytest.approx(200 / 3)  # 100 % - 33.3 %
    assert (result.n_rows, result.n_skipped, result.folds, result.input) == (90, 0, 5, "hypothesis")
    block = result.report()
    assert block["above_majority_points"] == 66.67 and block["note"] == PAIR_NOTE


def test_a_hypothesis_that_says_nothing_scores_the_majority_share() -> None:
    # every stratified fold holds 8 / 6 / 6 rows: predicting the majority gives 8/20 in each
    result = artifact_accuracy(_blind())
    assert result.fold_accuracies == (0.4,) * 5
    assert (result.accuracy, result.majority_share, result.majority_label) == (
        0.4,
        0.4,
        "entailment",
    )
    assert result.above_majority == pytest.approx(0.0)


def test_the_same_seed_gives_the_same_folds_and_another_seed_other_ones() -> None:
    rows = _noisy()
    first, again = artifact_accuracy(rows, seed=7), artifact_accuracy(rows, seed=7)
    assert first == again
    other = artifact_accuracy(rows, seed=8)
    assert other.fold_accuracies != first.fold_accuracies
    assert (first.seed, other.seed) == (7, 8)


def test_the_given_tokeniser_is_the_one_used() -> None:
    # a tokeniser that sees no word leaves the model only the label shares
    result = artifact_accuracy(_giveaway(), tokenize=lambda text: [])
    assert result.accuracy == pytest.approx(1 / 3)


def test_single_text_reads_the_text_and_says_it_is_partly_the_task() -> None:
    rows = [
        Record(str(i), lab, text=f"{FILLER[i % 6]} was {word}")
        for i in range(40)
        for lab, word in (("positive", "great"), ("negative", "awful"))
    ]
    result = artifact_accuracy(rows)
    assert (result.input, result.accuracy, result.majority_share) == ("text", 1.0, 0.5)
    assert result.report()["note"] == SINGLE_NOTE and "the task itself" in SINGLE_NOTE


def test_rows_of_other_labels_are_skipped_and_counted() -> None:
    rows = [*_giveaway(), Record("x", "other", "p", "h")]
    result = artifact_accuracy(rows, labels=NLI)
    assert (result.n_rows, result.n_skipped) == (90, 1)


def test_too_few_rows_per_label_is_one_clear_error() -> None:
    rows = _giveaway(4)
    with pytest.raises(DataError, match="5-fold cross-validation needs at least 5 rows") as err:
        artifact_accuracy(rows)
    assert "entailment 4, neutral 4, contradiction 4" in str(err.value)


def _write(rows: list[Record], path: Path) -> Path:
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    return path


def test_the_stats_command_reports_it_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from helpers.cli_main import run_main

    data = _write(_giveaway(), tmp_path / "d.jsonl")
    args = ["stats", data, "--features", "unigrams", "--task", "nli"]
    assert run_main([*args, "--artifact-model", "--out", tmp_path / "s.json"]) == 0
    shown = capsys.readouterr().out
    assert "artifact model (hypothesis only;" in shown
    assert "100.0% ± 0.0 accuracy over 5 folds" in shown and "+66.7 points" in shown
    block = json.loads((tmp_path / "s.json").read_text())["artifact_model"]
    assert (block["accuracy"], block["majority_share"], block["n_rows"]) == (1.0, 0.3333, 90)
    assert run_main([*args, "--out", tmp_path / "plain.json"]) == 0
    assert "artifact model" not in capsys.readouterr().out
    assert "artifact_model" not in json.loads((tmp_path / "plain.json").read_text())
    few = _write(_giveaway(4), tmp_path / "few.jsonl")
    assert run_main(["stats", few, "--features", "unigrams", "--artifact-model"]) == 2
    assert "needs at least 5 rows of each" in capsys.readouterr().err


def test_the_result_report_of_a_stats_file_shows_it(tmp_path: Path) -> None:
    from helpers.cli_main import run_main
    from zdebias.report.results import build_result_report

    data = _write(_giveaway(), tmp_path / "d.jsonl")
    out = tmp_path / "s.json"
    args = ["stats", data, "--features", "unigrams", "--task", "nli", "--artifact-model"]
    assert run_main([*args, "--min-n", "0", "--json", "--out", out]) == 0
    assert "artifact model (hypothesis only;" in build_result_report(out)


def test_the_python_api_takes_dicts() -> None:
    import zdebias

    rows = [{"premise": r.premise, "hypothesis": r.hypothesis, "label": r.label} for r in _blind()]
    result = zdebias.artifact_accuracy(rows, task="nli", seed=3)
    assert (result.accuracy, result.majority_share, result.seed) == (0.4, 0.4, 3)
    found = zdebias.find_shortcuts(rows, task="nli", features=["unigrams"], artifact_model=True)
    assert found.summary["artifact_model"]["accuracy"] == 0.4


def test_unset_it_leaves_the_stats_stage_hash_and_a_recipe_takes_it() -> None:
    from zdebias.pipeline.digests import stage_hash
    from zdebias.pipeline.loader import recipe_from_dict

    def hashed(**settings: object) -> str:
        stage = {"stage": "stats", "input": "d", **settings}
        recipe = recipe_from_dict(
            {"name": "r", "task": "nli", "data": {"d": {"path": "x.jsonl"}}, "stages": {"s": stage}}
        )
        return stage_hash(recipe, "s", recipe.stages["s"], {})

    assert hashed() == hashed(artifact_model=False)
    assert hashed(artifact_model=True) != hashed()


def test_a_recipe_stats_stage_writes_the_block_its_metrics_and_the_report_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zdebias.pipeline.loader import recipe_from_dict
    from zdebias.pipeline.runner import run_recipe
    from zdebias.report.html import build_report

    monkeypatch.chdir(tmp_path)
    _write(_giveaway(), tmp_path / "d.jsonl")
    stage = {"stage": "stats", "input": "d", "features": ["unigrams"], "artifact_model": True}
    recipe = recipe_from_dict(
        {"name": "r", "task": "nli", "data": {"d": "d.jsonl"}, "stages": {"st": stage}}
    )
    manifest = run_recipe(recipe, tmp_path / "run", progress=False)
    block = json.loads((tmp_path / "run" / "st" / "stats.json").read_text())["artifact_model"]
    assert (block["accuracy"], block["folds"], block["input"]) == (1.0, 5, "hypothesis")
    [metrics] = [s["metrics"] for s in manifest["stages"] if s["name"] == "st"]
    assert (metrics["artifact_accuracy"], metrics["artifact_majority"]) == (1.0, 0.3333)
    assert "artifact model (hypothesis only;" in build_report(tmp_path / "run")


@pytest.fixture(scope="module")
def published(data_dir: Path) -> dict[str, list[Record]]:
    from helpers.script_module import load_script
    from zdebias.data.readers import read_records

    root = Path(__file__).resolve().parents[3]
    built = load_script("training_sets").rebuild(root / "docs" / "data" / "snli20k-cpu", data_dir)
    return {
        "d0": list(read_records(data_dir / "snli_20k" / "train.jsonl")),
        "random": built["random_subset"],
        "zfilter": built["zfilter"],
    }


@pytest.mark.parametrize(
    ("name", "accuracy", "majority"),
    [("d0", 58.2, 33.4), ("random", 54.8, 33.8), ("zfilter", 41.9, 35.2)],
)
def test_the_published_snli20k_sets(
    published: dict[str, list[Record]], name: str, accuracy: float, majority: float
) -> None:
    # docs/stats.md: the z-filter takes 58.2 % down to 41.9 %, a random third only to 54.8 %
    result = artifact_accuracy(published[name])
    assert round(100 * result.accuracy, 1) == accuracy
    assert round(100 * result.majority_share, 1) == majority
