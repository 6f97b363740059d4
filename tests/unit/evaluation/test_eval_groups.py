"""Group accuracy on a shortcut split (issue 55.2): gold label × verdict groups, worst group
over groups with enough rows, the aligned-loss line, the per-shortcut view; all on hand-made
rows with hand-computed numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zdebias.data.schema import Record
from zdebias.data.writers import write_records
from zdebias.evaluation import reliance
from zdebias.evaluation.groups import GroupAccuracy, aligned_loss, shortcut_view
from zdebias.evaluation.reliance import WORST_GROUP, add_reliance, reliance_markdown
from zdebias.evaluation.tables import render_markdown

#: (gold, verdict, rows, right): the hand-made confusion
CONFUSION = [
    ("a", "a", 25, 20),  # aligned, 80 %
    ("a", "b", 20, 10),  # conflicting, 50 %: the worst group of 20 rows or more
    ("b", "b", 30, 27),  # aligned, 90 %
    ("b", "a", 19, 2),  # conflicting, 10.5 %: one row short of the minimum size
    ("b", None, 6, 3),  # free, 50 %
]


def _rows() -> tuple[list[str], list[str | None], list[bool]]:
    gold, verdicts, correct = [], [], []
    for g, v, n, right in CONFUSION:
        gold += [g] * n
        verdicts += [v] * n
        correct += [True] * right + [False] * (n - right)
    return gold, verdicts, correct


def test_group_accuracies_and_the_worst_group_of_a_hand_made_confusion() -> None:
    out = GroupAccuracy()(*_rows(), labels=["a", "b"])
    assert list(out["groups"]) == ["a × a", "a × b", "b × b", "b × a", "b × free"]
    assert [(c["n"], c["n_correct"]) for c in out["groups"].values()] == [
        (25, 20),
        (20, 10),
        (30, 27),
        (19, 2),
        (6, 3),
    ]
    assert [c["slice"] for c in out["groups"].values()] == [
        "aligned",
        "conflicting",
        "aligned",
        "conflicting",
        "free",
    ]
    assert out["groups"]["b × a"]["accuracy"] == pytest.approx(2 / 19)
    assert out["slices"]["aligned"] == {"n": 55, "n_correct": 47, "accuracy": 47 / 55}
    assert out["slices"]["conflicting"] == {"n": 39, "n_correct": 12, "accuracy": 12 / 39}
    assert out["slices"]["free"] == {"n": 6, "n_correct": 3, "accuracy": 0.5}
    assert out["gap"] == pytest.approx(47 / 55 - 12 / 39)
    # 19 rows < 20: b × a (10.5 %) takes no part; of the 3 groups that qualify a × b is worst
    assert (out["min_size"], out["n_groups"], out["n_qualifying"]) == (20, 5, 3)
    assert out["worst_group"]["group"] == "a × b" and out["worst_group_accuracy"] == 0.5
    flat = GroupAccuracy().flat(out)
    assert flat["shortcut worst-group"] == 0.5 and flat["shortcut group a × a"] == 0.8


def test_min_size_rule_decides_which_groups_count() -> None:
    out = GroupAccuracy(min_size=19)(*_rows())
    assert out["n_qualifying"] == 4 and out["worst_group"]["group"] == "b × a"
    assert out["worst_group_accuracy"] == pytest.approx(2 / 19)
    none = GroupAccuracy(min_size=31)(*_rows())
    assert none["n_qualifying"] == 0
    assert none["worst_group"] is None and none["worst_group_accuracy"] is None
    assert GroupAccuracy(min_size=31).flat(none).get("shortcut worst-group") is None


def test_aligned_loss_on_hand_made_numbers() -> None:
    # gap 30 → 18: aligned −10, conflicting +2; 10 of the 12 points are aligned loss
    loss = aligned_loss(
        {"aligned": 0.90, "conflicting": 0.60}, {"aligned": 0.80, "conflicting": 0.62}
    )
    assert loss["d_gap"] == pytest.approx(-0.12) and loss["share"] == pytest.approx(10 / 12)
    assert loss["mostly_aligned_loss"] is True
    # gap 30 → 18 mostly through conflicting gain: aligned −2, conflicting +10
    gain = aligned_loss(
        {"aligned": 0.90, "conflicting": 0.60}, {"aligned": 0.88, "conflicting": 0.70}
    )
    assert gain["share"] == pytest.approx(2 / 12) and gain["mostly_aligned_loss"] is False
    # half and half is not "mostly"; a gap that grew has no share
    half = aligned_loss(
        {"aligned": 0.9, "conflicting": 0.6}, {"aligned": 0.85, "conflicting": 0.65}
    )
    assert half["share"] == pytest.approx(0.5) and half["mostly_aligned_loss"] is False
    grew = aligned_loss({"aligned": 0.9, "conflicting": 0.6}, {"aligned": 0.95, "conflicting": 0.6})
    assert grew["share"] is None and grew["mostly_aligned_loss"] is False
    assert aligned_loss({"aligned": 0.9}, {"aligned": 0.8, "conflicting": 0.6}) is None


def test_per_shortcut_view_on_hand_made_rows() -> None:
    cuts = [
        {"feature": "not@hypothesis", "label": "contradiction"},
        {"feature": "outdoors@hypothesis", "label": "entailment"},
    ]
    gold = ["contradiction", "contradiction", "neutral", "entailment", "neutral", "entailment"]
    carries = [["not@hypothesis"], ["not@hypothesis"], ["not@hypothesis"], [], None, None]
    carries[3] = ["outdoors@hypothesis", "not@hypothesis"]
    correct = [True, False, False, True, True, True]
    view = shortcut_view(cuts, gold, carries, correct)
    neg, out = view
    # not@hypothesis: rows 0, 1 (gold contradiction: to gold), 2 and 3 (elsewhere)
    assert neg["to_gold"] == {"n": 2, "n_correct": 1, "accuracy": 0.5}
    assert neg["elsewhere"] == {"n": 2, "n_correct": 1, "accuracy": 0.5}
    assert neg["all"] == {"n": 4, "n_correct": 2, "accuracy": 0.5}
    # outdoors@hypothesis: row 3 only (gold entailment); rows 4, 5 record nothing: left out
    assert out["to_gold"] == {"n": 1, "n_correct": 1, "accuracy": 1.0}
    assert out["elsewhere"] == {"n": 0, "n_correct": 0, "accuracy": None}


def _split(tmp_path: Path, *, min_rows: int = 1) -> Path:
    """A split folder of the hand-made confusion: rows carry their verdict and shortcuts."""
    folder = tmp_path / "split"
    parts: dict[str, list[Record]] = {"aligned": [], "conflicting": [], "free": []}
    k = 0
    for g, v, n, _right in CONFUSION:
        name = "free" if v is None else ("aligned" if v == g else "conflicting")
        for _ in range(n):
            carries = ["cue@text"] if v == "a" else []
            meta = {"shortcut": {"slice": name, "label": v, "carries": carries}}
            parts[name].append(Record(f"r{k}", g, text=f"row {k}", meta=meta))
            k += 1
    for name, rows in parts.items():
        write_records(rows, folder / f"{name}.jsonl")
    summary = {
        "by": "features",
        "labels": ["a", "b"],
        "counts": {name: len(rows) for name, rows in parts.items()},
        "deciding_features": [{"feature": "cue@text", "label": "a", "n_rows": 44}],
        "warnings": [],
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def _doc(name: str, split: Path, right: dict[tuple[str, str | None], int]) -> dict[str, Any]:
    """A results document of one run whose outcomes on each group are ``right`` rows right
    (first rows of the group) and which carries the split's reliance and groups."""
    rows = reliance.split_rows(reliance.read_split(split), task="labels:a,b")
    results: dict[str, Any] = {}
    metrics: dict[str, float] = {}
    for part, records in rows.items():
        seen: dict[tuple[str, str | None], int] = {}
        out = ""
        for r in records:
            key = (r.label, r.meta["shortcut"]["label"])
            seen[key] = seen.get(key, 0) + 1
            out += "1" if seen[key] <= right[key] else "0"
        suite = reliance.SUITES[part]
        results[suite] = {"accuracy": out.count("1") / len(out), "outcomes": out}
        metrics[suite] = out.count("1") / len(out)
    doc = {
        "kind": "zdebias-evaluation",
        "name": name,
        "suites": [{"name": s} for s in results],
        "runs": [{"model": name, "results": results, "metrics": metrics}],
        "summary": {},
    }
    return add_reliance(doc, {**reliance.read_split(split), "suite": None}, rows=rows)


RIGHT = {(g, v): right for g, v, _n, right in CONFUSION}


def test_evaluate_adds_groups_worst_group_and_the_shortcut_view(tmp_path: Path) -> None:
    split = _split(tmp_path)
    doc = _doc("D0", split, RIGHT)
    run = doc["runs"][0]
    assert run["groups"]["worst_group"]["group"] == "a × b"
    assert run["metrics"][WORST_GROUP] == 0.5 and doc["summary"][WORST_GROUP]["mean"] == 0.5
    (cue,) = run["shortcuts"]
    # cue@text points to a: on a × a rows (to gold, 20/25 right), on b × a rows (2/19)
    assert cue["to_gold"]["n"] == 25 and cue["to_gold"]["n_correct"] == 20
    assert cue["elsewhere"]["n"] == 19 and cue["elsewhere"]["n_correct"] == 2
    text = render_markdown(doc)
    # conflicting and worst group first, the gap beside aligned and conflicting
    assert "| Method | worst group | conflicting | aligned | gap (aligned − conflicting) |" in text
    assert "| D0 | 50.00 | 30.77 | 85.45 | 54.69 | 50.00 |" in text
    assert "| a × b | conflicting | 20 | 50.00 |" in text
    assert "| b × a | conflicting | 19 | 10.53 |" in text
    assert "D0: worst group over the 3 of 5 groups with 20 rows or more: 50.00 (a × b)" in text
    assert "| cue@text → a | 25 | 19 | 80.00 | 10.53 |" in text


def test_compare_says_when_the_gap_shrank_mostly_through_aligned_loss(tmp_path: Path) -> None:
    split = _split(tmp_path)
    base = _doc("D0", split, RIGHT)
    # aligned: a × a 20 → 10 right, conflicting a × b 10 → 11: gap shrinks by aligned loss
    lost = _doc("Z", split, {**RIGHT, ("a", "a"): 10, ("a", "b"): 11})
    # conflicting a × b 10 → 20 right, aligned unchanged: robustness gained
    gained = _doc("R", split, {**RIGHT, ("a", "b"): 20})
    comparison = {"baseline": "D0", "comparisons": []}
    text = reliance_markdown([base, lost, gained], comparison)
    line = next(x for x in text.splitlines() if "aligned loss" in x)
    # Δaligned = −10/55 = −18.18, Δconflicting = +1/39 = +2.56, Δgap = −20.74
    assert line.startswith("Z: the gap shrank mostly through aligned loss")
    assert "gap -20.75 points = aligned -18.18 − conflicting +2.56 (88% of" in line
    assert "R: the gap" not in text


def test_report_renders_groups_worst_group_and_the_shortcut_view(tmp_path: Path) -> None:
    from zdebias.report.results import build_result_report

    doc = _doc("D0", _split(tmp_path), RIGHT)
    path = tmp_path / "d0.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    html = build_result_report(path)
    assert "<th>worst group</th><th>conflicting</th><th>aligned</th>" in html
    assert '<td>a × b</td><td>conflicting</td><td>20</td><td class="num">50.00</td>' in html
    assert "D0: worst group over the 3 of 5 groups with 20 rows or more: 50.00 (a × b)" in html
    assert "<td>cue@text → a</td><td>25</td><td>19</td>" in html


def test_results_file_with_a_broken_group_is_one_line(tmp_path: Path) -> None:
    from zdebias.errors import ConfigError
    from zdebias.evaluation.suites import read_results

    doc = _doc("D0", _split(tmp_path), RIGHT)
    path = tmp_path / "d0.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert read_results(path)["runs"][0]["groups"]["n_qualifying"] == 3  # new keys read
    doc["runs"][0]["groups"]["groups"]["a × b"]["n"] = "twenty"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ConfigError, match="groups") as err:
        read_results(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_a_method_whose_bias_expert_is_the_splits_bias_model_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from zdebias.evaluation.suites import _run_info

    split = _split(tmp_path)
    summary = json.loads((split / "summary.json").read_text())
    expert = tmp_path / "hypo-only-minilm"
    expert.mkdir()
    (expert / "metrics.json").write_text(json.dumps({"train_rows_digest": "d" * 64}))
    poe = tmp_path / "poe-seed1"
    poe.mkdir()
    settings = {"bias_model": str(expert), "bias_mode": "frozen"}
    (poe / "metrics.json").write_text(json.dumps({"loss": "poe", "settings": settings}))
    plain = tmp_path / "d0-seed1"
    plain.mkdir()
    (plain / "metrics.json").write_text(json.dumps({"loss": "ce", "settings": {}}))

    def graded(family: str, digest: str, run_dir: Path) -> list[str]:
        used = {"bias_model": {"family": family, "train_digest": digest}}
        (split / "summary.json").write_text(json.dumps({**summary, "used": used}))
        doc = _doc("M", split, RIGHT)
        doc["runs"][0].update(_run_info(str(run_dir)))
        caplog.clear()
        rows = reliance.split_rows(reliance.read_split(split), task="labels:a,b")
        doc = add_reliance(doc, reliance.read_split(split), rows=rows)
        lines = [x for x in doc["shortcut_split"]["warnings"] if "own bias model" in x]
        assert [r.message for r in caplog.records if "own bias model" in r.message] == [
            f"shortcut split {split}: {line}" for line in lines
        ]  # on stderr too
        text = render_markdown(doc)
        assert all(f"Warning: {line}" in text for line in lines)  # and in the table
        return lines

    # the split was made with --hypo-only-model DIR, the method's PoE expert is DIR
    (same,) = graded(f"trained:{expert}", "e" * 64, poe)
    assert f"method 'M' (1 of 1 run): its poe bias expert ({expert}) is the split's" in same
    # the split's cross-fitted NB learnt from the rows the expert learnt from
    (rows,) = graded("hypo-only-nb", "d" * 64, poe)
    assert "learnt from the rows the split's bias model (hypo-only-nb) was trained on" in rows
    # an independent split (other rows), and a method without a bias expert: no warning
    assert graded("ngram-lr", "e" * 64, poe) == []
    assert graded(f"trained:{expert}", "d" * 64, plain) == []


def test_the_split_records_which_top_shortcuts_each_row_carries() -> None:
    import scipy.sparse as sp

    from zdebias.stats.shortcut_split import with_carried

    rows = [
        Record("0", "a", text="x", meta={"shortcut": {"features": []}}),
        Record("1", "b", text="y", meta={"shortcut": {"features": [{"feature": "model=a"}]}}),
    ]
    matrix = sp.csr_matrix([[1, 0, 1], [0, 1, 1]])
    cuts = [{"feature": "f2"}, {"feature": "f0"}, {"feature": "model=a"}]
    out = with_carried(rows, matrix, ["f0", "f1", "f2"], cuts)
    # present columns, in the shortcuts' order; a name with no column: where a row names it
    assert [r.meta["shortcut"]["carries"] for r in out] == [["f2", "f0"], ["f2", "model=a"]]


def test_min_group_size_setting_reaches_the_worst_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zdebias.evaluation.suites as suites
    from zdebias.evaluation.settings import EvaluateSettings

    split = _split(tmp_path)
    made = _doc("D0", split, RIGHT)
    for run in made["runs"]:  # what evaluate_models returns: no reliance yet
        for key in ("groups", "shortcuts", "reliance"):
            run.pop(key, None)
    monkeypatch.setattr(suites, "evaluate_models", lambda *a, **k: made)
    suite = suites.Suite("test", str(split / "aligned.jsonl"), format="jsonl", task="labels:a,b")
    settings = EvaluateSettings(min_group_size=19)
    doc = reliance.evaluate_with_split(["m"], [suite], split, settings)
    groups = doc["runs"][0]["groups"]
    assert (groups["min_size"], groups["n_qualifying"]) == (19, 4)
    assert groups["worst_group"]["group"] == "b × a"
    assert EvaluateSettings().min_group_size == 20


def test_an_empty_slice_leaves_the_groups_of_the_others(tmp_path: Path) -> None:
    # SNLI split by the default features has no free rows: the free file is there, empty
    split = _split(tmp_path)
    free = split / "free.jsonl"
    free.write_text("")
    summary = json.loads((split / "summary.json").read_text())
    summary["counts"]["free"] = 0
    (split / "summary.json").write_text(json.dumps(summary))
    found = reliance.check_split(reliance.read_split(split), [], task="labels:a,b")
    assert found["rows"]["free"] == []
    doc = _doc("D0", split, RIGHT)
    for run in doc["runs"]:
        del run["groups"]
    doc = add_reliance(doc, reliance.read_split(split), rows=found["rows"])
    groups = doc["runs"][0]["groups"]
    assert groups["n_groups"] == 4 and groups["slices"]["free"]["n"] == 0
    assert groups["worst_group"]["group"] == "a × b"
