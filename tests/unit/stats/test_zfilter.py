"""z-filtering: equality with a from-scratch Algorithm 1, partitions, planted artifacts."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError
from zdebias.features.extract import extract_features
from zdebias.stats import zfilter
from zdebias.stats.zfilter import z_filter, z_filter_matrix
from zdebias.stats.zstats import z_from_counts, z_statistics

LABELS = ("entailment", "neutral", "contradiction")


def reference_filter(x, y, num_labels, order, seed_rows, k, batch, min_z=0.0):
    """Algorithm 1 written plainly: statistics of Z recomputed from scratch for every batch."""
    dense = np.asarray(x.todense()) > 0
    z_rows = list(seed_rows)
    accepted, rejected = [], {}
    for start in range(0, len(order), batch):
        biased = [[] for _ in range(num_labels)]
        if z_rows:
            counts = np.zeros((dense.shape[1], num_labels), dtype=np.int64)
            for r in z_rows:
                counts[dense[r], y[r]] += 1
            z, n, _ = z_from_counts(counts)
            for label in range(num_labels):
                ranked = sorted(
                    (f for f in range(dense.shape[1]) if n[f] > 0 and z[f, label] > min_z),
                    key=lambda f, label=label: (-z[f, label], f),
                )
                biased[label] = ranked[:k]
        new = []
        for r in order[start : start + batch]:
            hits = [f for f in biased[y[r]] if dense[r, f]]
            if hits:
                rejected[int(r)] = hits
            else:
                new.append(int(r))
        accepted.extend(new)
        z_rows.extend(new)
    return sorted(accepted), rejected


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**31 - 1),
    n_rows=st.integers(1, 120),
    n_feat=st.integers(1, 30),
    num_labels=st.integers(2, 4),
    k=st.integers(0, 6),
    batch=st.integers(1, 40),
    n_seed=st.integers(0, 30),
    density=st.floats(0.05, 0.6),
    small_pool=st.booleans(),
)
def test_matches_from_scratch_algorithm(
    seed, n_rows, n_feat, num_labels, k, batch, n_seed, density, small_pool
) -> None:
    if small_pool:  # a pool of k+1 candidates: rescans and tie fall-backs all the time
        with (
            mock.patch.object(zfilter, "TOPK_POOL_MIN", 1),
            mock.patch.object(zfilter, "TOPK_POOL_PER_K", 1),
        ):
            _check_against_reference(seed, n_rows, n_feat, num_labels, k, batch, n_seed, density)
    else:
        _check_against_reference(seed, n_rows, n_feat, num_labels, k, batch, n_seed, density)


def _check_against_reference(seed, n_rows, n_feat, num_labels, k, batch, n_seed, density):
    rng = np.random.default_rng(seed)
    total = n_rows + n_seed
    x = sp.csr_matrix((rng.random((total, n_feat)) < density).astype(np.uint8))
    y = rng.integers(0, num_labels, total)
    seed_rows = np.arange(n_seed)
    rows = np.arange(n_seed, total)
    out = z_filter_matrix(
        x,
        y,
        num_labels,
        rows=rows,
        seed_rows=seed_rows,
        top_k=k,
        batch_size=batch,
        shuffle_seed=seed % 7,
    )
    order = rows[np.random.default_rng(seed % 7).permutation(len(rows))]
    ref_acc, ref_rej = reference_filter(x, y, num_labels, order, list(seed_rows), k, batch)
    assert out.accepted.tolist() == ref_acc
    assert out.rejected.tolist() == sorted(ref_rej)
    assert out.rejected_by() == ref_rej  # same features, same (z-rank) order
    # partition of the candidate rows
    assert sorted([*out.accepted.tolist(), *out.rejected.tolist()]) == rows.tolist()
    # final counts are those of Z = seed + accepted
    z_final = np.concatenate([seed_rows, out.accepted]).astype(np.int64)
    expected = np.zeros((n_feat, num_labels), dtype=np.int64)
    dense = np.asarray(x.todense()) > 0
    for r in z_final:
        expected[dense[r], y[r]] += 1
    assert (out.counts == expected).all()


def test_large_pool_path_matches_reference() -> None:
    """Enough features that the candidate-pool top-k (not a full scan) is exercised."""
    rng = np.random.default_rng(3)
    n_rows, n_feat = 400, 1500
    x = sp.random(n_rows, n_feat, density=0.02, random_state=3, format="csr")
    x.data[:] = 1
    x = x.astype(np.uint8)
    y = rng.integers(0, 3, n_rows)
    ref_acc, ref_rej = reference_filter(x, y, 3, np.arange(n_rows), [], 20, 25)
    for pool in (256, 21):
        with (
            mock.patch.object(zfilter, "TOPK_POOL_MIN", pool),
            mock.patch.object(zfilter, "TOPK_POOL_PER_K", 1),
        ):
            out = z_filter_matrix(x, y, 3, top_k=20, batch_size=25, shuffle_seed=None)
        assert out.accepted.tolist() == ref_acc
        assert out.rejected_by() == ref_rej


def _records(
    rng: np.random.Generator,
    n: int,
    plant: str | None = None,
    rate: float = 0.0,
    other_rate: float = 0.0,
) -> list[Record]:
    words = [f"w{i}" for i in range(60)]
    out = []
    for i in range(n):
        label = LABELS[int(rng.integers(0, 3))]
        hyp = " ".join(rng.choice(words, size=int(rng.integers(2, 6))))
        if plant and rng.random() < (rate if label == "contradiction" else other_rate):
            hyp += f" {plant}"
        out.append(Record(f"id{i}", label, "a premise here", hyp, meta={"k": i}))
    return out


@settings(max_examples=10, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**31 - 1),
    batch=st.integers(10, 200),
    k=st.integers(1, 20),
    n_seed=st.integers(0, 50),
    shuffle=st.booleans(),
)
def test_records_partition_exactly(seed, batch, k, n_seed, shuffle) -> None:
    rng = np.random.default_rng(seed)
    recs = _records(rng, 300)
    seed_recs = [r.replace(id=f"seed{i}") for i, r in enumerate(_records(rng, n_seed))]
    res = z_filter(
        recs,
        seed_records=seed_recs,
        top_k=k,
        batch_size=batch,
        shuffle_seed=seed if shuffle else None,
        features=["unigrams", "null"],
    )
    ids = [r.id for r in res.accepted] + [r.id for r in res.rejected]
    assert sorted(ids) == sorted(r.id for r in recs)  # every input id exactly once
    assert [r.id for r in res.kept[:n_seed]] == [r.id for r in seed_recs]
    assert res.kept[n_seed:] == res.accepted
    s = res.summary
    assert (s["n_input"], s["n_seed"], s["n_kept"]) == (300, n_seed, n_seed + len(res.accepted))
    assert s["n_accepted"] + s["n_rejected"] == 300
    fm = res.features
    for r in res.rejected:
        row = next(i for i, x in enumerate(recs) if x.id == r.id) + n_seed
        assert r.meta["rejected_by"] and set(r.meta["rejected_by"]) <= set(fm.features_of(row))
        structured = r.meta["rejected_by_features"]  # the same features, as FeatureKey dicts
        assert [d["name"] for d in structured] == r.meta["rejected_by"]
        assert all(d == fm.keys[fm.index[d["name"]]].to_dict() for d in structured)
        assert r.meta["k"] == recs[row - n_seed].meta["k"]
        assert "rejected_by" not in recs[row - n_seed].meta  # the input is not modified
    # accepted keep their input order
    pos = {r.id: i for i, r in enumerate(recs)}
    assert [pos[r.id] for r in res.accepted] == sorted(pos[r.id] for r in res.accepted)


def test_first_batch_of_unseeded_run_is_accepted_whole() -> None:
    rng = np.random.default_rng(0)
    recs = _records(rng, 250, plant="zzplant", rate=0.9)
    res = z_filter(recs, batch_size=100, features=["unigrams", "null"], shuffle_seed=None)
    assert all(r.id in {a.id for a in res.accepted} for r in recs[:100])
    assert all(int(r.id[2:]) >= 100 for r in res.rejected)
    # with a seed, the same first batch is filtered against the seed's statistics
    seed = [r.replace(id=f"s{i}") for i, r in enumerate(_records(rng, 300, "zzplant", 0.9))]
    res2 = z_filter(
        recs, seed_records=seed, batch_size=100, features=["unigrams", "null"], shuffle_seed=None
    )
    assert any(int(r.id[2:]) < 100 for r in res2.rejected)
    assert any("zzplant@hypothesis" in r.meta["rejected_by"] for r in res2.rejected)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), batch=st.integers(20, 100))
def test_planted_artifact_is_top_then_gone(seed: int, batch: int) -> None:
    rng = np.random.default_rng(seed)
    recs = _records(rng, 3000, plant="zzplant", rate=0.6, other_rate=0.1)
    res = z_filter(recs, batch_size=batch, features=["unigrams", "null"], top_k=5)
    s = res.summary
    assert s["top_z_before"]["contradiction"]["feature"] == "zzplant@hypothesis"
    assert s["top_z_before"]["contradiction"]["z"] > 15
    fm = res.features
    col = fm.index["zzplant@hypothesis"]
    z_after = z_from_counts(res.arrays.counts)[0]
    assert z_after[col, 2] < s["z_critical"]  # no longer a significant artifact
    assert s["top_z_after"]["contradiction"]["z"] < s["z_critical"]
    assert any("zzplant@hypothesis" in r.meta["rejected_by"] for r in res.rejected)


def test_summary_before_after_and_errors() -> None:
    rng = np.random.default_rng(1)
    recs = _records(rng, 400, plant="zzplant", rate=0.7)
    res = z_filter(recs, batch_size=50, features=["unigrams", "null"])
    s = res.summary
    fm = res.features
    y = np.array([LABELS.index(r.label) for r in recs])
    z, n, _ = z_statistics(fm.matrix, y, 3)
    top = s["top_z_before"]["contradiction"]
    j = fm.index[top["feature"]]
    assert top["z"] == pytest.approx(z[j, 2], abs=1e-12) and top["n"] == n[j]
    assert s["label_counts_before"] == {name: int((y == i).sum()) for i, name in enumerate(LABELS)}
    assert sum(s["label_counts_after"].values()) == s["n_kept"]
    assert s["biased_k"] == 20 and s["zfilter_batch_size"] == 50 and s["seed"] == 0
    assert s["shuffle"] is True and s["zfilter_batch_size_rule"] == "given"
    for name, count in s["rejections_by_feature"].items():
        assert count == sum(name in r.meta["rejected_by"] for r in res.rejected)
    with pytest.raises(ConfigError, match="batch_size"):
        z_filter(recs, batch_size=0, features=["null"])
    with pytest.raises(DataError, match="not one of"):
        z_filter([Record("x", "maybe", "p", "h")], labels=LABELS, features=["null"])
    empty = z_filter([], features=["null"])
    assert (empty.kept, empty.rejected, empty.summary["n_input"]) == ([], [], 0)


def test_same_seed_same_result_different_seed_different_order() -> None:
    rng = np.random.default_rng(2)
    recs = _records(rng, 500, plant="zzplant", rate=0.6)
    a = z_filter(recs, batch_size=50, features=["unigrams", "null"], shuffle_seed=5)
    b = z_filter(recs, batch_size=50, features=["unigrams", "null"], shuffle_seed=5)
    c = z_filter(recs, batch_size=50, features=["unigrams", "null"], shuffle_seed=6)
    assert [r.id for r in a.kept] == [r.id for r in b.kept]
    assert [r.id for r in a.kept] != [r.id for r in c.kept]


def test_precomputed_feature_matrix() -> None:
    rng = np.random.default_rng(4)
    recs = _records(rng, 200)
    fm = extract_features(recs, ["unigrams", "null"])
    a = z_filter(recs, features=fm, batch_size=40)
    b = z_filter(recs, features=["unigrams", "null"], batch_size=40)
    assert [r.id for r in a.kept] == [r.id for r in b.kept]
    with pytest.raises(ConfigError, match="rows"):
        z_filter(recs[:10], features=fm)


@pytest.mark.parametrize(
    ("n_rows", "given", "expected"),
    [
        (0, None, 1),
        (1, None, 1),
        (20, None, 1),
        (21, None, 2),
        (300, None, 15),
        (872, None, 44),  # sst2 dev
        (2_399, None, 120),  # snli_20k dev
        (19_980, None, 999),
        (19_981, None, 1_000),
        (19_993, None, 1_000),  # snli_20k train: the paper's 1,000
        (10_000_000, None, 1_000),
        (872, 1_000, 1_000),  # given: as given
        (5, 7, 7),
    ],
)
def test_batch_size_scales_with_the_rows_to_filter(n_rows: int, given: int, expected: int) -> None:
    from zdebias.stats.settings import scaled_batch_size

    assert scaled_batch_size(n_rows, given) == expected


def test_default_batch_is_scaled_to_the_candidate_rows_not_the_seed() -> None:
    rng = np.random.default_rng(0)
    x = sp.csr_matrix(rng.random((500, 12)) < 0.3)
    y = rng.integers(0, 3, 500)
    alone = z_filter_matrix(x, y, 3)
    assert (alone.batch_size, alone.n_batches) == (25, 20)
    seeded = z_filter_matrix(x, y, 3, rows=np.arange(100, 500), seed_rows=np.arange(100))
    assert (seeded.batch_size, seeded.n_batches) == (20, 20)
    given = z_filter_matrix(x, y, 3, batch_size=1000)
    assert (given.batch_size, given.n_batches) == (1000, 1) and len(given.rejected) == 0


def test_the_still_significant_warning_says_what_filters_more() -> None:
    from zdebias.stats.zfilter import still_significant

    assert still_significant(0, 5.2, 1000) is None
    assert still_significant(1, 5.219, 1000) == (
        "1 feature still significant after z-filtering (z > 5.22, batches of 1000): "
        "a smaller --zfilter-batch-size filters more finely"
    )
    assert still_significant(3, 4.0, 1, seeded=True) == (
        "3 features still significant after z-filtering (z > 4.00, seed data included, "
        "batches of 1): a larger --biased-k filters more"
    )


def test_the_summary_says_the_seed_changes_how_many_rows_are_kept(tmp_path) -> None:
    """Issue 39.6: 543 vs 608 kept on the same data under two seeds surprised users; the
    summary (JSON and text) says the order is seeded and changes the count."""
    from zdebias.report.text import filter_text

    rng = np.random.default_rng(1)
    recs = _records(rng, 400, plant="zzplant", rate=0.7)
    kept = {}
    for seed in (0, 1):
        res = z_filter(recs, batch_size=50, features=["unigrams", "null"], seed=seed)
        kept[seed] = res.summary["n_kept"]
        assert res.summary["visiting_order"] == (
            f"seeded random order (--seed {seed}): each batch is judged by the rows kept "
            "before it, so another seed keeps another number of rows"
        )
        text = filter_text({**res.summary, "read": {}}, tmp_path).splitlines()
        assert (
            f"  rows visited in a seeded random order (--seed {seed}): another seed keeps "
            "another number of rows"
        ) in text
    assert kept[0] != kept[1]  # what the note is about
    plain = z_filter(recs, batch_size=50, features=["unigrams", "null"], shuffle=False).summary
    assert plain["visiting_order"].startswith("file order (--no-shuffle)")
    assert "seeded random order" not in filter_text(plain, tmp_path)
