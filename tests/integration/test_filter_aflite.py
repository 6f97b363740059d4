"""`zdebias filter --method aflite` end to end: a tiny random BERT as the encoder, the
embeddings cached, the same files as z-filtering, bad settings in one line (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from zdebias.cli import app
from zdebias.data import read_records
from zdebias.data.schema import Record
from zdebias.data.writers import write_jsonl

runner = CliRunner()
LABELS = ("entailment", "neutral", "contradiction")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    words = ["man", "dog", "park", "runs", "sits", "red", "small", "near", "the", "a"]
    records = []
    for i in range(120):
        label = LABELS[i % 3]
        hyp = " ".join(rng.choice(words, size=4))
        if label == "contradiction" and i % 2:
            hyp = "nobody is sleeping " + hyp
        records.append(Record(f"r{i}", label, "A man runs in the park near a dog.", hyp))
    path = tmp_path / "train.jsonl"
    write_jsonl(records, path)
    return path


def test_aflite_on_a_file_with_a_tiny_encoder(
    data: Path,
    tmp_path: Path,
    tiny_model: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ZDEBIAS_CACHE", str(tmp_path / "cache"))
    encoder = tiny_model("bert")
    common = ["--method", "aflite", "--encoder", str(encoder), "--aflite-n", "16", "--json"]
    first = runner.invoke(app, ["filter", str(data), "--out", str(tmp_path / "a"), *common])
    assert first.exit_code == 0, (first.output, first.exception)
    summary = json.loads(first.stdout)
    assert summary["method"] == "aflite" and summary["n_input"] == 120
    assert (summary["aflite_n"], summary["aflite_m"], summary["aflite_k"]) == (16, 30, 3)
    assert summary["aflite_target"] == 60 and summary["aflite_tau"] == 0.75
    assert summary["n_rejected"] > 0 and summary["stopped"].startswith("fewer than k = 3")
    assert summary["embeddings"]["cache_hit"] is False
    assert summary["embeddings"]["shape"][0] == 120
    assert summary["embeddings"]["input"] == "premise, hypothesis as a text pair"
    kept = read_records(tmp_path / "a" / "kept.jsonl")
    rejected = read_records(tmp_path / "a" / "rejected.jsonl")
    assert len(kept) == summary["n_kept"] and len(rejected) == summary["n_rejected"]
    assert sorted(r.id for r in kept + rejected) == sorted(f"r{i}" for i in range(120))
    assert all(r.meta["rejected_by"] == ["aflite"] for r in rejected)
    assert sum(r["removed"] for r in summary["rounds"]) == len(rejected)
    on_disk = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert on_disk["path"] == str(data) and on_disk["read"]["n_records"] == 120
    # the rerun reads the embeddings back, and writes the same bytes
    again = runner.invoke(app, ["filter", str(data), "--out", str(tmp_path / "b"), *common])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["embeddings"]["cache_hit"] is True
    for name in ("kept.jsonl", "rejected.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    text = runner.invoke(
        app, ["filter", str(data), "--out", str(tmp_path / "c"), *common[:-1]]
    ).output
    assert f"input 120: kept {summary['n_kept']}, rejected {summary['n_rejected']}" in text
    assert "(cache hit)" in text and "wrote " in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--aflite-tau", "1.5"], "--aflite-tau"),
        (["--aflite-tau", "0"], "--aflite-tau"),
        (["--aflite-k", "0"], "--aflite-k"),
        (["--aflite-m", "120"], "aflite_m (--aflite-m): 120 must be below the 120 rows"),
        (["--method", "forest"], "--method"),
    ],
)
def test_bad_aflite_settings_fail_in_one_line(
    data: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "f"
    base = ["filter", str(data), "--out", str(out), "--method", "aflite"]
    proc = subprocess.run(
        [sys.executable, "-m", "zdebias.cli", *base, "--encoder", str(tmp_path / "none"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "ZDEBIAS_CACHE": str(tmp_path / "cache")},
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and message in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1
    assert not out.exists()


def test_aflite_refuses_a_seed(data: Path, tmp_path: Path) -> None:
    args = ["filter", str(data), "--out", str(tmp_path / "f"), "--method", "aflite"]
    proc = subprocess.run(
        [sys.executable, "-m", "zdebias.cli", *args, "--seed-data", str(data)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "--method aflite takes none" in proc.stderr
    assert proc.stderr.count("\n") == 1
