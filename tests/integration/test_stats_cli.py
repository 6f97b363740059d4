"""`zdebias stats`, `filter` and `combine` end to end on files."""

from __future__ import annotations

import json
import subprocess
import sys
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


def _invoke(*args: object) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def _dataset(path: Path, n: int, seed: int, prefix: str) -> Path:
    rng = np.random.default_rng(seed)
    words = ["man", "dog", "park", "runs", "sits", "red", "small", "near", "the", "a"]
    records = []
    for i in range(n):
        label = LABELS[i % 3]
        hyp = " ".join(rng.choice(words, size=4))
        if label == "contradiction" and rng.random() < 0.6:
            hyp = "Nobody is sleeping " + hyp
        if label == "entailment" and rng.random() < 0.5:
            hyp = "a man runs in the park"
        records.append(Record(f"{prefix}{i}", label, "A man runs in the park near a dog.", hyp))
    write_jsonl(records, path)
    return path


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return _dataset(tmp_path / "train.jsonl", 300, 0, "t")


def test_stats_json_table_and_plot(data: Path, tmp_path: Path) -> None:
    out = _invoke(
        "stats",
        data,
        "--top",
        3,
        "--out",
        tmp_path / "s.json",
        "--plot",
        tmp_path / "gardner",
        "--min-n",
        5,
        "--features",
        "ngrams,lex-overlap,hypo-len,null",
    )
    report = json.loads((tmp_path / "s.json").read_text())
    for key in ("n_examples", "labels", "n_features", "z_critical", "n_significant", "top"):
        assert key in report
    assert report["n_examples"] == 300 and report["labels"] == list(LABELS)
    assert set(report["top"]) == set(LABELS)
    for rows in report["top"].values():
        assert len(rows) == 3 and set(rows[0]) == {"feature", "z", "n", "p"}
        assert [r["z"] for r in rows] == sorted((r["z"] for r in rows), reverse=True)
    top_con = report["top"]["contradiction"][0]
    assert top_con["feature"] in {
        "nobody@hypothesis",
        "sleeping@hypothesis",
        "is@hypothesis",
        "nobody is@hypothesis",
        "is sleeping@hypothesis",
    }
    # the printed table shows the same numbers
    assert top_con["feature"] in out and f"{top_con['z']:.1f}" in out
    assert (tmp_path / "gardner.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (tmp_path / "gardner.html").read_text()
    assert "plotly" in html.lower() and "above the curve" in html
    assert report["plot"]["n_above_curve"] <= report["n_significant"]
    assert f"{report['plot']['n_above_curve']:,} of" in out
    # --json prints the same report on stdout
    again = json.loads(
        _invoke(
            "stats",
            data,
            "--top",
            3,
            "--json",
            "--features",
            "ngrams,lex-overlap,hypo-len,null",
        )
    )
    assert again["top"] == report["top"]


def test_filter_outputs_partition_the_input(data: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "f"
    out = _invoke(
        "filter", data, "--out", out_dir, "--zfilter-batch-size", 50, "--biased-k", 5, "--seed", 3
    )
    kept = read_records(out_dir / "kept.jsonl")
    rejected = read_records(out_dir / "rejected.jsonl")
    summary = json.loads((out_dir / "summary.json").read_text())
    ids = [r.id for r in kept] + [r.id for r in rejected]
    assert sorted(ids) == sorted(r.id for r in read_records(data)) and len(set(ids)) == 300
    assert (summary["n_input"], summary["n_kept"], summary["n_rejected"]) == (
        300,
        len(kept),
        len(rejected),
    )
    assert summary["zfilter_batch_size"] == 50 and summary["biased_k"] == 5 and summary["seed"] == 3
    assert set(summary["top_z_before"]) == set(LABELS) == set(summary["top_z_after"])
    assert all(r.meta["rejected_by"] for r in rejected)
    assert "kept.jsonl" in out and "rejected.jsonl" in out
    # unshuffled runs visit the file in order: the first batch is accepted whole
    _invoke("filter", data, "--out", tmp_path / "g", "--zfilter-batch-size", 50, "--no-shuffle")
    kept2 = {r.id for r in read_records(tmp_path / "g" / "kept.jsonl")}
    assert {f"t{i}" for i in range(50)} <= kept2
    assert json.loads((tmp_path / "g" / "summary.json").read_text())["shuffle"] is False


def test_filter_with_seed_data(data: Path, tmp_path: Path) -> None:
    seed = _dataset(tmp_path / "seed.jsonl", 150, 1, "s")
    _invoke(
        "filter", data, "--out", tmp_path / "c", "--seed-data", seed, "--zfilter-batch-size", 100
    )
    kept = read_records(tmp_path / "c" / "kept.jsonl")
    rejected = read_records(tmp_path / "c" / "rejected.jsonl")
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert [r.id for r in kept[:150]] == [f"s{i}" for i in range(150)]
    assert summary["n_seed"] == 150 and summary["n_kept"] == len(kept)
    assert summary["n_accepted"] + summary["n_rejected"] == 300
    assert sorted([r.id for r in kept[150:]] + [r.id for r in rejected]) == sorted(
        f"t{i}" for i in range(300)
    )


@pytest.mark.parametrize("recipe", ["z-aug", "par-z", "seq-z"])
def test_combine_recipes(data: Path, tmp_path: Path, recipe: str) -> None:
    gen = _dataset(tmp_path / "gen.jsonl", 240, 2, "g")
    out_dir = tmp_path / recipe
    out = _invoke(
        "combine",
        "--recipe",
        recipe,
        "--original",
        data,
        "--generated",
        gen,
        "--out",
        out_dir,
        "--zfilter-batch-size",
        60,
        "--features",
        "unigrams,null",
    )
    combined = read_records(out_dir / "combined.jsonl")
    rejected = read_records(out_dir / "rejected.jsonl")
    summary = json.loads((out_dir / "summary.json").read_text())
    ids = [r.id for r in combined] + [r.id for r in rejected]
    assert sorted(ids) == sorted([f"t{i}" for i in range(300)] + [f"g{i}" for i in range(240)])
    for r in combined + rejected:
        assert r.meta["type"] == ("original" if r.id.startswith("t") else "generated")
    assert summary["recipe"] == recipe and summary["n_output"] == len(combined)
    if recipe == "z-aug":
        assert summary["n_output_original"] == 300
    assert recipe in out


def test_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"premise": "a", "hypothesis": "b", "label": "entailment"}\n{"premise": \n')
    cases = [
        (["stats", str(bad)], "bad.jsonl:2"),
        (["filter", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "o")], "no such file"),
        (["stats", str(bad), "--features", "trigrams"], "unknown feature"),
    ]
    for args, message in cases[:1]:
        proc = subprocess.run(
            [sys.executable, "-m", "zdebias.cli", *args], capture_output=True, text=True
        )
        assert proc.returncode == 2 and proc.stderr.startswith("error: ") and message in proc.stderr
        assert proc.stderr.count("\n") == 1
    for args, message in cases[1:]:
        result = runner.invoke(app, args)
        assert result.exit_code != 0 and message in str(result.exception)
    assert not (tmp_path / "o").exists()


def test_old_spellings_still_work_with_a_warning(data: Path, tmp_path: Path) -> None:
    """0.1 flags keep working for one release: same result, a deprecation line on stderr."""
    new = tmp_path / "new"
    _invoke("filter", data, "--out", new, "--zfilter-batch-size", 50, "--biased-k", 5, "--seed", 3)
    old = tmp_path / "old"
    args = ["filter", str(data), "--out", str(old), "--batch-size", "50", "--top-k", "5"]
    proc = subprocess.run(
        [sys.executable, "-m", "zdebias.cli", *args, "--shuffle-seed", "3"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    for flag, now in (("--batch-size", "--zfilter-batch-size"), ("--top-k", "--biased-k")):
        assert f"{flag} is deprecated; use {now}" in proc.stderr
    assert (old / "kept.jsonl").read_bytes() == (new / "kept.jsonl").read_bytes()
    legacy = ["stats", str(data), "--top-k", "3", "--json", str(tmp_path / "s.json")]
    proc = subprocess.run(
        [sys.executable, "-m", "zdebias.cli", *legacy, "--features", "unigrams,null"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "--json FILE is deprecated" in proc.stderr
    assert len(json.loads((tmp_path / "s.json").read_text())["top"]["neutral"]) == 3


def test_output_folder_is_refused_unless_overwrite(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "f"
    _invoke("filter", data, "--out", out, "--features", "unigrams,null")
    result = runner.invoke(app, ["filter", str(data), "--out", str(out)])
    assert result.exit_code != 0 and "--overwrite" in str(result.exception)
    _invoke("filter", data, "--out", out, "--features", "unigrams,null", "--overwrite", "--seed", 1)
    assert json.loads((out / "summary.json").read_text())["seed"] == 1


def test_spellings_that_disagree_and_bad_numbers_fail_in_one_line(
    data: Path, tmp_path: Path
) -> None:
    out = str(tmp_path / "f")
    cases = [
        (["filter", str(data), "--out", out, "--biased-k", "5", "--top-k", "3"], "disagree"),
        (["filter", str(data), "--out", out, "--min-z", "nan"], "--min-z"),
        (["filter", str(data), "--out", out, "--zfilter-batch-size", "0"], "--zfilter-batch-size"),
    ]
    for args, message in cases:
        proc = subprocess.run(
            [sys.executable, "-m", "zdebias.cli", *args], capture_output=True, text=True
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("error: ") and message in proc.stderr
        assert proc.stderr.count("\n") == 1
    assert not (tmp_path / "f").exists()


def test_stats_refuses_to_overwrite_and_quiet_before_the_command(
    data: Path, tmp_path: Path
) -> None:
    report = tmp_path / "s.json"
    report.write_text("{}")
    result = runner.invoke(app, ["stats", str(data), "--out", str(report)])
    assert result.exit_code != 0 and "--overwrite" in str(result.exception)
    assert report.read_text() == "{}"
    args = ["-q", "stats", str(data), "--out", str(report), "--overwrite", "--top", "2"]
    proc = subprocess.run(
        [sys.executable, "-m", "zdebias.cli", *args, "--features", "unigrams,null"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stderr == ""
    assert len(json.loads(report.read_text())["top"]["neutral"]) == 2


def test_legacy_json_argument_is_rewritten_only_for_stats() -> None:
    from zdebias.commands._cli import legacy_argv

    assert legacy_argv(["stats", "d.jsonl", "--json", "s.json"]) == [
        "stats",
        "d.jsonl",
        "--out",
        "s.json",
    ]
    assert legacy_argv(["stats", "d.jsonl", "--json", "-"]) == ["stats", "d.jsonl", "--json"]
    assert legacy_argv(["inspect", "stats", "--json", "s.json"]) == [
        "inspect",
        "stats",
        "--json",
        "s.json",
    ]


def test_track_several_features_prints_them_and_refuses_unknown_ones(
    data: Path, tmp_path: Path
) -> None:
    """Issue 39.6: --track printed nothing in text mode, kept only the last of several and
    stored null for a name that is no feature."""
    args = ["stats", data, "--features", "ngrams,null", "--top", 1]
    out = _invoke(*args, "--track", "sleeping@hypothesis", "--track", "<null>,park@hypothesis")
    report = json.loads(_invoke(*args, "--track", "sleeping@hypothesis", "--json"))
    assert list(report["tracked"]) == ["sleeping@hypothesis"]
    many = json.loads(
        _invoke(
            *args, "--track", "sleeping@hypothesis", "--track", "<null>,park@hypothesis", "--json"
        )
    )
    assert list(many["tracked"]) == ["sleeping@hypothesis", "<null>", "park@hypothesis"]
    sleeping = many["tracked"]["sleeping@hypothesis"]["contradiction"]
    assert "tracked features" in out
    row = next(line for line in out.splitlines() if "sleeping@hypothesis" in line
               and "contradiction" in line)  # fmt: skip
    assert f"{sleeping['z']:.1f}" in row and f"{sleeping['n']:,}" in row
    result = runner.invoke(app, [str(a) for a in args] + ["--track", "sleeping@hypo"])
    assert result.exit_code != 0
    message = str(result.exception)
    assert "--track 'sleeping@hypo': no such feature in these rows" in message
    assert "features are named as in the top table, e.g." in message
