"""The z-test guard (issue 52: a one-row label is no shortcut) and what the z-filter says it did
(issue 53: shares discarded, rows rejected below z_critical, --min-z critical, the label-share
warning and floor), on hand-made data with hand-computed numbers."""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest
import scipy.sparse as sp

from zdebias.data.schema import Record
from zdebias.report.text import discard_lines, filter_text
from zdebias.stats.settings import StatsSettings, ZFilterSettings
from zdebias.stats.zfilter import (
    FilterArrays,
    _floor_rescue,
    discards,
    label_share_warnings,
    z_filter,
    z_filter_matrix,
)
from zdebias.stats.zstats import exact_z, guarded_cells, z_critical, z_from_counts

LABELS = ("entailment", "neutral", "contradiction")


def _one_row_label() -> list[Record]:
    """150 entailment + 149 neutral + 1 contradiction (issue 52): each row its own word, the
    contradiction row also ``plays`` and ``guitar``, which no other row has; ``film`` on
    every entailment and neutral row."""
    labels = ["entailment"] * 150 + ["neutral"] * 149 + ["contradiction"]
    rows = []
    for i, label in enumerate(labels):
        text = "plays guitar" if label == "contradiction" else f"film w{i}"
        rows.append(Record(id=str(i), label=label, text=text))
    return rows


def test_exact_tail_z_by_hand() -> None:
    # one row, p0 = 1/300: P(X >= 1) = 1/300, z = Φ⁻¹(1 - 1/300) = 2.713 (normal: √299 = 17.3)
    assert exact_z(np.array([1]), np.array([1]), np.array([1 / 300]))[0] == pytest.approx(
        NormalDist().inv_cdf(1 - 1 / 300)
    )
    # 3 of 4 rows at p0 0.2: P(X >= 3) = 4·0.2³·0.8 + 0.2⁴ = 0.0272
    tail = 4 * 0.2**3 * 0.8 + 0.2**4
    assert exact_z(np.array([3]), np.array([4]), np.array([0.2]))[0] == pytest.approx(
        NormalDist().inv_cdf(1 - tail)
    )
    # a tail below the smallest double: finite, large, and larger for the rarer event
    big = exact_z(np.array([300, 299]), np.array([300, 300]), np.array([0.01, 0.01]))
    assert np.isfinite(big).all() and big[0] > big[1] > 37


def test_guard_leaves_the_uniform_prior_and_balanced_shares_alone() -> None:
    counts = np.array([[14, 0, 0], [1, 0, 0], [0, 3, 2]])
    n = counts.sum(axis=1)
    assert guarded_cells(counts, n, None) is None
    assert guarded_cells(counts, n, np.full(3, 1 / 3)) is None
    z_uniform = z_from_counts(counts)[0]
    assert np.array_equal(z_uniform, z_from_counts(counts, np.full(3, 1 / 3))[0])
    # 14 of 14 rows at 1/3: the papers' normal z, (1 - 1/3) / sqrt(2/9 / 14) = 5.29
    assert z_uniform[0, 0] == pytest.approx((2 / 3) / math.sqrt(2 / 9 / 14))
    # a share below 1/L: only the cells of that label that favour it with n·p0 < 5
    mask = guarded_cells(counts, n, np.array([0.5, 0.4, 0.1]))
    assert mask is not None
    assert mask.tolist() == [[False, False, False], [False, False, False], [False, False, True]]


def test_one_row_label_has_no_significant_feature() -> None:
    from zdebias.stats.measure import measure

    records = _one_row_label()
    cfg = StatsSettings(features=["unigrams"], label_prior="empirical")
    report = measure(records, cfg, labels=LABELS).report
    assert report["n_significant_per_label"]["contradiction"] == 0
    top = report["top"]["contradiction"][0]
    assert top["feature"] in ("guitar@text", "plays@text") and top["n"] == 1
    assert top["z"] == pytest.approx(NormalDist().inv_cdf(1 - 1 / 300))  # 2.713, not 17.3
    info = report["exact_test"]
    # plays and guitar favour contradiction with 1/300 rows expected; nothing else does
    assert info["per_label"] == {"entailment": 0, "neutral": 0, "contradiction": 2}
    assert info["n_not_significant"] == 2  # √299 = 17.3 > z_critical by the approximation


def test_one_row_label_rejects_nothing_and_gives_no_batch_advice() -> None:
    records = _one_row_label()
    result = z_filter(
        records, ZFilterSettings(features=["unigrams"], label_prior="empirical"), labels=LABELS
    )
    s = result.summary
    assert s["n_significant_before"] == s["n_significant_after"] == 0
    assert not any("smaller --zfilter-batch-size" in w for w in s["warnings"])
    assert s["label_discarded_share"]["contradiction"] == 0.0
    assert all(r.label != "contradiction" for r in result.rejected)
    assert "exact test: 2 (feature, label) cells" in filter_text(s, Path("o"))


def test_one_row_label_does_not_vote_in_a_shortcut_split() -> None:
    from zdebias.stats.shortcut_split import split_records

    test = [Record(id=f"t{i}", label="entailment", text="plays guitar") for i in range(3)]
    split = split_records(
        _one_row_label(), test, features=["unigrams"], label_prior="empirical", labels=LABELS
    )
    assert split.summary["counts"] == {"aligned": 0, "conflicting": 0, "free": 3}
    assert split.summary["exact_test"]["n_not_significant"] == 2


def _hand_made() -> tuple[sp.csr_matrix, np.ndarray]:
    """Two labels, two features. Seed rows 0-39: f0 on rows 0-19 (all label 0: z 4.47), f1 on
    rows 20-29 (6 of label 0: z 0.63), rows 30-39 bare (label 1). Input: row 40 (f0, label
    0), row 41 (f1, label 0), row 42 (f1, label 1)."""
    x = np.zeros((43, 2), dtype=np.uint8)
    x[:20, 0] = 1
    x[20:30, 1] = 1
    x[40, 0] = x[41, 1] = x[42, 1] = 1
    y = np.array([0] * 26 + [1] * 14 + [0, 0, 1])
    return sp.csr_matrix(x), y


def test_min_z_critical_rejects_only_for_significant_features() -> None:
    x, y = _hand_made()
    common = dict(rows=np.array([40, 41, 42]), seed_rows=np.arange(40), shuffle_seed=None)
    paper = z_filter_matrix(x, y, 2, batch_size=3, **common)
    # the paper's floor 0: f0 (z 4.47) rejects row 40, f1 (z 0.63) row 41
    assert paper.rejected.tolist() == [40, 41] and paper.min_z == 0.0
    critical = z_filter_matrix(x, y, 2, batch_size=3, min_z="critical", **common)
    # z_critical over 2 features: Φ⁻¹(1 - 0.01/2) = 2.576; only f0 is above it
    assert critical.min_z == pytest.approx(NormalDist().inv_cdf(1 - 0.005))
    assert critical.rejected.tolist() == [40]
    assert critical.accepted.tolist() == [41, 42]
    z_c = z_critical(2)
    assert discards(y, ("a", "b"), paper, z_c)["n_rejected_below_critical"] == 1
    assert discards(y, ("a", "b"), critical, z_c)["n_rejected_below_critical"] == 0
    with pytest.raises(Exception, match="critical"):
        z_filter_matrix(x, y, 2, min_z="significant", **common)
    assert ZFilterSettings(min_z="critical").min_z == "critical"
    with pytest.raises(Exception, match="min_z"):
        ZFilterSettings(min_z="strict")


def test_discarded_shares_per_label_exact() -> None:
    y = np.array([0, 0, 1, 0, 1, 1, 1])
    arrays = FilterArrays(
        accepted=np.array([0, 1, 2]),
        rejected=np.array([3, 4, 5, 6]),
        rejected_by_rows=np.array([3, 4, 5, 5, 6]),
        rejected_by_features=np.array([0, 0, 0, 1, 1]),
        counts=np.zeros((2, 2), dtype=np.int64),
        n_batches=1,
        rejected_by_z=np.array([1.0, 5.0, 0.5, 2.0, 2.9]),
    )
    out = discards(y, ("a", "b"), arrays, 3.0)
    assert out["discarded_share"] == round(4 / 7, 4)
    assert out["label_discarded_share"] == {"a": round(1 / 3, 4), "b": 0.75}
    # row 4 had a feature at z 5.0 > 3.0; rows 3, 5 (0.5, 2.0) and 6 only below it
    assert out["n_rejected_below_critical"] == 3
    lines = discard_lines(
        {**out, "z_critical": 3.0, "n_rejected": 4, "min_z": 0.0, "exact_test": None}
    )
    assert lines[0] == "  discarded 57.1% of the input rows: a 33.3%, b 75.0%"
    assert lines[1].startswith("  3 of the 4 rejected rows were rejected only by features below")
    assert "--min-z critical" in lines[1]


def test_floor_rescue_by_hand() -> None:
    seen, kept = np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64)
    reject = np.array([True, True, True, True, False])
    labels = np.array([0, 0, 0, 0, 1])
    # label 0 at floor 0.5: row 1 (0 of 1 kept) rescued; row 2 (1 of 2) not; row 3 (1 of 3)
    # rescued; row 4 (2 of 4) not
    rescue = _floor_rescue(reject, labels, seen, kept, 0.5)
    assert rescue.tolist() == [True, False, True, False, False]
    assert seen.tolist() == [4, 1] and kept.tolist() == [2, 1]


def test_floor_keeps_each_label_at_its_share_and_the_warning_fires() -> None:
    # label 0 rows all carry f0 and label 1 rows f1: after the first batch both features
    # are biased and reject every later row of their label
    n = 200
    y = np.array([0, 1] * (n // 2))
    x = sp.csr_matrix(np.stack([y == 0, y == 1], axis=1).astype(np.uint8))
    plain = z_filter_matrix(x, y, 2, batch_size=20, shuffle_seed=None)
    assert plain.floored is None
    kept_share = np.bincount(y[plain.accepted], minlength=2) / np.bincount(y)
    assert kept_share.tolist() == [0.1, 0.1]  # the first batch of 20 only
    warnings = label_share_warnings(y, ("a", "b"), plain, None)
    assert warnings[0] == (
        "z-filtering kept 10 of the 100 a rows (10.0%), below --warn-label-share 0.25: "
        "--min-label-share 0.25 keeps at least that share of each label"
    )
    assert label_share_warnings(y, ("a", "b"), plain, 0.1) == []
    floored = z_filter_matrix(x, y, 2, batch_size=20, shuffle_seed=None, min_label_share=0.3)
    kept = np.bincount(y[floored.accepted], minlength=2)
    assert kept.tolist() == [30, 30]  # ceil(0.3 · 100): at least the floor, no more
    assert floored.floored is not None and len(floored.floored) == 40
    assert not set(floored.rejected_by_rows.tolist()) & set(floored.floored.tolist())
    assert sorted([*floored.accepted, *floored.rejected]) == list(range(n))
    assert label_share_warnings(y, ("a", "b"), floored, None) == []


def test_summary_and_text_tell_the_shares_and_the_warning() -> None:
    # "good" on every positive row, "bad" on every negative one: after the first batch (10
    # of 200 rows, 20 batches) both are biased and reject every later row of their label
    records = [
        Record(id=str(i), label=lab, text=f"{'good' if lab == 'pos' else 'bad'} w{i}")
        for i, lab in enumerate(["pos", "neg"] * 100)
    ]
    result = z_filter(records, features=["unigrams"], labels=("neg", "pos"), shuffle=False)
    s = result.summary
    assert (s["n_kept"], s["label_counts_after"]) == (10, {"neg": 5, "pos": 5})
    assert s["discarded_share"] == 0.95
    assert s["label_discarded_share"] == {"neg": 0.95, "pos": 0.95}
    # good / bad: 5 of 5 rows, z 0.5 / sqrt(0.25 / 5) = 2.24, below z_c over 202 features
    assert s["z_critical"] == pytest.approx(-NormalDist().inv_cdf(0.01 / 202))  # 3.89
    assert s["n_rejected_below_critical"] == 190
    assert s["label_share_warnings"][0].startswith("z-filtering kept 5 of the 100 neg rows (5.0%)")
    text = filter_text(s, Path("out"))
    assert "  discarded 95.0% of the input rows: neg 95.0%, pos 95.0%" in text
    assert "  warning: z-filtering kept 5 of the 100 pos rows (5.0%)" in text


def test_advice_under_min_z_critical_names_the_floor_not_the_batch() -> None:
    from zdebias.stats.zfilter import still_significant

    note = still_significant(33, 5.22, 1000, min_z=5.2177)
    assert note == (
        "33 features still significant after z-filtering (z > 5.22, batches of 1000): a "
        "feature rejects only once its z over the rows kept so far exceeds --min-z (5.22); a "
        "lower --min-z (0, the paper's) filters more"
    )
    assert "smaller --zfilter-batch-size" in str(still_significant(33, 5.22, 1000, min_z=0.0))


def test_floor_on_records_is_counted_and_named_in_the_warning() -> None:
    records = [
        Record(id=str(i), label=lab, text=f"{'good' if lab == 'pos' else 'bad'} w{i}")
        for i, lab in enumerate(["pos", "neg"] * 100)
    ]
    cfg = ZFilterSettings(features=["unigrams"], shuffle=False, min_label_share=0.3)
    result = z_filter(records, cfg, labels=("neg", "pos"))
    s = result.summary
    assert s["label_counts_after"] == {"neg": 30, "pos": 30}
    assert (s["n_kept_by_floor"], s["label_kept_by_floor"]) == (50, {"neg": 25, "pos": 25})
    assert s["min_label_share"] == 0.3 and s["label_share_warnings"] == []
    assert s["warnings"][0].endswith(
        "--min-label-share kept 50 rows the biased features rejected, and those features with them"
    )
    assert "  --min-label-share 0.3 kept 50 rows the biased features rejected (neg 25, pos 25)" in (
        filter_text(s, Path("o"))
    )
    assert {r.id for r in result.rejected}.isdisjoint(r.id for r in result.kept)


def test_filter_report_and_json_say_what_was_discarded(tmp_path: Path) -> None:
    import json

    from zdebias.data.writers import write_records
    from zdebias.report.results import write_result_report
    from zdebias.stats.execution.operations import filter_file
    from zdebias.stats.execution.source import FileInput

    records = [
        Record(id=str(i), label=lab, text=f"{'good' if lab == 'pos' else 'bad'} w{i}")
        for i, lab in enumerate(["pos", "neg"] * 100)
    ]
    data = tmp_path / "train.jsonl"
    write_records(records, data)
    cfg = ZFilterSettings(features=["unigrams"], shuffle=False, min_z="critical")
    filter_file(FileInput(str(data)), tmp_path / "f", cfg)
    summary = json.loads((tmp_path / "f" / "summary.json").read_text())
    # z_c over 202 features is 3.89: good / bad (z = sqrt(k) after k kept rows of their
    # label) pass it at 16 rows (sqrt(15) = 3.87), so the first four batches of 10 are kept
    assert (summary["min_z"], summary["n_rejected_below_critical"]) == ("critical", 0)
    assert summary["min_z_used"] == pytest.approx(-NormalDist().inv_cdf(0.01 / 202))
    assert summary["label_counts_after"] == {"negative": 20, "positive": 20}
    html = write_result_report(tmp_path / "f").read_text()
    notes = '<ul id="filter-notes"><li>discarded 80.0% of the input rows: negative 80.0%, '
    assert notes in html
    assert "rows removed only for significant features (--min-z critical: z &gt; 3.89)" in html


def _from_scratch(x, y, num_labels, order, k, batch, p0):
    """Algorithm 1 with every batch's z recomputed from the kept rows (z_from_counts: the
    exact test included), as the incremental filter must match."""
    dense = np.asarray(x.todense()) > 0
    kept: list[int] = []
    rejected = []
    for start in range(0, len(order), batch):
        biased: list[list[int]] = [[] for _ in range(num_labels)]
        if kept:
            counts = np.zeros((dense.shape[1], num_labels), dtype=np.int64)
            for r in kept:
                counts[dense[r], y[r]] += 1
            z, n, _ = z_from_counts(counts, p0)
            for label in range(num_labels):
                ranked = sorted(
                    (f for f in range(dense.shape[1]) if n[f] > 0 and z[f, label] > 0),
                    key=lambda f, label=label: (-z[f, label], f),
                )
                biased[label] = ranked[:k]
        new = []
        for r in order[start : start + batch]:
            if any(dense[r, f] for f in biased[y[r]]):
                rejected.append(int(r))
            else:
                new.append(int(r))
        kept.extend(new)
    return sorted(kept), sorted(rejected)


@pytest.mark.parametrize("seed", range(8))
def test_incremental_filter_matches_from_scratch_with_the_exact_test(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_rows, n_feat = 150, 25
    y = rng.choice(3, size=n_rows, p=[0.7, 0.25, 0.05])
    x = sp.csr_matrix((rng.random((n_rows, n_feat)) < 0.15).astype(np.uint8))
    got = z_filter_matrix(
        x, y, 3, batch_size=10, shuffle_seed=seed, top_k=3, label_prior="empirical"
    )
    order = np.random.default_rng(seed).permutation(n_rows)
    p0 = np.bincount(y, minlength=3) / n_rows
    want = _from_scratch(x, y, 3, order, 3, 10, p0)
    assert (got.accepted.tolist(), got.rejected.tolist()) == want
