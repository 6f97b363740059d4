"""The effect rule of a shortcut split (docs/design.md §13, amended 2026-12-07): verdicts that weigh
a feature's effect, not its sample size, that let overlapping features vote once, and that let
the partial-input model vote only where its held-out predictions are clearly better than the
prior.

- :func:`effect_table`: a feature's effect for label l, the Jeffreys-smoothed log-odds of l
  among the training rows that carry it minus the log-odds of the prior p0(l):
  ``logit((k + 0.5) / (n + 1)) - logit(p0(l))``.
- :func:`effect_verdicts`: each test row's verdict, the label with the largest summed effect
  over its voting groups (one vote per group: its member with the largest effect speaks).
  Groups: every overlap feature (``lex-overlap>t``, ``full-lex-overlap``, ``no-lex-overlap``)
  is one group; an n-gram and the n-grams of the same field that contain it, or that it
  contains, are one group (linked within the row: ``sleeping`` and ``is sleeping``); any
  other feature is its own group.
- :func:`cross_fitted_proba`, :func:`calibrate_gate`: the partial-input model's out-of-fold
  probabilities on the training rows (fold-averaged on the test rows) and the threshold on
  its top probability above which, for each predicted label, the held-out precision is
  clearly above the label's prior.
- :func:`label_coincidence`, :func:`agreement`: a split that is the label mix, and how far
  two splits of the same rows agree.

>>> import numpy as np
>>> e = effect_table_from_counts(np.array([[9, 1]]), np.array([0.5, 0.5]))
>>> [round(float(x), 3) for x in e[0]]   # log(9.5 / 1.5): 9 of 10 rows, smoothed
[1.846, -1.846]
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.errors import ConfigError

if TYPE_CHECKING:
    import scipy.sparse as sp

    from zdebias.features.keys import FeatureKey

#: Jeffreys smoothing of a feature's label share: (k + 0.5) / (n + 1)
SMOOTHING = 0.5
#: a partial-input prediction votes where the 95% Wilson lower bound of its held-out precision
#: is above the label's prior by this much
GATE_MARGIN = 0.10
#: the held-out rows of one predicted label are cut into bins of at least this many rows
GATE_MIN_BIN = 40
#: and at most this many bins
GATE_BINS = 20
#: a top probability must exceed the (6-decimal) threshold by more than this to vote
THRESHOLD_TOL = 1e-6
#: Wilson bound's z (95%, two-sided)
WILSON_Z = 1.96
#: a split is flagged as the label mix when one label holds this share of its verdicts or of
#: its aligned rows
COINCIDENT_SHARE = 0.95
#: families of the partial-input (bias) model
BIAS_MODELS = ("hypo-only", "ngram-lr")
#: summed effects within this of the top one tie
TIE = 1e-9
#: the name the gated partial-input model votes under
MODEL_VOTE = "hypo-only-pred"


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p) - np.log1p(-p)


def effect_table_from_counts(counts: np.ndarray, p0: np.ndarray) -> np.ndarray:
    """``[F, L]`` effects from label counts ``[F, L]`` against the prior ``p0 [L]``."""
    counts = np.asarray(counts, dtype=np.float64)
    n = counts.sum(axis=1, keepdims=True)
    p = (counts + SMOOTHING) / (n + 2 * SMOOTHING)
    return _logit(p) - _logit(np.asarray(p0, dtype=np.float64))[None, :]


def effect_table(matrix: sp.spmatrix, y: np.ndarray, p0: np.ndarray) -> np.ndarray:
    """Each feature's effect per label ``[F, L]`` over the training rows ``matrix [N, F]``
    (presence) with labels ``y``, against ``p0 [L]``."""
    from zdebias.stats.zstats import label_counts

    counts = label_counts(matrix, np.asarray(y), len(p0))
    return effect_table_from_counts(counts, p0)


def prior_shares(y: np.ndarray, num_labels: int, label_prior: str | None) -> np.ndarray:
    """p0 ``[L]``: 1/L for the uniform prior (the default), the label shares for empirical."""
    if label_prior == "empirical":
        totals = np.bincount(np.asarray(y, dtype=np.int64), minlength=num_labels)
        return totals / max(1, totals.sum())
    return np.full(num_labels, 1.0 / num_labels)


def _group_links(keys: Sequence[FeatureKey], voting: np.ndarray) -> dict[int, list[int]]:
    """For each voting n-gram, the voting n-grams of its field that it contains."""
    where = {
        (k.field, k.tokens): j
        for j, k in enumerate(keys)
        if voting[j] and k.kind == "ngram" and k.tokens
    }
    links: dict[int, list[int]] = {}
    for (fld, toks), j in where.items():
        inner = []
        for size in range(1, len(toks)):
            for start in range(len(toks) - size + 1):
                hit = where.get((fld, toks[start : start + size]))
                if hit is not None:
                    inner.append(hit)
        if inner:
            links[j] = inner
    return links


@dataclass
class Votes:
    """What :func:`effect_verdicts` found: per row the verdict (-1: none), whether the top
    sum tied, the summed effects ``[N, L]`` and the features that spoke (column, or -1 for
    the partial-input model)."""

    verdict: np.ndarray
    tied: np.ndarray
    sums: np.ndarray
    speakers: list[list[int]]


def effect_verdicts(
    matrix: sp.spmatrix,
    effects: np.ndarray,
    voting: np.ndarray,
    keys: Sequence[FeatureKey],
    model: tuple[np.ndarray, np.ndarray] | None = None,
) -> Votes:
    """Each test row's verdict under the effect rule. ``matrix [N, F]``: presence in the
    test rows; ``effects [F, L]``; ``voting [F]``: the features that may vote; ``keys``: the
    columns' keys (kind, field, tokens: the groups). ``model``: the gated partial-input
    model, ``(effect [N, L] rows, votes [N] bool)``: one more group where it votes."""
    import scipy.sparse as sp

    m = sp.csr_matrix(matrix)
    n_rows, num_labels = m.shape[0], effects.shape[1]
    voting = np.asarray(voting, dtype=bool)
    strength = effects.max(axis=1)
    overlap = np.array([k.kind == "overlap" for k in keys], dtype=bool)
    links = _group_links(keys, voting)
    sums = np.zeros((n_rows, num_labels))
    carries = np.zeros(n_rows, dtype=bool)
    speakers: list[list[int]] = []
    for i in range(n_rows):
        cols = m.indices[m.indptr[i] : m.indptr[i + 1]]
        cols = cols[voting[cols]]
        spoke: list[int] = []
        if len(cols):
            parent = {int(j): int(j) for j in cols}

            def find(a: int, parent: dict[int, int] = parent) -> int:
                while parent[a] != a:
                    parent[a] = parent[parent[a]]
                    a = parent[a]
                return a

            ov = [int(j) for j in cols if overlap[j]]
            for j in ov[1:]:
                parent[find(j)] = find(ov[0])
            for j in cols:
                for inner in links.get(int(j), ()):
                    if inner in parent:
                        parent[find(inner)] = find(int(j))
            best: dict[int, int] = {}
            for j in cols:
                root = find(int(j))
                cur = best.get(root)
                if (
                    cur is None
                    or strength[j] > strength[cur]
                    or (strength[j] == strength[cur] and j < cur)
                ):
                    best[root] = int(j)
            spoke = sorted(best.values())
            sums[i] = effects[spoke].sum(axis=0)
            carries[i] = True
        speakers.append(spoke)
    if model is not None:
        model_effect, model_votes = model
        sums[model_votes] += model_effect[model_votes]
        carries |= model_votes
        for row in np.flatnonzero(model_votes):
            speakers[row].append(-1)
    if num_labels == 0:
        return Votes(np.full(n_rows, -1), np.zeros(n_rows, dtype=bool), sums, speakers)
    best_label = sums.argmax(axis=1)
    top = sums[np.arange(n_rows), best_label]
    scale = np.maximum(1.0, np.abs(top))
    tied = carries & ((sums >= (top - TIE * scale)[:, None]).sum(axis=1) > 1)
    verdict = np.where(carries & ~tied, best_label, -1).astype(np.int64)
    return Votes(verdict, tied, sums, speakers)


def wilson_lower(k: np.ndarray | float, n: np.ndarray | float) -> np.ndarray:
    """The 95% Wilson score interval's lower bound of k successes in n trials (0 for n = 0).

    >>> round(float(wilson_lower(8, 10)), 3)
    0.49
    """
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    safe = np.maximum(n, 1.0)
    p = k / safe
    z2 = WILSON_Z**2
    centre = p + z2 / (2 * safe)
    spread = WILSON_Z * np.sqrt(p * (1 - p) / safe + z2 / (4 * safe**2))
    return np.where(n > 0, (centre - spread) / (1 + z2 / safe), 0.0)


def calibrate_gate(
    proba: np.ndarray,
    y: np.ndarray,
    p0: np.ndarray,
    labels: Sequence[str],
    *,
    margin: float = GATE_MARGIN,
    min_bin: int = GATE_MIN_BIN,
) -> dict[str, dict[str, Any]]:
    """Per predicted label, the smallest top-probability threshold above which every bin of
    the held-out predictions (``proba [N, L]``, out of fold; gold ``y``) has a 95% Wilson
    lower bound of precision above ``p0[label] + margin``: ``{label: {threshold, precision,
    n, prior}}``; a prediction votes where its top probability is *above* the threshold.
    Bins: the label's predictions sorted by top probability, cut into equal counts of at
    least ``min_bin`` rows (at most :data:`GATE_BINS`). The threshold is the top probability
    of the most confident row in a failing bin (1/L when every bin passes: any prediction but
    a uniform one votes); None where the most confident bin fails (the label never votes).
    ``precision`` and ``n``: the held-out rows above the threshold."""
    proba = np.asarray(proba, dtype=np.float64)
    y = np.asarray(y)
    pred = proba.argmax(axis=1) if len(proba) else np.zeros(0, dtype=np.int64)
    top = proba.max(axis=1) if len(proba) else np.zeros(0)
    out: dict[str, dict[str, Any]] = {}
    for li, label in enumerate(labels):
        rows = np.flatnonzero(pred == li)
        order = rows[np.argsort(top[rows], kind="stable")]
        n_bins = max(1, min(GATE_BINS, len(order) // max(1, min_bin)))
        bins = [b for b in np.array_split(order, n_bins) if len(b)]
        passes = [
            bool(wilson_lower(int((y[b] == li).sum()), len(b)) > p0[li] + margin) for b in bins
        ]
        first = len(bins)
        while first > 0 and passes[first - 1]:
            first -= 1
        info: dict[str, Any] = {"prior": round(float(p0[li]), 4), "n_predicted": len(rows)}
        if first == len(bins):
            info.update(threshold=None, precision=None, n=0)
        else:
            above = np.concatenate(bins[first:])
            below = np.concatenate(bins[:first]) if first else np.zeros(0, dtype=np.int64)
            floor = float(top[below].max()) if len(below) else 1.0 / len(labels)
            info.update(
                threshold=round(floor, 6),
                precision=round(float((y[above] == li).mean()), 4),
                n=len(above),
            )
        out[label] = info
    return out


def gated(proba: np.ndarray, gate: dict[str, dict[str, Any]], labels: Sequence[str]) -> np.ndarray:
    """Each row's gated prediction: the argmax where its top probability is above that
    label's threshold, else -1 (the model abstains)."""
    proba = np.asarray(proba, dtype=np.float64)
    if not len(proba):
        return np.zeros(0, dtype=np.int64)
    pred = proba.argmax(axis=1)
    top = proba.max(axis=1)
    thr = np.array(
        [gate[lab]["threshold"] if gate[lab]["threshold"] is not None else np.inf for lab in labels]
    )
    return np.where(top > thr[pred] + THRESHOLD_TOL, pred, -1).astype(np.int64)


def model_effects(gated_train: np.ndarray, y: np.ndarray, p0: np.ndarray) -> np.ndarray:
    """``[L, L]``: the effect of the gated prediction l (row) on the gold label (column),
    from the training rows' out-of-fold gated predictions."""
    num_labels = len(p0)
    counts = np.zeros((num_labels, num_labels))
    ok = gated_train >= 0
    np.add.at(counts, (gated_train[ok], np.asarray(y)[ok]), 1)
    return effect_table_from_counts(counts, p0)


def hypothesis_matrix(records: Sequence[Any], settings: dict[str, Any]) -> sp.csr_matrix:
    """Hypothesis unigram and bigram presence ``[N, V]`` (the hypo-only feature's input)."""
    import scipy.sparse as sp

    from zdebias.features.context import FeatureContext
    from zdebias.features.ngrams import ngram_block

    ctx = FeatureContext(records, settings, pair=True)
    uni, _ = ngram_block(ctx, "hypothesis", 1)
    bi, _ = ngram_block(ctx, "hypothesis", 2)
    return sp.hstack([uni, bi], format="csr", dtype=np.float32)


def _ngram_lr(seed: int) -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=1.0, tol=1e-3, max_iter=200, random_state=seed)


def cross_fitted_proba(
    x: sp.csr_matrix,
    y: np.ndarray,
    n_train: int,
    num_labels: int,
    *,
    family: str = "hypo-only",
    classifier: str = "nb",
    folds: int = 5,
    seed: int = 0,
) -> np.ndarray:
    """``[N, L]`` probabilities: out of fold for the first ``n_train`` rows (each fold's
    model trained on the others), the mean of the fold models for the rest. ``family``
    hypo-only: the hypo-only feature's model (``classifier`` nb or logreg, its folds and
    seed: the same argmax as the feature); ngram-lr: scikit-learn's logistic regression
    (lbfgs, C = 1, tol 1e-3) on the n-grams found on two or more training rows, with folds
    dealt from ``seed + 1``."""
    import warnings

    from zdebias.features.hypothesis_only import _deal_folds, _make_classifier

    if family not in BIAS_MODELS:
        raise ConfigError(f"bias_model must be one of {', '.join(BIAS_MODELS)}, not {family!r}")
    x = sp_csr(x)
    n = x.shape[0]
    fit_seed = seed if family == "hypo-only" else seed + 1
    fit_rows, folds, fold_of, other = _deal_folds(n, np.arange(n_train), folds, fit_seed)
    # n-grams of the training rows only (ngram-lr: those on 2 or more of them, as min_df=2)
    seen = x[:n_train].getnnz(axis=0) >= (1 if family == "hypo-only" else 2)
    if not seen.all():
        x = x[:, np.flatnonzero(seen)]
    proba = np.zeros((n, num_labels))
    y = np.asarray(y)
    for k in range(folds):
        train = fit_rows[fold_of != k]
        test = fit_rows[fold_of == k]
        classes = np.unique(y[train])
        if len(classes) == 1:
            proba[test, classes[0]] = 1.0
            proba[other, classes[0]] += 1.0
            continue
        if family == "hypo-only":
            model = _make_classifier(classifier, seed + k, len(train))
        else:
            model = _ngram_lr(seed + k)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(x[train], y[train])
        cls = np.asarray(model.classes_)
        if len(test):
            proba[np.ix_(test, cls)] = model.predict_proba(x[test])
        if len(other):
            proba[np.ix_(other, cls)] += model.predict_proba(x[other])
    if len(other):
        proba[other] /= folds
    return proba


def sp_csr(x: Any) -> sp.csr_matrix:
    """``x`` as CSR."""
    import scipy.sparse as sp

    return sp.csr_matrix(x)


def predictions_digest(proba: np.ndarray) -> str:
    """sha256 of the model's predictions (argmax per row, in row order) and probabilities
    rounded to 4 decimals: two splits made with the same model on the same rows share it."""
    proba = np.asarray(proba, dtype=np.float64)
    h = hashlib.sha256()
    h.update(proba.argmax(axis=1).astype(np.int64).tobytes() if len(proba) else b"")
    h.update(np.round(proba, 4).tobytes())
    return h.hexdigest()


def label_coincidence(
    verdict: np.ndarray, codes: np.ndarray, y: np.ndarray, labels: Sequence[str]
) -> str | None:
    """The warning for a split that measures the label mix (docs/design.md §13): one label holds
    :data:`COINCIDENT_SHARE` or more of the rows with a verdict, or of the aligned rows
    (codes: 0 aligned); None otherwise."""
    verdict = np.asarray(verdict)
    said = verdict[verdict >= 0]
    lines = []
    if len(said) >= 2:
        share = np.bincount(said, minlength=len(labels)) / len(said)
        top = int(share.argmax())
        if share[top] >= COINCIDENT_SHARE:
            lines.append(f"{100 * share[top]:.1f}% of the verdicts say {labels[top]}")
    aligned = np.asarray(y)[np.asarray(codes) == 0]
    if len(aligned) >= 2:
        share = np.bincount(aligned, minlength=len(labels)) / len(aligned)
        top = int(share.argmax())
        if share[top] >= COINCIDENT_SHARE:
            lines.append(f"{100 * share[top]:.1f}% of the aligned rows are {labels[top]}")
    if not lines:
        return None
    return (
        "LABEL-COINCIDENT SPLIT: "
        + " and ".join(lines)
        + ": the slices are the label mix, not a shortcut, so the gap measures how the model "
        "does per label; try --label-prior empirical, --keep-features or another feature set"
    )


def agreement(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """How far two slice codings of the same rows agree: ``{n, same, share, kappa}``
    (Cohen's kappa over aligned/conflicting/free; None when chance agreement is 1).

    >>> agreement(np.array([0, 1, 2, 0]), np.array([0, 1, 2, 1]))["kappa"]
    0.6364
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise ConfigError(f"the two splits have {len(a)} and {len(b)} rows: not the same rows")
    n = len(a)
    same = int((a == b).sum())
    observed = same / n if n else math.nan
    pa = np.bincount(a, minlength=3)[:3] / max(n, 1)
    pb = np.bincount(b, minlength=3)[:3] / max(n, 1)
    chance = float((pa * pb).sum())
    kappa = None if chance >= 1 or not n else round((observed - chance) / (1 - chance), 4)
    return {
        "n": n,
        "same": same,
        "share": round(observed, 4) if n else None,
        "kappa": kappa,
        "crosstab": np.bincount(a * 3 + b, minlength=9).reshape(3, 3).tolist(),
    }


def folder_codes(folder: str | Path) -> dict[str, list[int]]:
    """A shortcut-split folder's slice code per row, keyed by the row's sha256 over
    ``[premise, hypothesis, text, label]`` (:func:`~zdebias.stats.shortcut_split.rows_digest`
    per row; duplicates in file order)."""
    from zdebias.data.readers import read_records

    out: dict[str, list[int]] = {}
    root = Path(folder)
    for code, name in enumerate(("aligned", "conflicting", "free")):
        file = root / f"{name}.jsonl"
        if not file.exists():
            raise ConfigError(f"{root}: not a shortcut split (no {name}.jsonl)")
        for r in read_records(file):
            out.setdefault(_row_key(r), []).append(code)
    return out


def _row_key(r: Any) -> str:
    row = [r.premise, r.hypothesis, r.text, r.label]
    return hashlib.sha256(json.dumps(row, ensure_ascii=False).encode()).hexdigest()


def compare_with(rows: Sequence[Any], codes: np.ndarray, other: str | Path) -> dict[str, Any]:
    """:func:`agreement` of this split (``rows`` and their ``codes``) with the split in the
    folder ``other``, over the rows both hold (matched by text and label): ``{other,
    n_unmatched, n, same, share, kappa, crosstab}`` (crosstab: this split's slice by row,
    the other's by column)."""
    theirs = folder_codes(other)
    mine, matched = [], []
    for r, code in zip(rows, codes, strict=True):
        queue = theirs.get(_row_key(r))
        if queue:
            mine.append(int(code))
            matched.append(queue.pop(0))
    left = sum(len(q) for q in theirs.values())
    result = agreement(np.array(mine, dtype=np.int64), np.array(matched, dtype=np.int64))
    return {"other": str(other), "n_unmatched": len(rows) - len(mine) + left, **result}


__all__ = [
    "BIAS_MODELS",
    "GATE_MARGIN",
    "SMOOTHING",
    "Votes",
    "agreement",
    "calibrate_gate",
    "compare_with",
    "cross_fitted_proba",
    "effect_table",
    "effect_verdicts",
    "gated",
    "label_coincidence",
    "model_effects",
    "predictions_digest",
    "wilson_lower",
]
