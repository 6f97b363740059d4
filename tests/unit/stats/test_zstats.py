"""z-statistics against hand-computed values, top-k, the critical value, and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from zdebias.data.schema import Record
from zdebias.features.extract import extract_features
from zdebias.stats.zstats import (
    describe,
    label_counts,
    top_k,
    top_table,
    z_critical,
    z_statistics,
)

LABELS = ("entailment", "neutral", "contradiction")

# Six examples. Feature columns: 0 "sleeping" (rows 0,1,2,3), 1 "outside" (rows 4,5),
# 2 "<null>" (all). Labels: c, c, c, e, e, n.
FIXTURE = np.array(
    [[1, 0, 1], [1, 0, 1], [1, 0, 1], [1, 0, 1], [0, 1, 1], [0, 1, 1]], dtype=np.uint8
)
Y = np.array([2, 2, 2, 0, 0, 1])


def test_hand_computed_z() -> None:
    z, n, p = z_statistics(sp.csr_matrix(FIXTURE), Y, 3)
    assert n.tolist() == [4, 2, 6]
    # p0 = 1/3, sd(n) = sqrt((1/3)(2/3)/n) = sqrt(2)/(3 sqrt(n))
    # sleeping: p̂ = (1/4, 0, 3/4); z = (p̂ - 1/3) * 3 sqrt(4) / sqrt(2)
    expected = {
        (0, 0): -1 / (2 * math.sqrt(2)),  # (1/4 - 1/3) * 6 / sqrt 2 = -0.3535533905932738
        (0, 1): -math.sqrt(2),  # (0 - 1/3) * 6 / sqrt 2
        (0, 2): 5 / (2 * math.sqrt(2)),  # (3/4 - 1/3) * 6 / sqrt 2 = 1.7677669529663687
        (1, 0): 1 / 2,  # (1/2 - 1/3) * 3 sqrt 2 / sqrt 2
        (1, 1): 1 / 2,
        (1, 2): -1.0,
        (2, 0): 0.0,  # null: 2/6 each -> balanced -> 0
        (2, 1): -math.sqrt(3) / 2,  # (1/6 - 1/3) * 3 sqrt 6 / sqrt 2 = -0.8660254
        (2, 2): math.sqrt(3) / 2,  # (3/6 - 1/3) * 3 sqrt 3 = 0.8660254037844386
    }
    for (f, label), value in expected.items():
        assert z[f, label] == pytest.approx(value, abs=1e-9)
    assert z[0, 2] == pytest.approx(1.7677669529663687, abs=1e-9)
    assert p[0].tolist() == [0.25, 0.0, 0.75]
    assert p[1].tolist() == [0.5, 0.5, 0.0]
    assert label_counts(sp.csr_matrix(FIXTURE), Y, 3).tolist() == [[1, 0, 3], [1, 1, 0], [2, 1, 3]]


def test_hand_computed_z_from_records() -> None:
    recs = [
        Record("1", "contradiction", "A man.", "A man sleeping"),
        Record("2", "contradiction", "A dog.", "The dog sleeping"),
        Record("3", "contradiction", "A cat.", "A cat sleeping"),
        Record("4", "entailment", "A kid.", "Kid sleeping"),
        Record("5", "entailment", "A boy.", "A boy outside"),
        Record("6", "neutral", "A girl.", "A girl outside"),
    ]
    report = describe(recs, features=["unigrams", "null"], top=2)
    top = report["top"]["contradiction"]
    assert top[0]["feature"] == "sleeping@hypothesis"
    assert top[0]["z"] == pytest.approx(5 / (2 * math.sqrt(2)), abs=1e-9)
    assert (top[0]["n"], top[0]["p"]) == (4, 0.75)
    assert report["n_examples"] == 6 and report["labels"] == list(LABELS)
    assert report["label_counts"] == {"entailment": 2, "neutral": 1, "contradiction": 3}
    assert report["z_critical"] == pytest.approx(z_critical(report["n_features"]), abs=1e-12)
    assert report["n_significant"] == 0
    # sorted by z descending within each label
    for rows in report["top"].values():
        assert [r["z"] for r in rows] == sorted((r["z"] for r in rows), reverse=True)


def test_z_critical_matches_gardner_and_scipy() -> None:
    from scipy.stats import norm

    assert z_critical(28_000) == pytest.approx(4.9578, abs=1e-3)
    for m in (1, 10, 1000, 215_231):
        assert z_critical(m) == pytest.approx(norm.isf(0.01 / m), abs=1e-9)
    assert z_critical(100, alpha=0.05) == pytest.approx(norm.isf(0.0005), abs=1e-9)


def test_top_k_order_ties_and_filters() -> None:
    z = np.array([[1.0, 0.0], [3.0, 0.0], [3.0, 0.0], [2.0, 5.0], [-1.0, 0.5]])
    n = np.array([5, 5, 5, 5, 0])
    first, second = top_k(z, 3, n=n)
    assert first.tolist() == [1, 2, 3]  # tie 1 vs 2 broken by index
    assert second.tolist() == [3, 0, 1]  # row 4 (n=0) is never picked
    assert top_k(z, 2, n=n, min_z=2.5)[0].tolist() == [1, 2]
    assert top_k(z, 10, n=n, min_z=0)[1].tolist() == [3]
    table = top_table(["a", "b", "c", "d", "e"], ["x", "y"], z, n, np.zeros((5, 2)), 1)
    assert table == {
        "x": [{"feature": "b", "z": 3.0, "n": 5, "p": 0.0}],
        "y": [{"feature": "d", "z": 5.0, "n": 5, "p": 0.0}],
    }


def _random_records(rng: np.random.Generator, n: int, vocab: int) -> list[Record]:
    words = [f"w{i}" for i in range(vocab)]
    out = []
    for i in range(n):
        k = int(rng.integers(1, 6))
        hyp = " ".join(rng.choice(words, size=k))
        out.append(Record(f"r{i}", LABELS[i % 3], "some premise", hyp))
    return out


@settings(max_examples=15, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1))
def test_permuted_labels_give_small_z(seed: int) -> None:
    """Labels independent of the text: no feature should look like an artifact."""
    rng = np.random.default_rng(seed)
    recs = _random_records(rng, 600, 40)
    labels = [r.label for r in recs]
    rng.shuffle(labels)
    recs = [r.replace(label=lab) for r, lab in zip(recs, labels, strict=True)]
    fm = extract_features(recs, ["unigrams", "null"])
    y = np.array([LABELS.index(r.label) for r in recs])
    z, _, _ = z_statistics(fm.matrix, y, 3)
    # Bonferroni over every (feature, label) test at α = 0.001: fails ~0.1% of the time at most
    assert np.abs(z).max() < z_critical(z.size, alpha=0.001)
    assert abs(z[fm.index["<null>"]]).max() < 1e-9  # balanced labels: null z is exactly 0


@settings(max_examples=15, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), label=st.integers(0, 2), rate=st.floats(0.3, 0.9))
def test_planted_artifact_becomes_top_feature(seed: int, label: int, rate: float) -> None:
    rng = np.random.default_rng(seed)
    recs = _random_records(rng, 600, 40)
    planted = []
    for r in recs:
        if r.label == LABELS[label] and rng.random() < rate:
            r = r.replace(hypothesis=r.hypothesis + " zzplant")
        planted.append(r)
    fm = extract_features(planted, ["unigrams", "bigrams", "null"])
    y = np.array([LABELS.index(r.label) for r in planted])
    z, n, _ = z_statistics(fm.matrix, y, 3)
    best = top_k(z, 1, n=n)[label][0]
    assert fm.names[best] == "zzplant@hypothesis"


def test_label_counts_in_blocks_equal_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counting in blocks of rows (bounded memory) gives the counts of one pass."""
    from zdebias.stats import zstats

    rng = np.random.default_rng(3)
    m = sp.random(500, 40, density=0.2, format="csr", random_state=4)
    m.data[:] = 7  # values are ignored: presence only
    y = rng.integers(0, 3, 500)
    dense = (m.toarray() > 0).astype(np.int64)
    expected = np.stack([dense[y == label].sum(axis=0) for label in range(3)], axis=1)
    for block in (1, 37, 1 << 22):
        monkeypatch.setattr(zstats, "LABEL_COUNT_BLOCK", block)
        np.testing.assert_array_equal(zstats.label_counts(m, y, 3), expected)
