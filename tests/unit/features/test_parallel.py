"""Feature extraction over several processes gives exactly what one process gives."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from zdebias.data.readers import read_records
from zdebias.data.schema import Record
from zdebias.features.extract import extract_features
from zdebias.features.hypothesis_only import MultinomialNB
from zdebias.features.matrix import FeatureMatrix
from zdebias.features.parallel import resolve_num_proc
from zdebias.stats.settings import ZFilterSettings
from zdebias.stats.zfilter import z_filter


def _identical(a: FeatureMatrix, b: FeatureMatrix) -> None:
    assert a.names == b.names
    assert a.keys == b.keys
    assert a.matrix.shape == b.matrix.shape
    assert a.matrix.dtype == b.matrix.dtype == np.uint8
    for part in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(a.matrix, part), getattr(b.matrix, part)), part


def last_word(record: Record) -> list[str]:
    """A per-record user feature whose names appear in a data-dependent order."""
    words = record.hypothesis.split()
    return [f"last={words[-1]}"] if len(words) % 3 else []


@pytest.fixture
def synthetic() -> list[Record]:
    rng = np.random.default_rng(7)
    vocab = ["a", "man", "dog", "is", "not", "sleeping", "outside", "Über", "can't", "two"]
    labels = ["entailment", "neutral", "contradiction"]
    out = []
    for i in range(601):
        p = " ".join(rng.choice(vocab, size=rng.integers(1, 9)))
        h = " ".join(rng.choice(vocab, size=rng.integers(1, 6)))
        out.append(Record(f"s{i}", labels[int(rng.integers(3))], p, h))
    return out


def test_synthetic_any_num_proc_same_output(synthetic: list[Record]) -> None:
    sys.modules[__name__].last_word = last_word  # importable by path in the workers
    names = [f"{__name__}:last_word", "ngrams", "hypo-len", "lex-overlap", "hypo-only", "null"]
    one = extract_features(synthetic, names, ngram_range=(1, 3), num_proc=1)
    assert one.n_features > 100
    for n in (2, 7):
        _identical(one, extract_features(synthetic, names, ngram_range=(1, 3), num_proc=n))


def test_real_snli_parallel_filter_same_as_one_process(data_dir: Path) -> None:
    records = read_records(data_dir / "snli_20k" / "train.jsonl")
    one = z_filter(records, ZFilterSettings(num_proc=1))
    two = z_filter(records, ZFilterSettings(num_proc=2))
    _identical(one.features, two.features)
    assert len(one.kept) == len(two.kept) == 7_668  # README: the default filter keeps 7,668
    assert [r.id for r in one.kept] == [r.id for r in two.kept]
    assert [r.id for r in one.rejected] == [r.id for r in two.rejected]
    assert [r.meta for r in one.rejected] == [r.meta for r in two.rejected]
    assert one.summary == two.summary


def test_resolve_num_proc() -> None:
    assert resolve_num_proc(None, 10**6) == 1
    assert resolve_num_proc(4, 3) == 3
    assert resolve_num_proc(0, 10**6) >= 1


def test_naive_bayes_matches_scikit_learn() -> None:
    from sklearn.naive_bayes import MultinomialNB as Reference

    rng = np.random.default_rng(0)
    x = sp.random(300, 50, density=0.1, format="csr", random_state=1, dtype=np.float32)
    x.data[:] = 1
    y = rng.integers(0, 3, 300)
    ours = MultinomialNB(alpha=1.0).fit(x[:200], y[:200])
    ref = Reference(alpha=1.0).fit(x[:200], y[:200])
    assert np.array_equal(ours.classes_, ref.classes_)
    assert np.array_equal(ours.predict_proba(x[200:]), ref.predict_proba(x[200:]))


def test_a_bad_record_fails_the_same_in_a_worker(synthetic: list[Record]) -> None:
    from zdebias.errors import DataError

    bad = [*synthetic[:400], Record("bad", "neutral", "A man.", None), *synthetic[400:]]
    for n in (1, 2):
        with pytest.raises(DataError, match="record 'bad' has no hypothesis text"):
            extract_features(bad, ["ngrams", "null"], num_proc=n)


def test_hypothesis_ngrams_sent_apart_and_seeded_filter(synthetic: list[Record]) -> None:
    # n-grams of the premise only: the hypothesis-only model's n-grams come separately
    names = ["ngrams", "hypo-only", "null"]
    one = extract_features(synthetic, names, ngram_fields=["premise"], num_proc=1)
    _identical(one, extract_features(synthetic, names, ngram_fields=["premise"], num_proc=3))
    # conditional z-filtering: the hypothesis-only model fits on the seed rows alone
    seed, rest = synthetic[:200], synthetic[200:]
    a = z_filter(rest, ZFilterSettings(num_proc=1, zfilter_batch_size=50), seed_records=seed)
    b = z_filter(rest, ZFilterSettings(num_proc=2, zfilter_batch_size=50), seed_records=seed)
    assert [r.id for r in a.kept] == [r.id for r in b.kept]
    assert [r.meta for r in a.rejected] == [r.meta for r in b.rejected]
    assert a.summary == b.summary
    assert 200 < len(a.kept) < 601


def test_parallel_jsonl_writer_same_bytes(
    synthetic: list[Record], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zdebias.data import writers

    monkeypatch.setattr(writers, "JSONL_TASK", 100)  # 601 records: 7 tasks
    records = [
        Record(r.id, r.label, r.premise, r.hypothesis, None, {"i": i, "é": [i]})
        for i, r in enumerate(synthetic)
    ]
    assert writers.write_jsonl(records, tmp_path / "one.jsonl") == 601
    assert writers.write_jsonl(records, tmp_path / "three.jsonl", num_proc=3) == 601
    one = (tmp_path / "one.jsonl").read_bytes()
    assert one == (tmp_path / "three.jsonl").read_bytes()
    assert one.count(b"\n") == 601 and "é".encode() in one


def test_hstack_in_place_equals_scipy(monkeypatch: pytest.MonkeyPatch) -> None:
    from zdebias.features import matrix

    rng = np.random.default_rng(0)
    shapes = [(57, 5), (57, 0), (57, 40), (57, 1), (57, 13)]
    blocks = [
        sp.random(n, m, density=0.3, format="csr", random_state=rng, dtype=np.float64)
        for n, m in shapes
    ]
    for b in blocks:
        b.data[:] = rng.integers(1, 4, size=len(b.data))  # values are copied, not set to 1
    expected = sp.hstack(blocks, format="csr", dtype=np.uint8)
    monkeypatch.setattr(matrix, "HSTACK_ROWS", 10)  # several row chunks per block
    given = list(blocks)
    got = matrix._hstack(given, 57)
    assert given == []  # emptied as it went
    assert got.shape == expected.shape and got.dtype == np.uint8
    assert np.array_equal(got.indptr, expected.indptr)
    assert np.array_equal(got.indices, expected.indices)
    assert np.array_equal(got.data, expected.data)


def test_hstack_row_parts_equal_scipy() -> None:
    """Blocks given as row parts (as the chunks return them) beside whole blocks: the same
    matrix as scipy's hstack of the stacked blocks; the parts are let go as copied."""
    from zdebias.features import matrix

    rng = np.random.default_rng(1)
    cuts = [0, 7, 7, 30, 57]  # an empty part too

    def rand(n: int, m: int) -> sp.csr_matrix:
        b = sp.random(n, m, density=0.3, format="csr", random_state=rng, dtype=np.float64)
        b.data[:] = rng.integers(1, 4, size=len(b.data))
        return b

    whole = [rand(57, 6), rand(57, 3)]
    parted = [[rand(b - a, w) for a, b in itertools.pairwise(cuts)] for w in (11, 0, 4)]
    expected = sp.hstack(
        [
            sp.vstack(parted[0]),
            whole[0],
            sp.vstack(parted[1]),
            sp.vstack(parted[2]),
            whole[1],
        ],
        format="csr",
        dtype=np.uint8,
    )
    rows = [matrix.RowParts(list(p), w) for p, w in zip(parted, (11, 0, 4), strict=True)]
    assert rows[0].shape == (57, 11) and rows[0].bounds() == cuts
    given = [rows[0], whole[0], rows[1], rows[2], whole[1]]
    got = matrix._hstack(given, 57)
    assert given == [] and rows[0].parts == [None] * 4
    assert got.shape == expected.shape == (57, 24)
    assert np.array_equal(got.indptr, expected.indptr)
    assert np.array_equal(got.indices, expected.indices)
    assert np.array_equal(got.data, expected.data)
