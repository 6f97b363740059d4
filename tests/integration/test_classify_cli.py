"""End to end on tiny models through the CLI: hypothesis-only (cross-fitted) → PoE and plain
runs over two seeds → predict → evaluate → compare; HANS per heuristic; errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from zdebias.cli import app
from zdebias.data.readers import read_records
from zdebias.data.writers import write_records

runner = CliRunner()


def cli(*args: object) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0, result.output
    return result.stdout


def _subset(src: Path, out: Path, n: int) -> Path:
    rows = read_records(src)
    write_records(rows[:: len(rows) // n][:n], out)
    return out


def test_train_predict_evaluate_compare(tiny_model, tmp_path: Path, data_dir: Path) -> None:
    base = tiny_model("bert", head="encoder")
    train = data_dir / "snli_20k" / "train.jsonl"
    dev = _subset(data_dir / "snli_20k" / "dev.jsonl", tmp_path / "dev.jsonl", 60)
    hard = _subset(
        data_dir / "snli_hard" / "snli_1.0_test_hard.jsonl", tmp_path / "hard.jsonl", 150
    )
    common = [
        "--train",
        train,
        "--subset",
        96,
        "--dev",
        dev,
        "--model",
        base,
        "--learning-rate",
        "2e-3",
        "--epochs",
        1,
        "--warmup-steps",
        0,
        "--batch-size",
        16,
        "--quiet",
    ]

    hyp = tmp_path / "hyp"
    summary = json.loads(
        cli(
            "train-classifier",
            *common,
            "--out",
            hyp,
            "--input-kind",
            "hypothesis-only",
            "--cross-fit",
            2,
            "--json",
        )
    )
    assert summary["n_train"] == 96 and summary["n_dev"] == 60 and summary["steps"] == 6
    oof = read_records(summary["cross_fit"]["file"])
    assert len(oof) == 96 and {r.meta["hypo_only_fold"] for r in oof} == {0, 1}
    assert sum(r.meta["hypo_only_pred"] == r.label for r in oof) / 96 == pytest.approx(
        summary["cross_fit"]["out_of_fold_accuracy"]
    )

    runs: dict[str, list[Path]] = {"ce": [], "poe": []}
    for seed in (1, 2):
        runs["ce"].append(tmp_path / f"ce-{seed}")
        cli("train-classifier", *common, "--out", runs["ce"][-1], "--seed", seed)
        runs["poe"].append(tmp_path / f"poe-{seed}")
        cli(
            "train-classifier",
            *common,
            "--out",
            runs["poe"][-1],
            "--seed",
            seed,
            "--loss",
            "poe",
            "--bias-model",
            hyp,
            "--beta",
            2,
            "--gamma",
            0.4,
        )
    poe_metrics = json.loads((runs["poe"][0] / "metrics.json").read_text())
    assert poe_metrics["settings"]["beta"] == 2.0 and poe_metrics["settings"]["bias_model"]

    pred_file = tmp_path / "pred.jsonl"
    pred = json.loads(cli("predict", runs["ce"][0], hard, "--out", pred_file, "--quiet", "--json"))
    predicted = read_records(pred_file)
    assert pred["n"] == len(predicted) == 150
    for r in predicted:
        assert r.meta["pred"] == max(r.meta["probs"], key=r.meta["probs"].get)
        assert sum(r.meta["probs"].values()) == pytest.approx(1.0, abs=1e-5)
    hard_acc = sum(r.meta["pred"] == r.label for r in predicted) / 150
    assert pred["accuracy"] == pytest.approx(hard_acc)

    docs = {}
    for name, folders in runs.items():
        out = tmp_path / f"results-{name}.json"
        text = cli(
            "evaluate",
            *folders,
            "--suite",
            f"snli-dev={dev}",
            "--suite",
            f"snli-hard={hard}",
            "--name",
            name,
            "--out",
            out,
            "--quiet",
        )
        docs[name] = json.loads(out.read_text())
        assert f"| {name} |" in text and out.with_suffix(".md").read_text() in text + "\n"
    ce = docs["ce"]
    assert [s["n"] for s in ce["suites"]] == [60, 150]
    assert ce["runs"][0]["metrics"]["snli-hard"] == pytest.approx(hard_acc)  # predict agrees
    assert [r["seed"] for r in ce["runs"]] == [1, 2]
    a, b = (r["metrics"]["snli-dev"] for r in ce["runs"])
    assert ce["summary"]["snli-dev"]["mean"] == pytest.approx((a + b) / 2)
    assert ce["summary"]["snli-dev"]["std"] == pytest.approx(abs(a - b) / math.sqrt(2))
    n_correct = ce["runs"][1]["results"]["snli-dev"]["n_correct"]
    assert b == pytest.approx(n_correct / 60)

    cmp_file = tmp_path / "cmp.json"
    text = cli(
        "compare", tmp_path / "results-ce.json", tmp_path / "results-poe.json", "--out", cmp_file
    )
    cmp = json.loads(cmp_file.read_text())
    # issue 55.4: the runs share seeds 1 and 2, so compare pairs them (paired t over seeds)
    assert cmp["baseline"] == "ce" and cmp["test"] == "auto"
    tests = cmp["comparisons"][0]["tests"]
    assert set(tests) == {  # issue 39.5: macro-F1 and balanced accuracy are tested too
        f"{suite}{metric}"
        for suite in ("snli-dev", "snli-hard")
        for metric in ("", " macro-F1", " balanced accuracy")
    }
    from scipy import stats

    x = [r["metrics"]["snli-hard"] for r in docs["ce"]["runs"]]
    y = [r["metrics"]["snli-hard"] for r in docs["poe"]["runs"]]
    assert tests["snli-hard"]["test"] == "paired-t"
    if tests["snli-hard"]["t"] is not None:
        assert tests["snli-hard"]["t"] == pytest.approx(float(stats.ttest_rel(y, x).statistic))
    assert tests["snli-hard"]["difference"] == pytest.approx(np.mean(y) - np.mean(x))
    assert "| Method | snli-dev | snli-hard |" in text and "| poe |" in text


def test_hans_per_heuristic_and_label(tiny_model, tmp_path: Path, data_dir: Path) -> None:
    model = tiny_model("bert")  # untrained 3-way NLI head on a 2-way set
    hans = data_dir / "hans" / "heuristics_evaluation_set.txt.gz"
    out = tmp_path / "hans.json"
    text = cli(
        "evaluate",
        model,
        "--suite",
        f"hans={hans}",
        "--out",
        out,
        "--quiet",
        "--batch-size",
        256,
        "--predictions",
        tmp_path / "preds",
    )
    result = json.loads(out.read_text())["runs"][0]["results"]["hans"]
    assert result["mapping"] == "non-entailment-sum" and result["n"] == 30000

    # the same numbers recomputed from the written probabilities with the sum rule
    records = read_records(tmp_path / "preds" / "run0-hans.jsonl", task="nli-binary")
    assert len(records) == 30000
    expected: dict[tuple[str, str], list[int]] = {}
    for r in records:
        probs = r.meta["probs"]
        non = probs["neutral"] + probs["contradiction"]
        pred = "entailment" if probs["entailment"] > non else "non-entailment"
        assert r.meta["pred"] == pred
        cell = expected.setdefault((r.meta["heuristic"], r.label), [0, 0])
        cell[0] += 1
        cell[1] += int(pred == r.label)
    assert sorted(expected) == [
        (h, lab)
        for h in ("constituent", "lexical_overlap", "subsequence")
        for lab in ("entailment", "non-entailment")
    ]
    for (heuristic, label), (n, correct) in expected.items():
        assert n == 5000
        cell = result["groups"][heuristic][label]
        assert (cell["n"], cell["n_correct"]) == (5000, correct)
        assert f"({correct}/5000)" in text
    assert result["n_correct"] == sum(c for _, c in expected.values())
    # 30 subcases: 5 per heuristic and gold label
    assert len(result["subgroups"]) == 30
    assert {v["n"] for v in result["subgroups"].values()} == {1000}
    assert "| lexical_overlap |" in text and "**hans overall**" in text


def test_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "other"}')
    good = tmp_path / "good.jsonl"
    good.write_text(
        '{"premise": "A man sleeps.", "hypothesis": "A man naps.", "label": "entailment"}\n'
    )
    for args, message in (
        (["compare", str(bad)], "compare needs at least two results files"),
        (["compare", str(bad), str(bad)], "not a zdebias evaluation results file"),
        (
            [
                "evaluate",
                str(tmp_path / "no-such-model"),
                "--suite",
                f"x={good}",
                "--out",
                str(tmp_path / "r.json"),
            ],
            "no-such-model",
        ),
        (
            [
                "train-classifier",
                "--train",
                str(bad),
                "--out",
                str(tmp_path / "o"),
                "--loss",
                "focal",
            ],
            "unknown loss 'focal'",
        ),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "zdebias.cli", *args], capture_output=True, text=True
        )
        assert proc.returncode == 2
        assert proc.stderr.strip().startswith("error: ") and message in proc.stderr
        assert "Traceback" not in proc.stderr
