"""End to end on tiny models: rationales → train → generate → metrics, NLI and sentiment."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from zdebias.classify.predict import load_classifier, predict_proba
from zdebias.cli import app
from zdebias.data import read_records, write_records
from zdebias.errors import DataError

NLI_ROWS = [
    ("A man is sleeping on a bench in the park.", "The man is sleeping outside."),
    ("Two dogs are running through the snow.", "Nobody is running."),
    ("A woman is playing a guitar outside.", "The woman is a musician."),
    ("The child is eating an apple.", "A kid eats fruit."),
    ("A group of people are standing near the water.", "People are swimming."),
    ("A boy jumps into a swimming pool.", "The boy is wet."),
]
SA_ROWS = [
    "This movie was wonderful and moving.",
    "The film is boring, long and badly acted.",
    "Terrible acting, awful plot, never again.",
    "A charming and often affecting journey.",
    "I loved it.",
    "The old man reads a newspaper in a dull film.",
]

runner = CliRunner()


def _run(*args: str) -> dict:
    result = runner.invoke(app, [str(a) for a in args] + ["--json"])
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return json.loads(result.stdout)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _labelled(clf_dir: Path, rows: list, make) -> tuple[list, int]:
    """Half the rows get the classifier's own prediction as gold, half another label."""
    clf = load_classifier(clf_dir)
    probs = predict_proba(clf, [make(r, clf.labels[0]) for r in rows])
    labels, n_correct = [], 0
    for i, p in enumerate(probs):
        pred = clf.labels[int(np.argmax(p))]
        if i % 2 == 0:
            labels.append(pred)
            n_correct += 1
        else:
            labels.append(next(lab for lab in clf.labels if lab != pred))
    return labels, n_correct


def test_nli_end_to_end(tiny_model, tmp_path: Path) -> None:
    from zdebias.data.schema import Record

    clf_dir = tiny_model("bert")
    labels, n_correct = _labelled(
        clf_dir, NLI_ROWS, lambda r, lab: Record("x", lab, premise=r[0], hypothesis=r[1])
    )
    data = tmp_path / "train.tsv"  # CAD layout: sentence1 sentence2 gold_label
    data.write_text(
        "sentence1\tsentence2\tgold_label\n"
        + "".join(f"{p}\t{h}\t{lab}\n" for (p, h), lab in zip(NLI_ROWS, labels, strict=True))
    )
    rat = tmp_path / "rationales.jsonl"
    s = _run(
        "counterfactual",
        "rationales",
        "--classifier",
        clf_dir,
        data,
        "--out",
        rat,
        "--min-confidence",
        "0.3",
        "--dropped",
        tmp_path / "dropped.jsonl",
    )
    assert s["n_input"] == 6 and s["n_kept"] == n_correct == 3
    assert s["dropped_by"] == {"mispredicted": 3, "low-confidence": 0, "no-rationale": 0}
    kept = read_records(rat)
    assert [r.id for r in kept] == ["train.tsv:2", "train.tsv:4", "train.tsv:6"]
    assert all(r.meta["rationales"] for r in kept)
    assert len(read_records(tmp_path / "dropped.jsonl")) == 3

    inf = tmp_path / "infiller"
    s = _run(
        "counterfactual",
        "train",
        "--train",
        rat,
        "--model",
        tiny_model("t5"),
        "--out",
        inf,
        "--epochs",
        "2",
        "--learning-rate",
        "1e-3",
        "--batch-size",
        "2",
    )
    assert s["arch"] == "seq2seq" and s["alpha"] == 1.0 and s["n_train"] == 3
    assert s["parameters_changed"] is True
    assert (inf / "zdebias_infiller.json").exists()

    out = tmp_path / "gen"
    s = _run(
        "counterfactual",
        "generate",
        "--infiller",
        inf,
        "--classifier",
        clf_dir,
        rat,
        "--out",
        out,
        "--n",
        "2",
        "--targets",
        "all",
    )
    assert s["n_outputs"] == 3 * 2 * 2 == s["n_parsed"]
    kept_rows, rej_rows = _lines(out / "kept.jsonl"), _lines(out / "rejected.jsonl")
    assert len(kept_rows) + len(rej_rows) == 12
    assert len(kept_rows) == s["n_kept"]
    for row in kept_rows:
        assert row["meta"]["type"] == "counterfactual"
        assert row["label"] == row["meta"]["target_label"] == row["meta"]["classifier_label"]
        assert row["meta"]["source_id"] in {"train.tsv:2", "train.tsv:4", "train.tsv:6"}
    for row in rej_rows:
        assert row["meta"]["rejected_by"] and row["meta"]["reason"]
    assert json.loads((out / "summary.json").read_text())["n_kept"] == s["n_kept"]

    m = _run(
        "counterfactual",
        "metrics",
        out,
        "--lm",
        tiny_model("gpt2"),
        "--out",
        tmp_path / "metrics.json",
    )
    assert m["n_outputs"] == 12 and m["n_kept"] == s["n_kept"]
    assert m["flip_rate"] == pytest.approx(s["flip_rate"], abs=1e-6)
    assert 0 < m["distinct_1"] <= 1 and m["perplexity"] > 1
    m2 = _run("counterfactual", "metrics", out, "--classifier", clf_dir)
    assert m2["flip_rate"] == pytest.approx(s["flip_rate"], abs=1e-6)

    base = tmp_path / "random"
    s = _run(
        "counterfactual",
        "generate",
        "--infiller",
        inf,
        "--classifier",
        clf_dir,
        data,
        "--out",
        base,
        "--spans",
        "random",
        "--targets",
        "all",
    )
    assert s["n_outputs"] == 6 * 2 and s["spans"] == "random"
    bad = runner.invoke(
        app,
        [
            "counterfactual",
            "generate",
            "--infiller",
            str(inf),
            "--classifier",
            str(clf_dir),
            str(data),
            "--out",
            str(tmp_path / "x"),
        ],
    )
    assert isinstance(bad.exception, DataError) and "no rationales" in str(bad.exception)


def test_sentiment_end_to_end(tiny_model, tmp_path: Path) -> None:
    from zdebias.data.schema import Record

    clf_dir = tiny_model("bert", labels=("negative", "positive"))
    labels, n_correct = _labelled(clf_dir, SA_ROWS, lambda r, lab: Record("x", lab, text=r))
    data = tmp_path / "orig.tsv"  # CAD sentiment layout
    data.write_text(
        "Sentiment\tText\n"
        + "".join(f"{lab.capitalize()}\t{t}\n" for t, lab in zip(SA_ROWS, labels, strict=True))
    )
    rat = tmp_path / "rationales.jsonl"
    s = _run(
        "counterfactual",
        "rationales",
        "--classifier",
        clf_dir,
        data,
        "--out",
        rat,
        "--min-confidence",
        "0.0",
        "--min-score",
        "0.0",
    )
    assert s["n_kept"] == n_correct == 3
    inf = tmp_path / "infiller"
    s = _run(
        "counterfactual",
        "train",
        "--train",
        rat,
        "--model",
        tiny_model("gpt2"),
        "--out",
        inf,
        "--epochs",
        "1",
        "--learning-rate",
        "1e-3",
        "--batch-size",
        "2",
    )
    assert s["arch"] == "causal" and s["alpha"] == 0.3 and s["n_train"] == 3
    out = tmp_path / "gen"
    s = _run(
        "counterfactual",
        "generate",
        "--infiller",
        inf,
        "--classifier",
        clf_dir,
        rat,
        "--out",
        out,
        "--n",
        "3",
    )
    assert s["n_outputs"] == 3 * 1 * 3 == s["n_parsed"]
    rows = _lines(out / "kept.jsonl") + _lines(out / "rejected.jsonl")
    assert len(rows) == 9
    assert all(r["label"] != r["meta"]["original_label"] for r in rows)
    m = _run("counterfactual", "metrics", out)
    assert m["n_outputs"] == 9 and m["flip_rate"] == pytest.approx(s["flip_rate"], abs=1e-6)


@pytest.mark.real_model
def test_bert2bert_from_minilm(tiny_model, tmp_path: Path) -> None:
    from zdebias.counterfactual.model import load_infiller
    from zdebias.counterfactual.select import generate_counterfactuals
    from zdebias.counterfactual.trainer import train_infiller
    from zdebias.data.schema import Record

    recs = [
        Record(
            f"r{i}",
            "entailment",
            premise=p,
            hypothesis=h,
            meta={"rationales": {"hypothesis": [[0, 3]]}},
        )
        for i, (p, h) in enumerate(NLI_ROWS[:2])
    ]
    spans = [{"hypothesis": [(0, 3)]}] * 2
    s = train_infiller(
        recs,
        tmp_path / "b2b",
        model="minilm",
        labels=["entailment", "neutral", "contradiction"],
        spans=spans,
        epochs=1,
        batch_size=2,
        learning_rate=1e-4,
        max_source_length=64,
        progress=False,
    )
    assert s["arch"] == "bert2bert" and s["parameters_changed"] is True
    inf = load_infiller(tmp_path / "b2b")
    kept, rejected, summary = generate_counterfactuals(
        inf, load_classifier(tiny_model("bert")), recs, n=1, targets="all"
    )
    assert summary["n_outputs"] == 4 == summary["n_parsed"] == len(kept) + len(rejected)


def test_long_imdb_reviews_are_cut_not_lost(data_dir: Path, tiny_model, tmp_path: Path) -> None:
    """Real CAD sentiment rows are long: sources are cut after the last sentinel."""
    from zdebias.counterfactual.format import (
        encode_example,
        encode_source,
        mask_record,
        source_text,
    )
    from zdebias.counterfactual.model import load_infiller
    from zdebias.counterfactual.rationales import read_spans

    clf_dir = tiny_model("bert", labels=("negative", "positive"))
    rat = tmp_path / "rationales.jsonl"
    s = _run(
        "counterfactual",
        "rationales",
        "--classifier",
        clf_dir,
        data_dir / "cad/sentiment/orig/train.tsv",
        "--limit",
        "6",
        "--out",
        rat,
        "--no-require-correct",
        "--min-confidence",
        "0",
        "--min-score",
        "0",
    )
    assert s["n_input"] == 6 == s["n_kept"]
    # a random classifier's saliency ties differ between CPUs: pin the spans so both paths
    # are taken everywhere (the first word of the first review, the last word of the others)
    pinned = []
    for i, r in enumerate(read_records(rat)):
        words = list(re.finditer(r"\w+", r.text))
        word = words[0] if i == 0 else words[-1]
        pinned.append(replace(r, meta={**r.meta, "rationales": {"text": [list(word.span())]}}))
    write_records(pinned, rat)
    inf = tmp_path / "inf"
    s = _run(
        "counterfactual",
        "train",
        "--train",
        rat,
        "--model",
        tiny_model("t5"),
        "--out",
        inf,
        "--epochs",
        "1",
        "--max-source-length",
        "96",
        "--learning-rate",
        "1e-3",
    )
    recs = read_records(rat)
    tok = load_infiller(inf).tokenizer
    fits, trained = [], []
    for r in recs:
        # training needs every label's source (and the fillers) to fit; generation the
        # flipped label's source only: the two counts may differ by the label's tokens
        encoded = encode_example(
            tok,
            "seq2seq",
            r,
            read_spans(r),
            s["labels"],
            wrong_labels=s["alpha"] > 0,
            max_source_length=96,
            max_target_length=s["max_target_length"],
        )
        trained.append(not isinstance(encoded, str))
        masked, fillers = mask_record(r, read_spans(r))
        src = source_text("negative" if r.label == "positive" else "positive", masked)
        full = tok(src)["input_ids"]
        ids = encode_source(tok, "seq2seq", src, len(fillers), max_length=96)
        fits.append(ids is not None)
        if ids is not None:
            assert len(ids) == min(len(full), 96)
    assert any(len(tok(r.text)["input_ids"]) > 96 for r in recs)  # really long texts
    assert s["n_train"] == sum(trained) and s["n_skipped"] == 6 - sum(trained)
    assert all(f for f, t in zip(fits, trained, strict=True) if t)  # trained ⇒ generated
    out = tmp_path / "gen"
    g = _run(
        "counterfactual",
        "generate",
        "--infiller",
        inf,
        "--classifier",
        clf_dir,
        rat,
        "--out",
        out,
    )
    assert g["n_outputs"] == 6 and g["rejected_by"]["truncated"] == 6 - sum(fits)
    assert g["n_parsed"] == sum(fits)
    assert 0 < sum(fits) < 6  # both paths taken
