"""End to end through the CLI: train-generator → sample (stopped, resumed) → debias-generator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers.nli_toy import toy_records
from zdebias.cli import app


def _toy_file(path: Path) -> Path:
    with path.open("w") as fh:
        for r in toy_records():
            row = {"premise": r.premise, "hypothesis": r.hypothesis, "label": r.label}
            fh.write(json.dumps(row) + "\n")
        fh.write(json.dumps({"premise": "x", "hypothesis": "y", "label": "-"}) + "\n")
    return path


def _invoke(*args: str) -> dict:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout[result.stdout.index("{") :])


def test_train_sample_resume_debias(tiny_model, tmp_path: Path, data_dir: Path) -> None:
    data = _toy_file(tmp_path / "toy.jsonl")
    gen = tmp_path / "gen"
    summary = _invoke(
        "train-generator",
        "--train",
        str(data),
        "--model",
        str(tiny_model("gpt2")),
        "--out",
        str(gen),
        "--max-steps",
        "60",
        "--learning-rate",
        "1e-2",
        "--batch-size",
        "12",
        "--seed",
        "0",
        "--set",
        "disable_tqdm=true",
    )
    assert summary["n_trained"] == 12 and summary["steps"] == 60
    assert summary["objective"] == "consistency"
    assert summary["settings"]["consistency_weight"] == 0.5
    fmt = json.loads((gen / "zdebias_generator.json").read_text())
    assert fmt["labels"] == ["entailment", "neutral", "contradiction"]
    assert fmt["label_tokens"]["neutral"] == "<|neutral|>"
    assert (gen / "train_summary.json").exists() and (gen / "model.safetensors").exists()

    out = tmp_path / "samples"
    common = [
        "sample",
        "--generator",
        str(gen),
        "--n",
        "10",
        "--out",
        str(out),
        "--batch-size",
        "8",
        "--shard-size",
        "3",
    ]
    first = _invoke(*common, "--max-shards", "1")
    assert not first["complete"] and first["n_shards"] == 1 and 3 <= first["n_written"] < 10
    done = _invoke(*common)
    assert done["complete"] and done["n_written"] == 10
    assert done["n_generated"] == (
        done["n_written"] + done["n_malformed"] + done["n_duplicates"] + done["n_surplus"]
    )
    rows = [json.loads(line) for line in (out / "samples.jsonl").open()]
    assert len(rows) == 10
    assert len({(r["label"], r["premise"].lower(), r["hypothesis"].lower()) for r in rows}) == 10
    assert {r["meta"]["type"] for r in rows} == {"generated"}
    assert all(r["label"] in fmt["labels"] and r["premise"] and r["hypothesis"] for r in rows)
    # seeded rounds: the stopped-and-resumed run equals an uninterrupted one, byte for byte
    whole = _invoke(*[str(tmp_path / "whole") if a == str(out) else a for a in common])
    assert whole["n_generated"] == done["n_generated"]
    assert (tmp_path / "whole" / "samples.jsonl").read_text() == (out / "samples.jsonl").read_text()

    # debias on a label-mixed slice of the real SNLI sample (the file is sorted by label)
    lines = (data_dir / "snli_20k" / "train.jsonl").read_text().splitlines()[::67]
    real = tmp_path / "snli_slice.jsonl"
    real.write_text("\n".join(lines) + "\n")
    debiased = _invoke(
        "debias-generator",
        "--generator",
        str(gen),
        "--train",
        str(real),
        "--out",
        str(tmp_path / "gen2"),
        "--zfilter-batch-size",
        "100",
        "--max-steps",
        "2",
        "--batch-size",
        "8",
        "--set",
        "disable_tqdm=true",
    )
    z = debiased["z_filter"]
    assert z["n_kept"] + z["n_rejected"] == len(lines) == z["n_input"]
    assert z["n_rejected"] > 0 and debiased["n_negatives"] == z["n_rejected"]
    assert debiased["objective"] == "debias" and debiased["settings"]["consistency_weight"] == 0
    assert debiased["mask"]["n_biased_tokens"] > 0
    fmt2 = json.loads((tmp_path / "gen2" / "zdebias_generator.json").read_text())
    assert fmt2["label_token_ids"] == fmt["label_token_ids"]


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "zdebias.cli",
            "sample",
            "--generator",
            str(tmp_path),
            "--n",
            "3",
            "--out",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {tmp_path}: not a zdebias generator folder (no zdebias_generator.json); "
        "train one with `zdebias train-generator`"
    ]


@pytest.mark.parametrize("args", [["--top-k", "-1"], ["--temperature", "0"]])
def test_bad_sampling_options(tmp_path: Path, args: list[str]) -> None:
    from zdebias.errors import ConfigError

    result = CliRunner().invoke(
        app,
        ["sample", "--generator", str(tmp_path), "--n", "3", "--out", str(tmp_path / "s"), *args],
    )
    assert isinstance(result.exception, ConfigError)
