"""`zdebias filter --method cartography`, `zdebias data-map` and the filter stage's hash
(issue 30): exact kept ids, every row once, exit 2 on what cannot be matched, plots that are
the same bytes twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers.cli_main import run_main

LABELS = ("entailment", "neutral", "contradiction")
# six examples, 3 epochs each: (p(gold) per epoch, correct per epoch)
DYNAMICS = {
    "a": ([0.9, 0.9, 0.9], [1, 1, 1]),  # easy: confidence .9, variability 0
    "b": ([0.1, 0.5, 0.9], [0, 1, 1]),  # ambiguous: variability .327
    "c": ([0.2, 0.2, 0.2], [0, 0, 0]),  # hard to learn: confidence .2
    "d": ([0.3, 0.6, 0.9], [0, 1, 1]),  # variability .245
    "e": ([0.6, 0.7, 0.8], [1, 1, 1]),  # confidence .7
    "f": ([0.3, 0.3, 0.3], [0, 0, 0]),  # confidence .3
}


def _files(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data.jsonl"
    rows = [
        {"id": key, "premise": f"p {key}", "hypothesis": f"h {key}", "label": LABELS[i % 3]}
        for i, key in enumerate(DYNAMICS)
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = tmp_path / "model"
    model.mkdir()
    lines = [
        {"id": key, "gold_probs": p, "correct": [bool(v) for v in c]}
        for key, (p, c) in DYNAMICS.items()
    ]
    (model / "training_dynamics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return data, model


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


@pytest.mark.parametrize(
    ("region", "kept"),
    [("ambiguous", ["b", "d"]), ("hard-to-learn", ["c", "f"]), ("easy", ["a", "e"])],
)
def test_filter_keeps_the_region(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], region: str, kept: list[str]
) -> None:
    data, model = _files(tmp_path)
    out = tmp_path / "out"
    args = ["filter", data, "--out", out, "--method", "cartography", "--dynamics", model]
    assert run_main([*args, "--region", region, "--fraction", "0.33", "--json"]) == 0
    summary: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert _ids(out / "kept.jsonl") == kept
    rejected = _ids(out / "rejected.jsonl")
    assert sorted(kept + rejected) == sorted(DYNAMICS) and len(rejected) == 4
    assert (summary["n_input"], summary["n_kept"], summary["n_rejected"]) == (6, 2, 4)
    assert summary["method"] == "cartography" and summary["epochs"] == 3
    row = json.loads((out / "rejected.jsonl").read_text().splitlines()[0])
    assert row["meta"]["rejected_by"][0].startswith(f"not in the 33% {region}")
    assert set(row["meta"]["cartography"]) == {"confidence", "variability", "correctness"}
    assert json.loads((out / "summary.json").read_text())["n_kept"] == 2


def test_filter_refuses_what_it_cannot_match(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, model = _files(tmp_path)
    more = tmp_path / "more.jsonl"
    extra = [{"id": k, "premise": "p", "hypothesis": "h", "label": "neutral"} for k in "xy"]
    more.write_text(data.read_text() + "".join(json.dumps(r) + "\n" for r in extra))
    base = ["filter", "--out", tmp_path / "o", "--method", "cartography", "--dynamics", model]
    capsys.readouterr()
    assert run_main([*base, more]) == 2
    err = capsys.readouterr().err
    assert "2 of 8 rows have no training dynamics" in err and "(first: id 'x')" in err
    assert len(err.strip().splitlines()) == 1
    for bad in ("1.5", "0"):
        assert run_main([*base, data, "--fraction", bad]) == 2
        assert "--fraction" in capsys.readouterr().err
    assert run_main(["filter", data, "--out", tmp_path / "o", "--method", "cartography"]) == 2
    assert "--method cartography needs --dynamics" in capsys.readouterr().err
    assert run_main(["filter", data, "--out", tmp_path / "o", "--dynamics", model]) == 2
    assert "--dynamics is for --method cartography" in capsys.readouterr().err
    assert run_main([*base[:-1], tmp_path / "nowhere", data]) == 2
    assert "no such training-dynamics file" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_data_map_files_are_the_same_bytes_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, model = _files(tmp_path)
    pages = []
    for run in ("a", "b"):
        out = tmp_path / run / "map"
        assert run_main(["-q", "data-map", model, "--out", out]) == 0
        png, html = out.parent / "map.png", out.parent / "map.html"
        assert png.read_bytes().startswith(b"\x89PNG")
        pages.append((png.read_bytes(), html.read_bytes()))
    assert pages[0] == pages[1]
    assert b'id="data-map-map"' in pages[0][1]
    capsys.readouterr()


def test_data_map_subsamples_large_data_the_same_way() -> None:
    import numpy as np

    from zdebias.report.plots import data_map_plot

    rng = np.random.default_rng(1)
    conf, var = rng.random(500), rng.random(500) / 2
    corr = np.round(rng.random(500) * 3) / 3
    one = data_map_plot(conf, var, corr, max_points=100, backend="plotly")
    two = data_map_plot(conf, var, corr, max_points=100, backend="plotly")
    assert one.summary["n_plotted"] == 100 and one.summary["n_examples"] == 500
    assert one.figure.to_json() == two.figure.to_json()
    assert sum(len(t.x) for t in one.figure.data) == 100


def test_filter_refuses_ambiguous_on_one_epoch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 39.2: one epoch gives variability 0 everywhere; ambiguous kept an id-ordered third
    with no warning. Now it is refused; the confidence regions still run (seeded ties)."""
    data, model = _files(tmp_path)
    lines = [
        {"id": key, "gold_probs": p[:1], "correct": [bool(c[0])]}
        for key, (p, c) in DYNAMICS.items()
    ]
    (model / "training_dynamics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    base = ["filter", data, "--method", "cartography", "--dynamics", model]
    capsys.readouterr()
    assert run_main([*base, "--out", tmp_path / "o", "--region", "ambiguous"]) == 2
    err = capsys.readouterr().err
    assert "needs training dynamics of at least 2 epochs; these have 1" in err
    assert not (tmp_path / "o").exists()
    out = tmp_path / "easy"
    assert run_main([*base, "--out", out, "--region", "easy", "--fraction", "0.5", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    # epoch 1: a .9, e .6, then d and f tie at .3 for the third place
    kept = _ids(out / "kept.jsonl")
    assert kept[:2] == ["a", "d"] or kept[:2] == ["a", "e"]
    assert set(kept) - {"d", "f"} == {"a", "e"} and len(kept) == 3
    assert summary["ties"] == "in a random order drawn from seed 0" and summary["epochs"] == 1


def test_filter_matches_repeated_ids_by_position_or_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40.7: rows were matched by id alone; two rows with one id got the same dynamics."""
    data, model = _files(tmp_path)
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    rows[1]["id"] = "a"  # the training set had id 'a' twice; its dynamics file too
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = model / "training_dynamics.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[1]["id"] = "a"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    out = tmp_path / "out"
    args = ["filter", data, "--method", "cartography", "--dynamics", model, "--json"]
    assert run_main([*args, "--out", out, "--region", "ambiguous", "--fraction", "0.33"]) == 0
    summary = json.loads(capsys.readouterr().out)
    kept = [json.loads(line) for line in (out / "kept.jsonl").read_text().splitlines()]
    # by position: the second row ('a' now) has b's dynamics, variability .327
    assert [(r["id"], r["premise"]) for r in kept] == [("a", "p b"), ("d", "p d")]
    assert summary["matched_by"] == "position"
    # another order (or a subset) cannot be matched: refused, naming the repeated id
    data.write_text("".join(json.dumps(r) + "\n" for r in reversed(rows)))
    assert run_main([*args, "--out", tmp_path / "o2"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the reader's warning
    assert last.startswith(f"error: {data}: id 'a' is on 2 rows, so rows cannot be matched")
    assert "6 input rows, 6 in" in last


def test_rows_seen_in_one_epoch_are_counted_for_ambiguous(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run cut by max_steps leaves some rows with one epoch: their variability 0 is no
    measurement, so the ambiguous region's summary counts them."""
    data, model = _files(tmp_path)
    path = model / "training_dynamics.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[1]["gold_probs"], lines[1]["correct"] = [0.1, None, None], [False, None, None]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    args = ["filter", data, "--method", "cartography", "--dynamics", model, "--json"]
    assert run_main([*args, "--out", tmp_path / "o", "--region", "ambiguous"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["warnings"] == ["1 row was trained on in one epoch only (variability 0)"]
    assert _ids(tmp_path / "o" / "kept.jsonl") == ["d", "e"]  # b (variability 0) left out
    assert run_main([*args, "--out", tmp_path / "e", "--region", "easy"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []
