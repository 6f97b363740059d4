"""AFLite on arrays and records (``zdebias.stats.aflite``): a planted artifact goes first,
the batched models equal one-at-a-time training, runs are seeded, rows are never lost."""

from __future__ import annotations

import numpy as np
import pytest

from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.stats.aflite import aflite_arrays, aflite_filter, predictability, train_models
from zdebias.stats.settings import AfliteSettings, scaled_aflite

LABELS = ("entailment", "neutral", "contradiction")


def planted(
    seed: int = 0, rows: int = 600, dim: int = 16
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Embeddings where a third of the rows (the planted ones) carry their label in one of
    three dimensions (3.0 in dimension y); every other value is noise, the three label
    dimensions 0 for the other rows. Returns x, y and the planted mask."""
    rng = np.random.default_rng(seed)
    y = np.arange(rows) % 3
    x = rng.normal(size=(rows, dim))
    x[:, :3] = 0.0
    chosen = rng.permutation(rows)[: rows // 3]
    x[chosen, y[chosen]] = 3.0
    mask = np.zeros(rows, dtype=bool)
    mask[chosen] = True
    return x, y, mask


def _run(x: np.ndarray, y: np.ndarray, seed: int = 0, **over: object) -> object:
    sizes = dict(zip(("m", "k", "target"), scaled_aflite(len(y), AfliteSettings()), strict=True))
    options = {"n": 64, "tau": 0.75, "seed": seed, **sizes, **over}
    return aflite_arrays(x, y, 3, **options)  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_planted_rows_go_first() -> None:
    x, y, mask = planted()
    out = _run(x, y)
    # the scaled defaults on 600 rows: m = 150, k = 12, target = 300
    assert [r["m"] for r in out.rounds][:1] == [150]
    first = out.removed_in == 1
    assert first.sum() == 12 and mask[first].all()  # round 1 removes 12 rows, all planted
    assert out.rounds[0]["at_or_above_tau"] == 200  # exactly the planted rows reach τ
    gone = out.removed_in > 0
    assert gone[mask].mean() >= 0.95  # 199 of 200 on this seed
    assert gone[~mask].mean() <= 0.03  # 4 of 400
    assert out.stopped.startswith("fewer than k = 12")
    kept = ~gone
    assert np.isnan(out.score).sum() == 0
    assert (out.score[kept] < 0.75).all() or out.rounds[-1]["removed"] < 12


def test_the_batched_models_are_the_models_trained_one_at_a_time() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(90, 5)).astype(np.float32)
    y = rng.integers(0, 3, 90)
    train = rng.random((4, 90)) < 0.5
    w, b = train_models(x, y, train, 3, steps=50, l2=0.01)
    for j in range(4):
        # the same model alone: its rows only, the same step size (the whole's bound)
        wj, bj = train_models(x, y, train[j : j + 1], 3, steps=50, l2=0.01)
        np.testing.assert_allclose(w[:, j], wj[:, 0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(b[j], bj[0], rtol=1e-4, atol=1e-5)
    scores = predictability(x, y, train, 3, steps=50, l2=0.01)
    logits = np.einsum("rd,dmc->rmc", x, w) + b
    right = logits.argmax(axis=2) == y[:, None]
    held = ~train.T
    n_held = held.sum(axis=1)
    expected = (right & held).sum(axis=1) / np.maximum(n_held, 1)
    np.testing.assert_allclose(scores, np.where(n_held > 0, expected, np.nan))


def test_training_fits_a_separable_problem() -> None:
    x, y, _ = planted(rows=300)
    everyone = np.ones((1, 300), dtype=bool)
    x = (x - x.mean(axis=0)).astype(np.float32)
    w, b = train_models(x / np.sqrt((x**2).sum(axis=1).mean()), y, everyone, 3, steps=200, l2=1e-3)
    pred = (x / np.sqrt((x**2).sum(axis=1).mean()) @ w[:, 0] + b[0]).argmax(axis=1)
    assert (pred == y).mean() > 0.6  # 100 planted rows right, the rest by chance and noise


def _records(y: np.ndarray) -> list[Record]:
    return [
        Record(id=f"r{i}", premise="p", hypothesis=f"h {i}", label=LABELS[int(v)])
        for i, v in enumerate(y)
    ]


def test_records_partition_and_same_seed_same_rows() -> None:
    x, y, _ = planted(rows=300)
    records = _records(y)
    one = aflite_filter(records, embeddings=x, labels=LABELS, aflite_n=8)
    two = aflite_filter(records, embeddings=x, labels=LABELS, aflite_n=8)
    ids = sorted(r.id for r in one.kept) + sorted(r.id for r in one.rejected)
    assert sorted(ids) == sorted(r.id for r in records) and len(ids) == 300
    assert [r.id for r in one.kept] == [r.id for r in two.kept]
    assert [r.to_dict() for r in one.rejected] == [r.to_dict() for r in two.rejected]
    other = aflite_filter(records, embeddings=x, labels=LABELS, aflite_n=8, seed=1)
    assert other.summary["seed"] == 1 and other.summary["n_input"] == 300
    s = one.summary
    assert s["method"] == "aflite" and s["n_kept"] + s["n_rejected"] == 300
    assert (s["aflite_m"], s["aflite_k"], s["aflite_target"]) == (75, 6, 150)
    assert s["aflite_rule"]["aflite_m"] == "min(5620, floor(n_input / 4))"
    assert sum(r["removed"] for r in s["rounds"]) == s["n_rejected"]
    assert {tuple(r.meta["rejected_by"]) for r in one.rejected} == {("aflite",)}
    assert min(r.meta["aflite_round"] for r in one.rejected) == 1
    assert all(r.meta["aflite_score"] >= 0.75 for r in one.rejected)
    assert "aflite_score" in one.kept[0].meta


def test_given_sizes_are_used_and_recorded() -> None:
    x, y, _ = planted(rows=120)
    out = aflite_filter(
        _records(y),
        embeddings=x,
        labels=LABELS,
        aflite_n=8,
        aflite_m=30,
        aflite_k=5,
        aflite_target=100,
    )
    s = out.summary
    assert (s["aflite_m"], s["aflite_k"], s["aflite_target"]) == (30, 5, 100)
    assert s["aflite_rule"] == {"aflite_m": "given", "aflite_k": "given", "aflite_target": "given"}
    assert s["n_kept"] >= 100


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"aflite_tau": 1.5}, "aflite_tau"),
        ({"aflite_tau": 0}, "aflite_tau"),
        ({"aflite_k": 0}, "aflite_k"),
        ({"aflite_m": 60}, "aflite_m (--aflite-m): 60 must be below the 60 rows"),
    ],
)
def test_bad_settings_fail_with_the_name(over: dict[str, object], message: str) -> None:
    x, y, _ = planted(rows=60)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        aflite_filter(_records(y), embeddings=x, labels=LABELS, **over)


def test_embeddings_must_match_the_records() -> None:
    x, y, _ = planted(rows=60)
    with pytest.raises(ConfigError, match=r"embeddings of shape \(59, 16\) for 60 records"):
        aflite_filter(_records(y), embeddings=x[:59], labels=LABELS)


def test_the_models_agree_with_scikit_learn() -> None:
    # the same objective (mean cross-entropy + l2/2·|W|², intercept not penalised) solved by
    # scikit-learn's L-BFGS to convergence: C = 1 / (l2 · rows)
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(5)
    rows, dim = 800, 48
    base = rng.normal(size=(rows, 6)) @ rng.normal(size=(6, dim)) + 0.3 * rng.normal(
        size=(rows, dim)
    )
    y = (base @ rng.normal(size=(dim, 3)) + 6 * rng.normal(size=(rows, 3))).argmax(axis=1)
    x = base - base.mean(axis=0)
    x = (x / np.sqrt((x**2).sum(axis=1).mean())).astype(np.float32)  # as aflite_arrays does
    train = rng.random((1, rows)) < 0.5
    settings = AfliteSettings()
    w, b = train_models(x, y, train, 3, steps=settings.aflite_steps, l2=settings.aflite_l2)
    ours = (x @ w[:, 0] + b[0]).argmax(axis=1)
    c = 1 / (settings.aflite_l2 * train.sum())
    theirs = LogisticRegression(C=c, max_iter=5000).fit(x[train[0]], y[train[0]]).predict(x)
    assert (ours == theirs).mean() >= 0.99
