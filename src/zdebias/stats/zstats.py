"""z-statistics of features against labels (docs/design.md §3; Gardner et al. 2021).

For a feature x present in n examples, c of them with label l, and L labels (p0 = 1/L, or
with the empirical label prior of docs/design.md §14, p0(l) = the share of label l in the data)::

    p̂(l|x) = c / n
    z*(x, l) = (p̂(l|x) − p0) / sqrt(p0 (1 − p0) / n)

Pure functions over arrays: counts come from the sparse feature matrix in one vectorised pass
(no Python loop over features or examples). Shapes: ``F`` features, ``L`` labels, ``N``
examples. Features with n = 0 get z = 0 and p̂ = 0 and are never picked by :func:`top_k`.

>>> import numpy as np, scipy.sparse as sp
>>> m = sp.csr_matrix(np.array([[1, 1], [1, 0], [1, 0]], dtype=np.uint8))
>>> z, n, p = z_statistics(m, np.array([0, 0, 1]), 2)
>>> n.tolist(), p[1].tolist(), round(z[0, 0], 4)
([3, 1], [1.0, 0.0], 0.5774)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.data.labels import infer_task, label_ids
from zdebias.errors import ConfigError

if TYPE_CHECKING:
    import scipy.sparse as sp

    from zdebias.data.schema import Record


def checked_inputs(matrix: sp.spmatrix, labels: np.ndarray, num_labels: int) -> sp.csr_matrix:
    import scipy.sparse as sp

    m = sp.csr_matrix(matrix) if not sp.isspmatrix_csr(matrix) else matrix
    labels = np.asarray(labels)
    if labels.shape != (m.shape[0],):
        raise ValueError(f"label_ids has shape {labels.shape}; expected ({m.shape[0]},)")
    if num_labels < 2:
        raise ConfigError(f"z-statistics need at least two labels, got {num_labels}")
    if len(labels) and (labels.min() < 0 or labels.max() >= num_labels):
        raise ValueError(f"label ids must lie in [0, {num_labels})")
    if not m.has_canonical_format or (len(m.data) and m.data.min() == 0):
        m = m.copy()
        m.sum_duplicates()
        m.eliminate_zeros()
    return m


#: Matrix entries counted per block by :func:`label_counts` (bounds its working memory).
LABEL_COUNT_BLOCK = 1 << 22


def label_counts(matrix: sp.spmatrix, label_ids: np.ndarray, num_labels: int) -> np.ndarray:
    """``counts[f, l]`` = number of examples with feature f (non-zero) and label l. ``[F, L]``."""

    m = checked_inputs(matrix, label_ids, num_labels)
    # Presence only: the stored values are never read. One code per entry, feature * L +
    # label of its row, counted in blocks of rows (the codes of all entries at once would
    # take 8 bytes per entry: gigabytes for millions of rows).
    n_cells = m.shape[1] * num_labels
    dtype = np.int32 if n_cells < 2**31 else np.int64
    y = np.asarray(label_ids, dtype=dtype)
    indptr, indices = m.indptr, m.indices
    n_rows = m.shape[0]
    step = max(1, int(LABEL_COUNT_BLOCK * n_rows // max(int(indptr[-1]), 1)))
    counts = np.zeros(n_cells, dtype=np.int64)
    for start in range(0, n_rows, step):
        end = min(start + step, n_rows)
        codes = indices[indptr[start] : indptr[end]].astype(dtype) * dtype(num_labels)
        codes += np.repeat(y[start:end], np.diff(indptr[start : end + 1]))
        counts += np.bincount(codes, minlength=n_cells)
    return counts.reshape(m.shape[1], num_labels)


#: the label priors z is tested against (docs/design.md §14): 1/L (the papers), or each
#: label's share
LABEL_PRIORS = ("uniform", "empirical")


def prior_p0(
    label_totals: np.ndarray | Sequence[int], label_prior: str | None = None
) -> np.ndarray | None:
    """The null p0(l) ``[L]`` of ``label_prior`` for data with ``label_totals[l]`` rows of
    label l: None (meaning 1/L) for ``uniform`` or unset, the label shares for ``empirical``.

    >>> prior_p0([6, 3, 1], "empirical").tolist(), prior_p0([6, 3, 1], "uniform")
    ([0.6, 0.3, 0.1], None)
    """
    if label_prior in (None, "uniform"):
        return None
    if label_prior != "empirical":
        raise ConfigError(
            f"label_prior must be one of {', '.join(LABEL_PRIORS)}, not {label_prior!r}"
        )
    totals = np.asarray(label_totals, dtype=np.float64)
    if totals.sum() <= 0:
        return None
    # a label no row has: its share is 0 and z against it is undefined; any p0 in (0, 1)
    # keeps z finite, and such a label's p̂ is 0 everywhere
    shares = totals / totals.sum()
    return np.clip(shares, 1e-12, 1 - 1e-12)


#: a cell (feature x, label l) whose expected count under the null, n·p0(l), is below this is
#: tested exactly when p0(l) < 1/L (:func:`guarded_cells`; the normal approximation's rule of
#: thumb n·p ≥ 5)
MIN_EXPECTED = 5.0


def guarded_cells(counts: np.ndarray, n: np.ndarray, p0: np.ndarray | None) -> np.ndarray | None:
    """Boolean ``[F, L]``: the cells whose z is the exact binomial tail's (:func:`exact_z`),
    or None when there are none (always under the uniform prior).

    A cell is guarded when its label's null share is below 1/L, its expected count
    n·p0(l) is below :data:`MIN_EXPECTED` and it favours the label (c > n·p0(l)). Below 1/L
    the binomial is skewed right and the normal approximation overstates the upper tail
    (one row of a label among 300: z = √299 = 17.3 for a feature seen once, where the exact
    p-value is 1/300, z 2.71); at p0 = 1/L (the papers' test, and balanced data under either
    prior) nothing changes.
    """
    if p0 is None:
        return None
    counts = np.asarray(counts)
    p0 = np.asarray(p0, dtype=np.float64)
    low = p0 < 1.0 / counts.shape[1] - 1e-12
    if not low.any():
        return None
    expected = np.asarray(n, dtype=np.float64)[:, None] * p0[None, :]
    mask = low[None, :] & (expected < MIN_EXPECTED) & (counts > expected)
    return mask if mask.any() else None


def exact_z(c: np.ndarray, n: np.ndarray, p0: np.ndarray) -> np.ndarray:
    """The normal-equivalent z of the exact one-sided binomial tail: Φ⁻¹(1 − P(X ≥ c)) for
    X ~ Binomial(n, p0), elementwise (``c`` ≥ 1).

    >>> round(float(exact_z(np.array([1]), np.array([1]), np.array([1 / 300]))[0]), 4)
    2.7131
    """
    from scipy.special import bdtrc, gammaln, ndtri_exp

    c = np.asarray(c, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    p0 = np.asarray(p0, dtype=np.float64)
    with np.errstate(divide="ignore"):
        log_tail = np.log(bdtrc(c - 1, n, p0))
    tiny = ~np.isfinite(log_tail)
    if tiny.any():  # the tail underflows (z > 37): log P(X = c) and the geometric bound
        ct, nt, pt = c[tiny], n[tiny], p0[tiny]
        log_pmf = (
            gammaln(nt + 1)
            - gammaln(ct + 1)
            - gammaln(nt - ct + 1)
            + ct * np.log(pt)
            + (nt - ct) * np.log1p(-pt)
        )
        ratio = (nt - ct) / (ct + 1) * pt / (1 - pt)
        log_tail[tiny] = log_pmf - np.log1p(-np.minimum(ratio, 1 - 1e-12))
    return -ndtri_exp(np.minimum(log_tail, 0.0))


def guard_z(
    z: np.ndarray, counts: np.ndarray, n: np.ndarray, p0: np.ndarray | None
) -> np.ndarray | None:
    """Replace, in place, the z of the :func:`guarded_cells` of ``counts [F, L]`` (``n [F]``)
    by their :func:`exact_z`; the mask, or None when no cell is guarded."""
    mask = guarded_cells(counts, n, p0)
    if mask is None:
        return None
    rows, cols = np.nonzero(mask)
    assert p0 is not None
    z[rows, cols] = _exact_cells(np.asarray(counts)[rows, cols], np.asarray(n)[rows], cols, p0)
    return mask


#: below this many rows a guarded cell's tail comes from a table of binomial tails built with
#: numpy (no scipy import: its cost would show in ``zdebias stats``); from it on, scipy
#: (label shares under 5 / 150 = 3.3 %)
TAIL_TABLE_SPAN = 150


def _exact_cells(c: np.ndarray, n: np.ndarray, cols: np.ndarray, p0: np.ndarray) -> np.ndarray:
    """:func:`exact_z` of cells (count ``c``, rows ``n``, label ``cols``), each distinct
    cell computed once: tens of thousands of guarded cells share a few hundred (l, n, c)."""
    c = np.asarray(c, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    p0 = np.asarray(p0, dtype=np.float64)
    span = int(n.max()) + 1 if len(n) else 1
    if span <= TAIL_TABLE_SPAN:
        need = np.zeros((len(p0), span, span), dtype=bool)
        need[cols, n, c] = True
        table = np.zeros(need.shape)
        inv_cdf = NormalDist().inv_cdf
        for label in np.unique(cols).tolist():
            tails = _binomial_tails(float(p0[label]), span)
            for nv, cv in zip(*np.nonzero(need[label]), strict=True):
                tail = float(tails[nv, cv])
                table[label, nv, cv] = -inv_cdf(tail) if 0 < tail < 1 else math.nan
        z = table[cols, n, c]
        bad = np.isnan(z)
        if bad.any():  # out of the table's range (never seen): the scipy way
            z[bad] = exact_z(c[bad], n[bad], p0[cols[bad]])
        return z
    key = (cols * span + n) * span + c
    distinct, inverse = np.unique(key, return_inverse=True)
    dc, rest = distinct % span, distinct // span
    dn, dl = rest % span, rest // span
    return exact_z(dc, dn, p0[dl])[inverse]


def _binomial_tails(p: float, span: int) -> np.ndarray:
    """``tails[n, c]`` = P(X ≥ c) for X ~ Binomial(n, p), 0 ≤ c ≤ n < ``span`` (0 above n),
    from log-factorials, each row scaled by its largest term before summing."""
    j = np.arange(span)
    log_fact = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, max(span, 2))))))[:span]
    nn, jj = np.meshgrid(j, j, indexing="ij")
    inside = jj <= nn
    rest = np.where(inside, nn - jj, 0)
    log_pmf = log_fact[nn] - log_fact[jj] - log_fact[rest] + jj * math.log(p)
    log_pmf = np.where(inside, log_pmf + rest * math.log1p(-p), -np.inf)
    top = log_pmf.max(axis=1, keepdims=True)
    scaled = np.exp(log_pmf - top)
    return np.cumsum(scaled[:, ::-1], axis=1)[:, ::-1] * np.exp(top)


def exact_test(
    counts: np.ndarray, p0: np.ndarray | None, z_c: float, labels: Sequence[str]
) -> dict[str, Any] | None:
    """What the exact test changed in the statistics of ``counts [F, L]`` (for reports):
    the cells tested exactly (:func:`guarded_cells`), per label, and how many of them the
    normal approximation would call significant (z > ``z_c``) and the exact test does not.
    None when no cell is guarded.

    >>> info = exact_test(np.array([[0, 1], [3, 0]]), np.array([0.75, 0.25]), 1.0, ["a", "b"])
    >>> info["n_cells"], info["per_label"], info["n_not_significant"]
    (1, {'a': 0, 'b': 1}, 1)
    """
    counts = np.asarray(counts)
    n = counts.sum(axis=1)
    mask = guarded_cells(counts, n, p0)
    if mask is None:
        return None
    assert p0 is not None
    rows, cols = np.nonzero(mask)
    null = np.asarray(p0, dtype=np.float64)[cols]
    normal = (counts[rows, cols] / n[rows] - null) / np.sqrt(null * (1 - null) / n[rows])
    exact = _exact_cells(counts[rows, cols], n[rows], cols, p0)
    return {
        "rule": f"n·p0(l) < {MIN_EXPECTED:g} and p0(l) < 1/L: exact binomial tail",
        "n_cells": int(mask.sum()),
        "per_label": {name: int(mask[:, i].sum()) for i, name in enumerate(labels)},
        "n_not_significant": int(((normal > z_c) & (exact <= z_c)).sum()),
    }


def z_from_counts(
    counts: np.ndarray, p0: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(z [F, L], n [F], p_hat [F, L])`` from label counts ``[F, L]``; ``p0``: the null
    share of each label ``[L]`` (:func:`prior_p0`; None: 1/L). Cells with too few expected
    rows under a null share below 1/L get the exact test's z (:func:`guarded_cells`)."""
    counts = np.asarray(counts)
    num_labels = counts.shape[1]
    null = 1.0 / num_labels if p0 is None else np.asarray(p0, dtype=np.float64)[None, :]
    n = counts.sum(axis=1)
    safe = np.maximum(n, 1).astype(np.float64)[:, None]
    p_hat = counts / safe
    z = (p_hat - null) / np.sqrt(null * (1.0 - null) / safe)
    empty = n == 0
    z[empty] = 0.0
    p_hat[empty] = 0.0
    guard_z(z, counts, n, p0)
    return z, n, p_hat


def z_statistics(
    matrix: sp.spmatrix,
    label_ids: np.ndarray,
    num_labels: int,
    *,
    label_prior: str | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """z*(x, l) for every feature and label: ``(z [F, L], n [F], p_hat [F, L])``.

    ``matrix``: ``[N, F]`` sparse presence (any non-zero = present); ``label_ids``: ``[N]``
    ints in ``[0, num_labels)``; ``label_prior``: ``uniform`` (p0 = 1/L, default) or
    ``empirical`` (p0(l) = the share of label l in ``label_ids``).
    """
    p0 = prior_p0(
        np.bincount(np.asarray(label_ids, dtype=np.int64), minlength=num_labels), label_prior
    )
    return z_from_counts(label_counts(matrix, label_ids, num_labels), p0)


def top_k_column(
    z: np.ndarray, k: int, *, valid: np.ndarray | None = None, min_z: float = -math.inf
) -> np.ndarray:
    """Indices of the ``k`` largest values of ``z [F]``, largest first, ties by lower index.

    Only entries with ``valid`` (default all) and ``z > min_z`` are eligible.
    """
    z = np.asarray(z, dtype=np.float64)
    score = np.where(valid, z, -np.inf) if valid is not None else z.copy()
    if min_z > -math.inf:
        score[score <= min_z] = -np.inf
    eligible = score > -np.inf
    if k <= 0 or not eligible.any():
        return np.zeros(0, dtype=np.int64)
    if k < len(score):
        part = np.argpartition(-score, k - 1)[:k]
        kth = score[part].min()
        cand = np.flatnonzero(score >= kth)
    else:
        cand = np.arange(len(score))
    cand = cand[eligible[cand]]
    order = np.lexsort((cand, -score[cand]))
    return cand[order][:k].astype(np.int64)


def top_k(
    z: np.ndarray,
    k: int,
    *,
    n: np.ndarray | None = None,
    min_n: int = 1,
    min_z: float = -math.inf,
) -> list[np.ndarray]:
    """Per label, the indices of the ``k`` features with the highest z (the biased set B(l)).

    ``z``: ``[F, L]``; ``n``: ``[F]`` counts (features with ``n < min_n`` are skipped; pass it,
    or features that occur nowhere can be picked); ``min_z``: only z above it counts.
    Returns one index array per label, largest z first, ties broken by lower feature index.
    """
    valid = None if n is None else np.asarray(n) >= min_n
    return [top_k_column(z[:, label], k, valid=valid, min_z=min_z) for label in range(z.shape[1])]


def z_critical(num_features: int, alpha: float = 0.01) -> float:
    """One-sided normal critical value at ``alpha`` Bonferroni-corrected by ``num_features``.

    ``z_critical(28_000)`` ≈ 4.96 (Gardner et al. 2021 use 4.9578 for ~28k features).
    """
    if num_features < 1:
        return -NormalDist().inv_cdf(alpha)
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must lie in (0, 1), not {alpha}")
    return -NormalDist().inv_cdf(alpha / num_features)


def significance_curve(
    n: np.ndarray, num_labels: int, z_c: float, p0: float | np.ndarray | None = None
) -> np.ndarray:
    """The p̂ a feature seen n times must exceed to be significant: p0 + z_c·sqrt(p0(1−p0)/n)
    (``p0``: the label's null share, or one per ``n``; None: 1/L)."""
    p0 = 1.0 / num_labels if p0 is None else np.asarray(p0, dtype=np.float64)
    return p0 + z_c * np.sqrt(p0 * (1 - p0) / np.asarray(n, dtype=np.float64))


def significant_features(z: np.ndarray, z_c: float) -> np.ndarray:
    """Boolean ``[F]``: the feature's z exceeds ``z_c`` for at least one label."""
    return np.asarray((np.asarray(z) > z_c).any(axis=1))


def top_table(
    names: Sequence[str],
    labels: Sequence[str],
    z: np.ndarray,
    n: np.ndarray,
    p_hat: np.ndarray,
    k: int,
    *,
    min_n: int = 1,
) -> dict[str, list[dict[str, Any]]]:
    """``{label: [{"feature", "z", "n", "p"}, ...]}``, the top ``k`` per label by z, descending
    (the shape of GD-NLI Table 12)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for li, idx in enumerate(top_k(z, k, n=n, min_n=min_n)):
        out[labels[li]] = [
            {
                "feature": names[j],
                "z": float(z[j, li]),
                "n": int(n[j]),
                "p": float(p_hat[j, li]),
            }
            for j in idx.tolist()
        ]
    return out


def describe(
    records: Sequence[Record],
    *,
    features: Sequence[str] | None = None,
    labels: Sequence[str] | None = None,
    top: int = 20,
    alpha: float = 0.01,
    feature_matrix: Any = None,
    label_prior: str | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """The z-statistics report of a dataset (what ``zdebias stats --json`` writes).

    Keys: ``n_examples``, ``labels``, ``label_counts``, ``n_features`` (features present in at
    least one example), ``z_critical`` (α Bonferroni-corrected by n_features), ``n_significant``
    (features above the curve for some label), ``n_significant_per_label``, ``top`` (per
    label, the ``top`` features by z, descending, with z, n and p̂), ``max_z``.
    """
    from zdebias.features.extract import extract_features

    labels = tuple(labels) if labels is not None else infer_task(records).labels
    fm = (
        feature_matrix
        if feature_matrix is not None
        else extract_features(records, features, labels=labels, **settings)
    )
    return describe_matrix(
        fm, label_ids(records, labels), labels, top=top, alpha=alpha, label_prior=label_prior
    )


def imbalance(
    counts: np.ndarray,
    label_totals: np.ndarray,
    z_c: float,
    alpha: float,
    labels: Sequence[str],
) -> dict[str, Any] | None:
    """Under the uniform prior, whether the labels are imbalanced (a chi-square test of the
    label totals against equal shares rejects them at ``alpha``) and, if so, how many of the
    features significant against 1/L are not significant against the label shares: those only
    reflect the label shares (docs/design.md §14). None when the labels are balanced at
    ``alpha``."""
    from scipy.special import chdtrc  # scipy.stats.chisquare's p, without importing stats

    totals = np.asarray(label_totals, dtype=np.float64)
    if totals.sum() <= 0 or (totals == totals[0]).all():
        return None
    expected = totals.mean()
    p_value = float(chdtrc(len(totals) - 1, ((totals - expected) ** 2 / expected).sum()))
    if p_value >= alpha:
        return None
    z_uniform = z_from_counts(counts)[0]
    z_empirical = z_from_counts(counts, prior_p0(totals, "empirical"))[0]
    sig_uniform = (z_uniform > z_c).any(axis=1)
    sig_empirical = (z_empirical > z_c).any(axis=1)
    only = int((sig_uniform & ~sig_empirical).sum())
    shares = totals / totals.sum()
    return {
        "label_shares": {name: round(float(s), 4) for name, s in zip(labels, shares, strict=True)},
        "chi2_p_value": p_value,
        "n_significant_uniform": int(sig_uniform.sum()),
        "n_significant_empirical": int(sig_empirical.sum()),
        "n_only_label_shares": only,
        "hint": "--label-prior empirical",
    }


def imbalance_line(info: dict[str, Any] | None) -> str | None:
    """The warning for :func:`imbalance`'s result (None when there is nothing to say)."""
    if not info or not info["n_only_label_shares"]:
        return None
    shares = ", ".join(f"{k} {100 * v:.0f}%" for k, v in info["label_shares"].items())
    return (
        f"labels are imbalanced ({shares}): {info['n_only_label_shares']:,} of "
        f"{info['n_significant_uniform']:,} significant features only reflect the label shares "
        "(z against 1/L); --label-prior empirical tests against each label's share instead"
    )


def describe_matrix(
    fm: Any,
    y: np.ndarray,
    labels: Sequence[str],
    *,
    top: int = 20,
    alpha: float = 0.01,
    label_prior: str | None = None,
) -> dict[str, Any]:
    """:func:`describe` from a ready feature matrix and each row's label index ``y``.

    ``label_prior``: ``uniform`` or ``empirical`` (docs/design.md §14); unset means uniform, and
    then an imbalanced label set is described under ``imbalance`` (:func:`imbalance`)."""
    labels = tuple(labels)
    counts = label_counts(fm.matrix, y, len(labels))
    totals = np.bincount(np.asarray(y, dtype=np.int64), minlength=len(labels))
    p0 = prior_p0(totals, label_prior)
    z, n, p_hat = z_from_counts(counts, p0)
    n_features = int((n > 0).sum())
    z_c = z_critical(n_features, alpha)
    sig = z > z_c
    table = top_table(fm.names, labels, z, n, p_hat, top)
    prior: dict[str, Any] = {
        "label_prior": label_prior or "uniform",
        "p0": {
            name: (1.0 / len(labels) if p0 is None else float(p0[i]))
            for i, name in enumerate(labels)
        },
    }
    if label_prior is None:
        prior["imbalance"] = imbalance(counts, totals, z_c, alpha, labels)
    if p0 is not None:  # cells with too few expected rows, tested exactly
        prior["exact_test"] = exact_test(counts, p0, z_c, labels)
    return {
        "n_examples": len(y),
        "labels": list(labels),
        "label_counts": {name: int((y == i).sum()) for i, name in enumerate(labels)},
        "n_features": n_features,
        "alpha": alpha,
        "z_critical": z_c,
        "n_significant": int(sig.any(axis=1).sum()),
        "n_significant_per_label": {name: int(sig[:, i].sum()) for i, name in enumerate(labels)},
        "max_z": {name: (rows[0]["z"] if rows else None) for name, rows in table.items()},
        "top": table,
        **prior,
    }
