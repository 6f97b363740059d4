"""Confidence filter: exact mask, exact partition of a real (tiny) classifier's input."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from zdebias.classify.confidence import confidence_filter, confidence_mask, write_partition
from zdebias.classify.predict import load_classifier, predict_proba
from zdebias.data.readers import read_records
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError


def test_mask_is_strictly_greater_than_tau() -> None:
    probs = np.array(
        [[0.96, 0.02, 0.02], [0.95, 0.04, 0.01], [0.01, 0.98, 0.01], [0.30, 0.30, 0.40]]
    )
    gold = np.array([0, 0, 2, 2])
    assert confidence_mask(probs, gold, 0.95).tolist() == [True, False, False, False]
    assert confidence_mask(probs, gold, 0.0).tolist() == [True, True, True, True]
    with pytest.raises(ConfigError, match=r"tau must lie in \[0, 1\]"):
        confidence_mask(probs, gold, 1.5)


def _records(data_dir: Path, n: int) -> list[Record]:
    rows = read_records(data_dir / "snli_20k" / "dev.jsonl")
    return rows[:: len(rows) // n][:n]


def test_partition_is_exact(tiny_model, tmp_path: Path, data_dir: Path) -> None:
    model = tiny_model("bert")  # random 3-way head: probabilities near 1/3, spread by input
    records = _records(data_dir, 60)
    clf = load_classifier(model)
    probs = predict_proba(clf, records)
    p_gold = np.array([probs[i, clf.labels.index(r.label)] for i, r in enumerate(records)])
    tau = float(np.median(p_gold))
    expected_kept = [r.id for r, p in zip(records, p_gold, strict=True) if p > tau]

    kept, rejected, summary = confidence_filter(records, model, threshold=tau, progress=False)
    assert [r.id for r in kept] == expected_kept
    assert len(kept) + len(rejected) == len(records) == 60
    assert sorted(r.id for r in kept + rejected) == sorted(r.id for r in records)
    assert not {r.id for r in kept} & {r.id for r in rejected}
    by_id = {r.id: p for r, p in zip(records, p_gold, strict=True)}
    assert all(r.meta["confidence"] <= tau for r in rejected)
    assert all(r.meta["confidence"] == pytest.approx(by_id[r.id]) for r in kept + rejected)
    assert summary["n_input"] == 60 and summary["n_kept"] == len(expected_kept)
    assert summary["n_rejected"] == 60 - len(expected_kept)
    assert summary["kept_at_tau"]["0.5"] == int((p_gold > 0.5).sum())
    assert summary["p_label_quartiles"][1] == pytest.approx(tau, abs=1e-4)
    gold_counts = Counter(r.label for r in records)
    for label, cell in summary["per_label"].items():
        assert cell["n"] == gold_counts[label]
        assert cell["kept"] == sum(1 for r in kept if r.label == label)

    paths = write_partition(kept, rejected, summary, tmp_path / "cf")
    again_kept = read_records(paths["kept"])
    again_rej = read_records(paths["rejected"])
    assert [r.id for r in again_kept] == expected_kept
    assert len(again_kept) + len(again_rej) == 60
    assert again_rej[0].meta["confidence"] == pytest.approx(rejected[0].meta["confidence"])
    assert json.loads(paths["summary"].read_text())["n_kept"] == len(expected_kept)


def test_unknown_label_fails_with_the_record(tiny_model) -> None:
    model = tiny_model("bert")
    bad = [Record("x:1", "non-entailment", "p", "h")]
    with pytest.raises(DataError, match="record 'x:1' has label 'non-entailment'"):
        confidence_filter(bad, model, progress=False)


def test_cli_partition_and_old_spellings(tiny_model, tmp_path: Path, data_dir: Path) -> None:
    """`confidence-filter INPUT --classifier DIR`; 0.1's `--data`, `--model`, `--tau` still work."""
    import json

    from typer.testing import CliRunner

    from zdebias.cli import app
    from zdebias.data.writers import write_jsonl

    model = tiny_model("bert")
    src = tmp_path / "in.jsonl"
    write_jsonl(_records(data_dir, 30), src)
    runner = CliRunner()
    new = ["confidence-filter", str(src), "--classifier", str(model), "--threshold", "0.34"]
    a = runner.invoke(app, [*new, "--out", str(tmp_path / "a"), "--json", "-q"])
    assert a.exit_code == 0, a.output
    summary = json.loads(a.stdout)
    assert summary["n_kept"] + summary["n_rejected"] == 30 and summary["tau"] == 0.34
    old = ["confidence-filter", "--data", str(src), "--model", str(model), "--tau", "0.34"]
    b = runner.invoke(app, [*old, "--out", str(tmp_path / "b")])
    assert b.exit_code == 0, b.output
    for flag in ("--data", "--model", "--tau"):
        assert f"{flag} is deprecated" in b.output
    for name in ("kept.jsonl", "rejected.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    again = runner.invoke(app, [*new, "--out", str(tmp_path / "a")])
    assert again.exit_code != 0 and "--overwrite" in str(again.exception)
