"""A classifier trained on a z-filter's kept rows, graded on a shortcut split made with the
model behind the filter's ``hypo-only-pred`` feature, is warned about (issue 55.3): the filter
records its hypo-only model, training records the filter, evaluate compares them."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from test_eval_groups import RIGHT, _doc, _split

from zdebias.data.options import ReadOptions
from zdebias.data.recorded import filter_provenance
from zdebias.data.schema import Record
from zdebias.data.writers import write_records
from zdebias.evaluation import reliance
from zdebias.evaluation.reliance import add_reliance, filter_model_overlap
from zdebias.stats.execution.operations import filter_file, shortcut_split_file
from zdebias.stats.execution.source import FileInput
from zdebias.stats.settings import ShortcutSplitSettings, ZFilterSettings
from zdebias.stats.shortcut_split import rows_digest

#: the key words of the filter case's warning
FILTERED = "the model that chose its training rows"
HYPOTHESES = {
    "entailment": ["A person is outside.", "Someone is out.", "A person is near."],
    "neutral": ["The team wins a cup.", "A man is tall.", "The dog is happy."],
    "contradiction": ["Nobody is sleeping.", "No one is out.", "The cat is not here."],
}


def _nli(n: int, seed: int) -> list[Record]:
    """Pairs whose hypothesis words hint at the label, with some noise."""
    rng = random.Random(seed)
    labels = list(HYPOTHESES)
    out = []
    for i in range(n):
        label = labels[i % 3]
        hint = label if rng.random() < 0.8 else rng.choice(labels)
        hyp = rng.choice(HYPOTHESES[hint])
        out.append(Record(f"s{seed}:{i}", label, f"A scene number {i % 7}.", hyp))
    return out


def _filtered(tmp_path: Path, features: list[str] | None = None) -> tuple[Path, list[Record]]:
    rows = _nli(120, seed=1)
    data = tmp_path / "train.jsonl"
    write_records(rows, data)
    cfg = ZFilterSettings(features=features) if features else ZFilterSettings()
    filter_file(FileInput(str(data)), tmp_path / "filtered", cfg)
    return data, rows


def test_the_filter_records_its_hypo_only_model_and_training_finds_it(tmp_path: Path) -> None:
    data, rows = _filtered(tmp_path)
    summary = json.loads((tmp_path / "filtered" / "summary.json").read_text())
    assert summary["hypo_only_model"] == {
        "family": "hypo-only-nb",
        "folds": 5,
        "seed": 0,
        "train_digest": rows_digest(rows),
    }
    found = filter_provenance(tmp_path / "filtered" / "kept.jsonl")
    assert found == {
        "summary": str(tmp_path / "filtered" / "summary.json"),
        "hypo_only_model": summary["hypo_only_model"],
    }
    assert filter_provenance(tmp_path / "filtered" / "rejected.jsonl") is not None  # listed
    assert filter_provenance(data) is None  # not a filter's output


def test_a_filter_without_the_hypo_only_feature_records_no_model(tmp_path: Path) -> None:
    _filtered(tmp_path, features=["ngrams", "hypo-len"])
    summary = json.loads((tmp_path / "filtered" / "summary.json").read_text())
    assert "hypo_only_model" not in summary
    assert filter_provenance(tmp_path / "filtered" / "kept.jsonl") is None


def _split_bias(tmp_path: Path, data: Path, bias_model: str) -> dict:
    test = tmp_path / "test.jsonl"
    write_records(_nli(60, seed=2), test)
    out = tmp_path / f"split-{bias_model}"
    cfg = ShortcutSplitSettings(bias_model=bias_model)
    shortcut_split_file(FileInput(str(data)), FileInput(str(test)), out, cfg)
    return json.loads((out / "summary.json").read_text())["used"]["bias_model"]


def test_overlap_of_a_filtered_run_with_the_splits_bias_model(tmp_path: Path) -> None:
    data, _ = _filtered(tmp_path)
    record = filter_provenance(tmp_path / "filtered" / "kept.jsonl")
    run = {"train_filter": record}
    same = _split_bias(tmp_path, data, "hypo-only")
    assert same["family"] == "hypo-only-nb"
    why = filter_model_overlap(same, run)
    assert why is not None and "learnt from the rows the split's bias model was" in why
    # another family on the same rows is another model
    assert filter_model_overlap(_split_bias(tmp_path, data, "ngram-lr"), run) is None
    # a split trained on other rows, and a run with no filter record: no overlap
    assert filter_model_overlap({**same, "train_digest": "e" * 64}, run) is None
    assert filter_model_overlap(same, {}) is None
    # a trained hypo-only folder: the same folder is the same model
    trained = {"summary": "s", "hypo_only_model": {"family": "trained:/m/h", "seed": 0}}
    why = filter_model_overlap({"family": "trained:/m/h"}, {"train_filter": trained})
    assert why is not None and "the split's bias model (/m/h)" in why


@pytest.mark.slow
def test_a_classifier_trained_on_filtered_rows_is_warned_about(
    tiny_model, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from zdebias.classify.files import Files
    from zdebias.classify.settings import ClassifierSettings
    from zdebias.evaluation.suites import _run_info

    data, _ = _filtered(tmp_path)
    kept = tmp_path / "filtered" / "kept.jsonl"
    clf = tmp_path / "clf"
    settings = ClassifierSettings.of(
        None, model=tiny_model("bert", head="encoder"), epochs=1, batch_size=16, seed=3
    )
    Files(ReadOptions(), progress=False).train_classifier(str(kept), None, clf, settings)
    metrics = json.loads((clf / "metrics.json").read_text())
    assert metrics["train_filter"]["summary"] == str(tmp_path / "filtered" / "summary.json")

    split = _split(tmp_path)  # the hand-made confusion, graded under each split's bias model
    summary = json.loads((split / "summary.json").read_text())

    def graded(bias: dict) -> list[str]:
        (split / "summary.json").write_text(json.dumps({**summary, "used": {"bias_model": bias}}))
        doc = _doc("Z", split, RIGHT)
        doc["runs"][0].update(_run_info(str(clf)))
        caplog.clear()
        rows = reliance.split_rows(reliance.read_split(split), task="labels:a,b")
        doc = add_reliance(doc, reliance.read_split(split), rows=rows)
        lines = [x for x in doc["shortcut_split"]["warnings"] if FILTERED in x]
        assert [r.message for r in caplog.records if FILTERED in r.message] == [
            f"shortcut split {split}: {line}" for line in lines
        ]
        return lines

    (line,) = graded(_split_bias(tmp_path, data, "hypo-only"))
    assert line.startswith("method 'Z' (1 of 1 run): its training rows were z-filtered (")
    assert "hypo-only feature of the split's bias model's family (hypo-only-nb), learnt" in line
    assert "shortcut-split --bias-model ngram-lr" in line
    assert graded(_split_bias(tmp_path, data, "ngram-lr")) == []
