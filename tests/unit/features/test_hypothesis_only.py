"""The hypothesis-only feature: meta predictions, a trained model folder, cross-fitting."""

from __future__ import annotations

import random

import numpy as np
import pytest

from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError
from zdebias.features.extract import extract_features
from zdebias.features.hypothesis_only import cross_fitted_predictions, sgd_epochs

LABELS = ("entailment", "neutral", "contradiction")


def _records(n: int, seed: int = 0) -> list[Record]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = LABELS[i % 3]
        # every hypothesis is one unique nonsense word: nothing generalises across examples
        out.append(Record(f"r{i}", label, "a premise", f"w{rng.random():.12f}x{i}"))
    return out


def test_meta_predictions_come_first() -> None:
    recs = [
        Record("a", "entailment", "p", "h", meta={"hypo_only_pred": "contradiction"}),
        Record("b", "neutral", "p", "h", meta={"hypo_only_pred": 1}),
        Record("c", "contradiction", "p", "h", meta={"hypo_only_pred": "contradiction"}),
    ]
    fm = extract_features(recs, ["hypo-only"], labels=LABELS)
    assert [fm.features_of(i) for i in range(3)] == [
        ["hypo-only-pred=contradiction"],
        ["hypo-only-pred=neutral"],
        ["hypo-only-pred=contradiction"],
    ]
    bad = [Record("a", "entailment", "p", "h", meta={"hypo_only_pred": "maybe"})]
    with pytest.raises(DataError, match="hypo_only_pred 'maybe'"):
        extract_features(bad, ["hypo-only"], labels=LABELS)


def test_trained_model_folder_is_used(monkeypatch) -> None:
    from zdebias.classify import predict

    class Fake:
        labels = ("contradiction", "entailment", "neutral")  # a different label order
        input = "hypothesis-only"

    seen = {}

    def fake_proba(clf, records, batch_size=64, progress=False):
        seen["ids"] = [r.id for r in records]
        return np.array([[0.1, 0.7, 0.2], [0.8, 0.1, 0.1]])

    monkeypatch.setattr(predict, "load_classifier", lambda ref: Fake())
    monkeypatch.setattr(predict, "predict_proba", fake_proba)
    recs = [
        Record("a", "entailment", "p", "h1"),
        Record("b", "neutral", "p", "h2", meta={"hypo_only_pred": "neutral"}),
        Record("c", "neutral", "p", "h3"),
    ]
    from zdebias.classify.hypo_only import with_hypothesis_only_predictions

    annotated = with_hypothesis_only_predictions(recs, "some/dir", LABELS)
    fm = extract_features(annotated, ["hypo-only"], labels=LABELS, hypo_only_model="some/dir")
    assert seen["ids"] == ["a", "c"]  # the meta prediction wins for b
    assert [fm.features_of(i) for i in range(3)] == [
        ["hypo-only-pred=entailment"],
        ["hypo-only-pred=neutral"],
        ["hypo-only-pred=contradiction"],
    ]
    Fake.input = "pair"
    with pytest.raises(ConfigError, match="hypothesis-only classifier is needed"):
        with_hypothesis_only_predictions(recs, "some/dir", LABELS)
    # the feature layer never loads a model: without predictions it says where they come from
    with pytest.raises(ConfigError, match="with_hypothesis_only_predictions"):
        extract_features(recs, ["hypo-only"], labels=LABELS, hypo_only_model="some/dir")
    assert recs[0].meta == {}  # the input records are not mutated


@pytest.mark.parametrize("classifier", ["nb", "logreg"])
def test_out_of_fold_predictions_do_not_leak_labels(classifier: str) -> None:
    # Unique hypotheses: a model predicting its own training rows would be ~100% right;
    # out-of-fold it can only guess (about one in three).
    recs = _records(300)
    fm = extract_features(recs, ["hypo-only"], labels=LABELS, hypo_only_classifier=classifier)
    y = np.array([LABELS.index(r.label) for r in recs])
    pred = np.array([LABELS.index(fm.features_of(i)[0].split("=")[1]) for i in range(300)])
    assert (pred == y).mean() < 0.45


def test_cross_fitting_learns_a_real_signal_and_predicts_unfit_rows() -> None:
    rng = np.random.default_rng(0)
    n = 600
    y = np.arange(n) % 3
    # feature j = 3*label + noise column: a learnable signal
    cols = np.where(rng.random(n) < 0.8, y, rng.integers(0, 3, n))
    import scipy.sparse as sp

    x = sp.csr_matrix((np.ones(n), (np.arange(n), cols)), shape=(n, 3))
    fit = np.arange(400)
    pred = cross_fitted_predictions(x, y, fit, num_labels=3, folds=5, seed=0)
    assert (pred[:400] == y[:400]).mean() > 0.75
    assert (pred[400:] == cols[400:]).all()  # unfit rows: fold-averaged model, follows the signal
    assert sgd_epochs(16_000) == 8 and sgd_epochs(800_000) == 2
    with pytest.raises(ConfigError, match="unknown hypo_only_classifier"):
        cross_fitted_predictions(x, y, fit, num_labels=3, classifier="svm")


def test_default_feature_is_deterministic_and_named_by_label() -> None:
    recs = [
        Record(f"r{i}", LABELS[i % 3], "a man", ["yes", "maybe", "no"][i % 3] + " it is")
        for i in range(60)
    ]
    a = extract_features(recs, ["hypo-only"], labels=LABELS)
    b = extract_features(recs, ["hypo-only"], labels=LABELS)
    assert a.names == [f"hypo-only-pred={name}" for name in LABELS]
    assert (a.matrix != b.matrix).nnz == 0
    # the words give the label away, so out-of-fold predictions are right
    assert all(a.features_of(i) == [f"hypo-only-pred={LABELS[i % 3]}"] for i in range(60))


def test_rows_outside_the_fit_do_not_change_the_fit_rows_predictions() -> None:
    # Naive Bayes smooths over every column it is given: columns that only unfit rows use
    # (n-grams of generated data) must be left out, or they shift the fit rows' predictions.
    import scipy.sparse as sp

    rng = np.random.default_rng(1)
    n, n_extra = 300, 200
    y = np.concatenate([np.arange(n) % 3, np.zeros(n_extra, dtype=np.int64)])
    known = sp.random(n, 40, density=0.2, random_state=2, format="csr") * 3
    known.data = np.ceil(known.data)
    alone = cross_fitted_predictions(known, y[:n], np.arange(n), num_labels=3, seed=0)
    novel = sp.csr_matrix(rng.integers(0, 3, (n_extra, 400)).astype(np.float64))
    x = sp.vstack(
        [
            sp.hstack([known, sp.csr_matrix((n, 400))]),
            sp.hstack([sp.csr_matrix((n_extra, 40)), novel]),
        ]
    )
    both = cross_fitted_predictions(x.tocsr(), y, np.arange(n), num_labels=3, seed=0)
    assert (both[:n] == alone).all()


@pytest.mark.parametrize(("fit_every", "folds", "seed"), [(1, 5, 0), (3, 3, 7), (2, 2, 1)])
def test_nb_on_distinct_texts_equals_nb_on_records(fit_every: int, folds: int, seed: int) -> None:
    """cross_fitted_nb (one row per distinct hypothesis, counts summed per fold) predicts
    exactly what the per-record naive Bayes predicts, for fit subsets too."""
    import scipy.sparse as sp

    from zdebias.features.context import FeatureContext
    from zdebias.features.hypothesis_only import cross_fitted_nb
    from zdebias.features.ngrams import distinct_ngram_block, ngram_block

    rng = random.Random(seed)
    words = ["a", "dog", "cat", "sleeps", "runs", "not", "nobody", "big", "small", "outside"]
    hyps = [" ".join(rng.choices(words, k=rng.randint(1, 5))) for _ in range(60)]
    recs = [
        Record(f"r{i}", LABELS[rng.randrange(3)], "p", hyps[rng.randrange(len(hyps))])
        for i in range(600)
    ]
    ctx = FeatureContext(recs, {}, labels=LABELS)
    y = np.array([LABELS.index(r.label) for r in recs])
    (uni, inverse), (bi, inverse2) = (distinct_ngram_block(ctx, "hypothesis", n) for n in (1, 2))
    assert inverse is inverse2 and uni.shape[0] < len(recs)  # texts repeat: rows are distinct
    x_distinct = sp.hstack([uni, bi], format="csr", dtype=np.float32)
    x = sp.hstack(
        [ngram_block(ctx, "hypothesis", 1)[0], ngram_block(ctx, "hypothesis", 2)[0]],
        format="csr",
        dtype=np.float32,
    )
    fit = np.arange(0, len(recs), fit_every)
    expected = cross_fitted_predictions(x, y, fit, num_labels=3, folds=folds, seed=seed)
    got = cross_fitted_nb(x_distinct, inverse, y, fit, num_labels=3, folds=folds, seed=seed)
    np.testing.assert_array_equal(got, expected)
    assert len(set(expected.tolist())) == 3  # not a degenerate all-one-label case


@pytest.mark.parametrize("classifier", ["nb", "logreg"])
def test_one_record_is_predicted_its_own_label(classifier: str) -> None:
    """One record (what a z-filter with small batches may keep of a tiny file): no fold has
    a training record, so the feature predicts the record's label instead of failing."""
    recs = [Record("a", "neutral", "A man sleeps.", "A person rests.")]
    fm = extract_features(recs, ["hypo-only"], labels=LABELS, hypo_only_classifier=classifier)
    assert fm.features_of(0) == ["hypo-only-pred=neutral"]
