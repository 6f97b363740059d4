"""The judge of the confidence filter (issue 26 item 3): the delta-p rule and its reference
pairs, DISCO's rejections, pass rates per label / cell / premise, label fidelity and
hypothesis-only accuracy; through the library, the CLI and the recipe stage."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from zdebias.classify import judge as rules
from zdebias.classify.confidence import confidence_filter
from zdebias.classify.predict import load_classifier, predict_proba
from zdebias.data.readers import read_records
from zdebias.data.schema import Record
from zdebias.data.writers import write_jsonl
from zdebias.errors import ConfigError, DataError

LABELS = ["entailment", "neutral", "contradiction"]


def test_delta_p_accepts_only_a_rise_above_delta() -> None:
    p = np.array([0.8125, 0.75, 0.3, 0.5])
    ref = np.array([0.5, 0.5, 0.5, 0.5])
    assert rules.delta_p_mask(p, ref, 0.25).tolist() == [True, False, False, False]  # 0.25: not >
    assert rules.delta_p_mask(p, ref, 0.0).tolist() == [True, True, False, False]
    assert rules.delta_p_mask(p, ref, 0.3125 - 2**-20).tolist() == [True, False, False, False]
    with pytest.raises(ConfigError, match=r"delta must lie in \[0, 1\]"):
        rules.delta_p_mask(p, ref, 1.5)
    with pytest.raises(ValueError, match="do not match"):
        rules.delta_p_mask(p, ref[:2], 0.25)


def _cf(source: Record, hypothesis: str, target: str) -> Record:
    meta = {"type": "counterfactual", "source_id": source.id, "original_label": source.label}
    return Record(f"{source.id}:cf:{target}:0", target, source.premise, hypothesis, meta=meta)


def test_reference_pairs() -> None:
    src = Record("d0:7", "entailment", "A man sleeps on a bench.", "A man rests.")
    edit = _cf(src, "A man runs.", "contradiction")
    ref, kind = rules.reference_record(edit, {src.id: src})
    assert (ref.premise, ref.hypothesis, ref.label, kind) == (
        src.premise,
        "A man rests.",
        "contradiction",  # p(the edit's label) is read on the original pair
        "original",
    )
    gen = Record("g:1", "neutral", "A dog barks.", "The dog is hungry.", meta={"premise_id": "p3"})
    ref, kind = rules.reference_record(gen, {})
    assert (ref.premise, ref.hypothesis, kind) == ("A dog barks.", "", "empty-hypothesis")
    with pytest.raises(DataError, match=r"'d0:7', no originals were given: .*--originals FILE"):
        rules.reference_record(edit, {})
    with pytest.raises(DataError, match=r"'d0:7', not among the originals"):
        rules.reference_record(edit, {"other": src})


def test_disco_rejections_are_off_by_default() -> None:
    neg = Record("a", "contradiction", "A man sleeps.", "A man is not sleeping.")
    isnt = Record("b", "contradiction", "A man sleeps.", "The man isn't awake.")
    kept_neg = Record("c", "contradiction", "Nobody is here.", "Nobody sleeps.")  # in premise
    neutral = Record("d", "neutral", "A man sleeps.", "A man is not sleeping.")
    copy = Record("e", "entailment", "A man sleeps on a bench.", "A man sleeps.")
    assert [rules.disco_rejection(r) for r in (neg, isnt, copy)] == [None, None, None]
    on = {"reject_added_negation": True}
    assert [rules.disco_rejection(r, **on) for r in (neg, isnt, kept_neg, neutral)] == [
        "added-negation",
        "added-negation",
        None,
        None,
    ]
    # {a, man, sleeps} / {a, man, sleeps, on, bench} = 0.6
    assert rules.disco_rejection(copy, max_overlap=0.6) is None
    assert rules.disco_rejection(copy, max_overlap=0.35) == "premise-overlap"


def test_pass_rates_per_label_cell_and_premise_equal_a_hand_count() -> None:
    keep = np.array([True, False, False, True, True, False])
    labels = ["neutral", "entailment", "neutral", "neutral", "contradiction", "entailment"]
    assert rules.pass_counts(labels, keep, order=LABELS) == {
        "entailment": {"n": 2, "kept": 0, "rejected": 2, "pass_rate": 0.0},
        "neutral": {"n": 3, "kept": 2, "rejected": 1, "pass_rate": 0.6667},
        "contradiction": {"n": 1, "kept": 1, "rejected": 0, "pass_rate": 1.0},
    }
    metas = [
        {"cell": "unigram=sleeping -> entailment", "premise_id": "p1"},
        {"cell": {"feature": "overlap=high", "label": "neutral"}, "premise_id": "p1"},
        {"feature": "overlap=high", "premise_id": "p2"},
        {"premise_id": "p2"},
        {},
        {"cell": "unigram=sleeping -> entailment", "premise_id": "p3"},
    ]
    records = [
        Record(f"r{i}", lab, "P", "H", meta=m)
        for i, (lab, m) in enumerate(zip(labels, metas, strict=True))
    ]
    cells = [rules.cell_of(r) for r in records]
    assert cells == [
        "unigram=sleeping -> entailment",
        "overlap=high -> neutral",
        "overlap=high -> neutral",
        None,
        None,
        "unigram=sleeping -> entailment",
    ]
    assert rules.pass_counts(cells, keep) == {
        "overlap=high -> neutral": {"n": 2, "kept": 0, "rejected": 2, "pass_rate": 0.0},
        "unigram=sleeping -> entailment": {"n": 2, "kept": 1, "rejected": 1, "pass_rate": 0.5},
    }
    assert rules.premise_counts(records, keep) == {"n": 3, "with_kept": 2, "all_rejected": 1}
    assert rules.premise_counts(records[4:5], keep[4:5]) is None


def test_agreement_equals_a_hand_count() -> None:
    gold = ["entailment", "neutral", "neutral", "contradiction", "entailment"]
    pred = ["entailment", "entailment", "neutral", "neutral", "entailment"]
    assert rules.agreement(pred, gold) == {
        "n": 5,
        "agree": 3,
        "share": 0.6,
        "per_label": {
            "contradiction": {"n": 1, "agree": 0, "share": 0.0},
            "entailment": {"n": 2, "agree": 2, "share": 1.0},
            "neutral": {"n": 2, "agree": 1, "share": 0.5},
        },
    }
    assert rules.agreement([], [])["share"] is None


def _samples(data_dir: Path, n: int) -> list[Record]:
    rows = read_records(data_dir / "snli_20k" / "dev.jsonl")[::97][:n]
    cells = ["lexical-overlap -> neutral", "negation -> entailment"]
    return [
        r.replace(meta={"premise_id": f"p{i // 3}", "cell": cells[i % 2]})
        for i, r in enumerate(rows)
    ]


def _p(clf_dir: Path, records: list[Record]) -> np.ndarray:
    clf = load_classifier(clf_dir)
    probs = predict_proba(clf, records)
    return np.array([probs[i, clf.labels.index(r.label)] for i, r in enumerate(records)])


def test_delta_p_filter_fidelity_and_hypothesis_only_by_hand(
    tiny_model: Callable[..., Path], data_dir: Path
) -> None:
    judge, held_out, hyp = tiny_model("bert"), tiny_model("bert"), tiny_model("bert")
    records = _samples(data_dir, 24)
    rise = _p(judge, records) - _p(judge, [r.replace(hypothesis="") for r in records])
    delta = float(np.median(rise))  # about half pass
    kept, rejected, summary = confidence_filter(
        records,
        judge,
        rule="delta-p",
        delta=max(delta, 0.0),
        fidelity_judge=held_out,
        hypothesis_only=hyp,
        progress=False,
    )
    want = [r.id for r, d in zip(records, rise, strict=True) if d > max(delta, 0.0)]
    assert [r.id for r in kept] == want and len(kept) + len(rejected) == 24
    assert summary["rule"] == "delta-p" and summary["tau"] is None
    assert summary["reference"] == {"empty-hypothesis": 24}
    by_id = dict(zip([r.id for r in records], rise.tolist(), strict=True))
    assert all(r.meta["delta_p"] == pytest.approx(by_id[r.id]) for r in kept + rejected)
    keep = np.array([r.id in set(want) for r in records])
    for label, c in summary["per_label"].items():
        n = sum(r.label == label for r in records)
        k = sum(r.label == label and ok for r, ok in zip(records, keep, strict=True))
        assert (c["n"], c["kept"], c["pass_rate"]) == (n, k, round(k / n, 4))
    for cell, c in summary["per_cell"].items():
        k = sum(r.meta["cell"] == cell and ok for r, ok in zip(records, keep, strict=True))
        assert (c["n"], c["kept"]) == (12, k)
    assert summary["premises"]["n"] == 8
    assert summary["premises"]["with_kept"] == len({r.meta["premise_id"] for r in kept})

    def hand(folder: Path, rows: list[Record], hypothesis_only: bool) -> int:
        clf = load_classifier(folder)
        if hypothesis_only:
            clf.input = "hypothesis-only"
        pred = predict_proba(clf, rows).argmax(axis=1)
        return sum(clf.labels[int(p)] == r.label for p, r in zip(pred, rows, strict=True))

    fid, hyp_acc = summary["label_fidelity"], summary["hypothesis_only_accuracy"]
    assert fid["input"]["agree"] == hand(held_out, records, False)
    assert fid["kept"]["n"] == len(kept) and fid["kept"]["agree"] == hand(held_out, kept, False)
    assert hyp_acc["input"]["agree"] == hand(hyp, records, True)
    assert hyp_acc["kept"]["agree"] == hand(hyp, kept, True)
    assert fid["model"] == str(held_out)


def test_counterfactual_reference_is_the_original(tiny_model: Callable[..., Path]) -> None:
    judge = tiny_model("bert")
    src = Record("d0:1", "entailment", "A man sleeps on a bench.", "A man rests outside.")
    edits = [_cf(src, "A man runs a race.", "contradiction"), _cf(src, "A man rests.", "neutral")]
    originals = [r.replace(label=e.label) for e, r in zip(edits, [src, src], strict=True)]
    rise = _p(judge, edits) - _p(judge, originals)
    kept, rejected, summary = confidence_filter(
        edits, judge, rule="delta-p", delta=0.0, originals=[src], progress=False
    )
    by_id = dict(zip([r.id for r in edits], rise.tolist(), strict=True))
    assert {r.id: r.meta["delta_p"] for r in kept + rejected} == pytest.approx(by_id)
    assert [r.id for r in kept] == [r.id for r in edits if by_id[r.id] > 0.0]
    assert summary["reference"] == {"original": 2}
    with pytest.raises(DataError, match="--originals FILE"):
        confidence_filter(edits, judge, rule="delta-p", progress=False)


def test_cli_judge_flags_end_to_end(
    tiny_model: Callable[..., Path], tmp_path: Path, data_dir: Path
) -> None:
    from typer.testing import CliRunner

    from zdebias.cli import app

    judge, hyp = tiny_model("bert"), tiny_model("bert")
    records = _samples(data_dir, 12)
    src = tmp_path / "gen.jsonl"
    write_jsonl(records, src)
    out = tmp_path / "cf"
    args = ["confidence-filter", str(src), "--classifier", str(judge), "--out", str(out)]
    flags = ["--rule", "delta-p", "--delta", "0", "--fidelity-judge", str(judge)]
    flags += ["--hypothesis-only", str(hyp), "--max-overlap", "0.35", "--reject-added-negation"]
    res = CliRunner().invoke(app, [*args, *flags])
    assert res.exit_code == 0, res.output
    assert "p(label) rises by more than 0.0" in res.stdout
    assert "judge: label entailment kept" in res.stderr
    assert "judge: cell lexical-overlap -> neutral kept" in res.stderr
    summary = json.loads((out / "summary.json").read_text())
    lib = confidence_filter(
        records,
        judge,
        rule="delta-p",
        delta=0.0,
        fidelity_judge=judge,
        hypothesis_only=hyp,
        max_overlap=0.35,
        reject_added_negation=True,
        progress=False,
    )
    assert [r.id for r in read_records(out / "kept.jsonl")] == [r.id for r in lib[0]]
    for key in ("per_label", "per_cell", "premises", "label_fidelity", "hypothesis_only_accuracy"):
        assert summary[key] == json.loads(json.dumps(lib[2][key])), key
    overlap = [
        r for r in records if rules.disco_rejection(r, max_overlap=0.35) == "premise-overlap"
    ]
    got = {r.id: r.meta.get("rejected_by") for r in read_records(out / "rejected.jsonl")}
    assert all(got[r.id] in ("premise-overlap", "added-negation") for r in overlap)
    assert summary["rejected_by"].get("premise-overlap", 0) == len(overlap)
    bad = CliRunner().invoke(app, [*args, "--overwrite", "--rule", "delta"])
    assert bad.exit_code == 2 and "--rule" in bad.output
    wrong = CliRunner().invoke(app, [*args, "--overwrite", "--hypothesis-only", str(tmp_path)])
    assert wrong.exit_code != 0


def test_recipe_stage_takes_the_judge_settings(
    tiny_model: Callable[..., Path], tmp_path: Path
) -> None:
    from zdebias.pipeline.loader import recipe_from_dict
    from zdebias.pipeline.runner import run_recipe

    judge = tiny_model("bert")
    stages = {
        "corpus": {"stage": "demo-data", "n_train": 30, "n_dev": 6, "n_test": 12},
        "judged": {
            "stage": "confidence-filter",
            "input": "corpus.test",
            "classifier": str(judge),
            "rule": "delta-p",
            "delta": 0.0,
            "originals": "corpus.train",
            "fidelity_judge": str(judge),
            "hypothesis_only": str(judge),
            "max_overlap": 0.35,
        },
    }
    recipe = recipe_from_dict({"name": "judge", "seed": 1, "stages": stages})
    run_recipe(recipe, tmp_path / "run", progress=False)
    summary = json.loads((tmp_path / "run" / "judged" / "summary.json").read_text())
    records = read_records(tmp_path / "run" / "corpus" / "test.jsonl")
    kept = confidence_filter(
        records, judge, rule="delta-p", delta=0.0, max_overlap=0.35, progress=False
    )[0]
    assert summary["rule"] == "delta-p" and summary["delta"] == 0.0
    assert summary["n_kept"] == len(kept)
    assert summary["label_fidelity"]["model"] == str(judge)
    assert summary["hypothesis_only_accuracy"]["input"]["n"] == 12
