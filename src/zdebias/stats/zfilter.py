"""z-filtering (docs/design.md §4; GD-NLI §3.2, Algorithm 1).

    Z ← ∅ (or Z ← D_seed);  Z⁻ ← ∅
    for each batch D'_t of D' (in a seeded shuffled order):
        B_Z(l) ← the top-k features by z*(x, l | Z), for each label l
        for each I = (P, H, l) in D'_t:
            if features(I) ∩ B_Z(l) = ∅: Z ← Z ∪ {I}  else: Z⁻ ← Z⁻ ∪ {I}

The statistics of Z are kept as label counts per feature and updated incrementally from each
batch's accepted examples; z is recomputed only for the features those examples touch, and the
top-k sets are maintained from a candidate pool, so a batch costs time in proportion to its
size, not to the number of features.

Notes (decisions where the paper is silent):

- An unseeded run's first batch meets an empty Z, so it is accepted whole (there are no biased
  features yet). Its biases stay in the output; smaller batches leave fewer of them. The
  default batch size is scaled to the rows to filter (:func:`~zdebias.stats.settings.
  scaled_batch_size`): the paper's 1,000 from 20,000 rows on, else 20 batches, so the first
  batch is at most 5% of the data (at 1,000 on data of one batch or less, nothing would be
  filtered). It is decided here, where every way of running knows the row count exactly.
- Only features with z > ``min_z`` (default 0) can be biased: a feature that does not favour a
  label never rejects an example of that label.
- Ties in z are broken by the lower feature index (column order), so runs are reproducible.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from zdebias.data.labels import infer_task
from zdebias.data.process import gc_paused
from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.stats.keep import kept_features, mark_kept
from zdebias.stats.settings import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_TOP_K,
    DEFAULT_WARN_LABEL_SHARE,
    SCALED_RULE,
    ZFilterSettings,
    scaled_batch_size,
)
from zdebias.stats.zstats import (
    checked_inputs,
    exact_test,
    guard_z,
    imbalance,
    imbalance_line,
    label_counts,
    label_ids,
    prior_p0,
    top_k,
    top_k_column,
    top_table,
    z_critical,
    z_from_counts,
)

if TYPE_CHECKING:
    import scipy.sparse as sp

    from zdebias.features.keys import FeatureKey
    from zdebias.features.matrix import FeatureMatrix
    from zdebias.stats.summaries import ZFilterSummary

SUMMARY_TOP = 5
#: Candidate pool of the incremental top-k: at least this many features per label ...
TOPK_POOL_MIN = 256
#: ... and this many per biased feature (a speed setting; results never depend on it).
TOPK_POOL_PER_K = 8


@dataclass
class FilterArrays:
    """The outcome of :func:`z_filter_matrix`, as row indices into the feature matrix.

    ``accepted`` / ``rejected``: sorted row indices of the candidate rows that joined Z / Z⁻.
    ``rejected_by_rows`` / ``rejected_by_features``: one entry per (rejected row, biased feature
    present in it and in B_Z(its label) when it was rejected), grouped by row in ascending
    order, within a row by the feature's z rank at that moment (most biased first).
    ``counts``: label counts ``[F, L]`` of the final Z (seed included).
    ``rejected_by_z``: beside ``rejected_by_features``, each feature's z for the row's label
    in Z at the moment the row was rejected (what made it biased).
    ``batch_size``: the batch size used (given, or scaled to the rows filtered).
    """

    accepted: np.ndarray
    rejected: np.ndarray
    rejected_by_rows: np.ndarray
    rejected_by_features: np.ndarray
    counts: np.ndarray
    n_batches: int
    rejected_by_z: np.ndarray | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    #: the z floor used (``min_z`` ``critical``: the data's z_critical)
    min_z: float = 0.0
    #: sorted rows the biased features rejected but ``min_label_share`` kept
    floored: np.ndarray | None = None

    def rejected_by(self) -> dict[int, list[int]]:
        """Rejected row → its biased feature columns."""
        out: dict[int, list[int]] = {}
        for r, f in zip(
            self.rejected_by_rows.tolist(), self.rejected_by_features.tolist(), strict=True
        ):
            out.setdefault(r, []).append(f)
        return out


class _TopK:
    """Exact top-k per label under point updates of z, without scanning all features per batch.

    For each label it keeps a candidate pool C and a bound ``tau`` such that every feature
    outside C has z <= tau. A full scan sets C to the best ``pool`` features and tau to the
    next value; after an update, changed features whose z now exceeds tau join C. The top-k of
    C is exact whenever its k-th value is > tau (or nothing outside C can exceed ``min_z``);
    otherwise it rescans, and in the rare case of ties across the boundary falls back to a
    full sort, so the result always equals :func:`~zdebias.stats.zstats.top_k_column`.
    """

    def __init__(self, z: np.ndarray, k: int, min_z: float, pool: int) -> None:
        self.z = z  # [L, F], updated in place by the caller
        self.k = k
        self.min_z = min_z
        self.pool = max(pool, k + 1)
        self.cand: list[np.ndarray] = [np.zeros(0, np.int64)] * z.shape[0]
        self.tau = np.full(z.shape[0], -np.inf)
        for label in range(z.shape[0]):
            self._rescan(label)

    def _rescan(self, label: int) -> None:
        row = self.z[label]
        if len(row) <= self.pool:
            self.cand[label] = np.arange(len(row))
            self.tau[label] = -np.inf
            return
        part = np.argpartition(-row, self.pool)
        self.cand[label] = np.sort(part[: self.pool])
        self.tau[label] = row[part[self.pool]]

    def update(self, touched: np.ndarray) -> None:
        """Record that the z of ``touched`` features changed."""
        if len(touched) == 0:
            return
        for label in range(self.z.shape[0]):
            rising = touched[self.z[label, touched] > self.tau[label]]
            if len(rising):
                cand = _unique(np.concatenate([self.cand[label], rising]))
                if len(cand) > 2 * self.pool:
                    self._rescan(label)
                else:
                    self.cand[label] = cand

    def _from_pool(self, label: int) -> np.ndarray | None:
        row = self.z[label]
        cand = self.cand[label]
        vals = row[cand]
        k = self.k
        outside_ineligible = self.tau[label] <= self.min_z
        if len(cand) >= k:
            kth = -np.partition(-vals, k - 1)[k - 1]
            if not (kth > self.tau[label] or outside_ineligible):
                return None
            sel = cand[vals >= kth]
        elif outside_ineligible:
            sel = cand
        else:
            return None
        order = np.lexsort((sel, -row[sel]))
        top = sel[order][:k]
        return top[row[top] > self.min_z]

    def best(self, label: int) -> np.ndarray:
        """Indices of the top-k features for ``label`` with z > min_z, best first."""
        if self.k <= 0:
            return np.zeros(0, dtype=np.int64)
        top = self._from_pool(label)
        if top is None:
            self._rescan(label)
            top = self._from_pool(label)
        if top is None:  # ties straddle the pool boundary: sort everything
            top = top_k_column(self.z[label], self.k, min_z=self.min_z)
        return top


def _unique(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values (sort-based; faster than numpy's hash path on small arrays)."""
    if len(a) == 0:
        return a
    s = np.sort(a)
    return s[np.concatenate(([True], s[1:] != s[:-1]))]


def _z_rows(
    counts: np.ndarray, cols: np.ndarray, num_labels: int, p0: np.ndarray | None = None
) -> np.ndarray:
    """z [L, len(cols)] from flat counts [F*L] for some features; -inf where n = 0.
    ``p0``: each label's null share ``[L]`` (None: 1/L)."""
    c = counts.reshape(-1, num_labels)[cols].astype(np.float64)
    n = c.sum(axis=1)
    null = 1.0 / num_labels if p0 is None else p0[None, :]
    safe = np.maximum(n, 1.0)[:, None]
    z = (c / safe - null) / np.sqrt(null * (1.0 - null) / safe)
    guard_z(z, c, n, p0)
    z[n == 0] = -np.inf
    return z.T


def z_filter_matrix(
    matrix: sp.spmatrix,
    label_ids: np.ndarray,
    num_labels: int,
    *,
    rows: np.ndarray | Sequence[int] | None = None,
    seed_rows: np.ndarray | Sequence[int] | None = None,
    top_k: int = DEFAULT_TOP_K,
    batch_size: int | None = None,
    shuffle_seed: int | None = 0,
    min_z: float | str = 0.0,
    label_prior: str | None = None,
    keep: np.ndarray | None = None,
    min_label_share: float | None = None,
    progress: bool = False,
) -> FilterArrays:
    """Algorithm 1 over a presence matrix ``[N, F]`` and labels ``[N]``.

    ``rows``: the rows of D' (default: every row not in ``seed_rows``), visited in a shuffled
    order (``shuffle_seed``; ``None`` keeps the given order). ``seed_rows``: D_seed, in Z from
    the start (conditional z-filtering). ``batch_size``: None scales it to the rows of D'
    (:func:`~zdebias.stats.settings.scaled_batch_size`). ``label_prior``: ``empirical`` tests
    z against the label shares of all the rows the filter sees (seed and D'), decided once, so
    the filter drives each feature toward those shares and keeps them (docs/design.md §14);
    uniform or None: 1/L. ``keep``: ``[F]`` bool, the features that are the task
    (``keep_features``): never in B_Z(l), so top-k is taken over the other features and they reject
    no row. ``min_z``: a feature is biased only with z above it (0, the paper's top-k; ``critical``:
    z_critical at α 0.01 over the features present in the rows seen, so only significant
    features reject). ``min_label_share``: a row that B_Z(l) rejects is kept instead while
    the kept share of label l's rows visited so far, this one included, is below it
    (:func:`_floor_rescue`); None: Algorithm 1 exactly. Returns row indices, not records.
    """
    if batch_size is not None and batch_size < 1:
        raise ConfigError(f"batch_size must be at least 1, not {batch_size}")
    if top_k < 0:
        raise ConfigError(f"top_k must be at least 0, not {top_k}")
    m = checked_inputs(matrix, label_ids, num_labels)
    y = np.asarray(label_ids, dtype=np.int64)
    n_rows, n_feat = m.shape
    seed = np.zeros(0, np.int64) if seed_rows is None else np.asarray(seed_rows, np.int64)
    if rows is None:
        mask = np.ones(n_rows, dtype=bool)
        mask[seed] = False
        cand = np.flatnonzero(mask)
    else:
        cand = np.asarray(rows, dtype=np.int64)
    batch_size = scaled_batch_size(len(cand), batch_size)
    in_seed = np.zeros(n_rows, dtype=bool)
    in_seed[seed] = True
    if in_seed[cand].any():
        raise ConfigError("a row cannot be both in the seed and in the data to filter")
    order = (
        cand
        if shuffle_seed is None
        else cand[np.random.default_rng(shuffle_seed).permutation(len(cand))]
    )
    big_l = num_labels
    seen = np.concatenate([y[seed], y[cand]])
    p0 = prior_p0(np.bincount(seen, minlength=big_l), label_prior)
    min_z = _min_z(min_z, m, seed, cand)
    floor_seen = np.zeros(big_l, dtype=np.int64)  # input rows of each label visited ...
    floor_kept = np.zeros(big_l, dtype=np.int64)  # ... and kept, for min_label_share
    floored: list[np.ndarray] = []
    counts = np.zeros(n_feat * big_l, dtype=np.int64)
    if len(seed):
        counts += label_counts(m[seed], y[seed], big_l).ravel()
    z = _z_rows(counts, np.arange(n_feat), big_l, p0)  # [L, F]
    kept = None if keep is None or not np.any(keep) else np.asarray(keep, dtype=bool)
    if kept is not None and kept.shape != (n_feat,):
        raise ValueError(f"keep has shape {kept.shape}; expected ({n_feat},)")
    if kept is not None:  # -inf: never among the top-k (min_z is finite)
        z[:, kept] = -np.inf
    topk = _TopK(z, top_k, min_z, pool=max(TOPK_POOL_MIN, TOPK_POOL_PER_K * top_k))
    # each batch's rows are gathered when it comes (a permuted copy of the whole matrix would
    # double its memory)
    indptr, indices = m.indptr, m.indices
    y_sub = y[order].astype(np.int32)
    if n_feat * big_l >= 2**31:  # pragma: no cover - two billion feature-label pairs
        raise ConfigError("too many features for z-filtering (features x labels >= 2^31)")
    flag = np.zeros(n_feat * big_l, dtype=np.int32)
    accepted = np.zeros(len(order), dtype=bool)
    rej_rows: list[np.ndarray] = []
    rej_feats: list[np.ndarray] = []
    rej_rank: list[np.ndarray] = []
    rej_z: list[np.ndarray] = []
    starts = range(0, len(order), batch_size)
    n_batches = len(starts)
    bar = None
    if progress and n_batches > 1:
        from rich.console import Console
        from rich.progress import Progress

        console = Console(stderr=True)
        if console.is_terminal:  # elsewhere a bar draws nothing but leaves a blank line
            bar = Progress(console=console, transient=True)
            bar.start()
            task = bar.add_task("z-filtering", total=len(order))
    try:
        for start in starts:
            end = min(start + batch_size, len(order))
            size = end - start
            rows_b = order[start:end]
            lengths = indptr[rows_b + 1] - indptr[rows_b]
            # the entries of those rows, in order: each row's start, then a running offset
            first = np.repeat(indptr[rows_b] - np.cumsum(lengths) + lengths, lengths)
            idx = indices[first + np.arange(len(first))].astype(np.int32, copy=False)
            # codes = feature * L + label fit in int32 too
            row_local = np.repeat(np.arange(size, dtype=np.int32), lengths)
            codes = idx * np.int32(big_l) + y_sub[start:end][row_local]
            biased = [topk.best(label) for label in range(big_l)]
            set_codes = []
            for label, feats in enumerate(biased):
                if len(feats):
                    c = feats * big_l + label
                    flag[c] = np.arange(1, len(feats) + 1, dtype=np.int32)
                    set_codes.append(c)
            if set_codes:
                rank = flag[codes]
                hit = rank > 0
                reject = np.bincount(row_local[hit], minlength=size) > 0
                if min_label_share is not None:
                    rescue = _floor_rescue(
                        reject, y_sub[start:end], floor_seen, floor_kept, min_label_share
                    )
                    if rescue.any():
                        floored.append(order[start + np.flatnonzero(rescue)])
                        reject &= ~rescue
                        hit &= reject[row_local]
                if hit.any():
                    rej_rows.append(order[start + row_local[hit]])
                    rej_feats.append(idx[hit])
                    rej_rank.append(rank[hit])
                    rej_z.append(z[y_sub[start:end][row_local[hit]], idx[hit]])
                for c in set_codes:
                    flag[c] = 0
                keep = ~reject
            else:
                keep = np.ones(size, dtype=bool)
                if min_label_share is not None:
                    _floor_rescue(~keep, y_sub[start:end], floor_seen, floor_kept, 1.0)
            accepted[start:end] = keep
            entry_keep = keep[row_local]
            acc_codes = codes[entry_keep]
            if len(acc_codes):
                np.add.at(counts, acc_codes, 1)
                touched = _unique(idx[entry_keep])
                z[:, touched] = _z_rows(counts, touched, big_l, p0)
                if kept is not None:
                    z[:, touched[kept[touched]]] = -np.inf
                topk.update(touched)
            if bar is not None:
                bar.update(task, advance=size)
    finally:
        if bar is not None:
            bar.stop()
    if rej_rows:
        rr = np.concatenate(rej_rows)
        rf = np.concatenate(rej_feats)
        rk = np.concatenate(rej_rank)
        sort = np.lexsort((rk, rr))
        rr, rf, rz = rr[sort], rf[sort], np.concatenate(rej_z)[sort]
    else:
        rr = rf = np.zeros(0, dtype=np.int64)
        rz = np.zeros(0, dtype=np.float64)
    floored_rows = None
    if min_label_share is not None:
        floored_rows = np.sort(np.concatenate(floored)) if floored else np.zeros(0, np.int64)
    return FilterArrays(
        accepted=np.sort(order[accepted]),
        rejected=np.sort(order[~accepted]),
        rejected_by_rows=rr,
        rejected_by_features=rf,
        counts=counts.reshape(n_feat, big_l),
        n_batches=n_batches,
        rejected_by_z=rz,
        batch_size=batch_size,
        min_z=float(min_z),
        floored=floored_rows,
    )


def _min_z(min_z: float | str, m: sp.csr_matrix, seed: np.ndarray, cand: np.ndarray) -> float:
    """The z floor: ``min_z`` itself, or for ``critical`` z_critical (α 0.01, as the summary
    counts significance) over the features present in the seed and candidate rows."""
    if min_z != "critical":
        if isinstance(min_z, str):
            raise ConfigError(f"min_z must be a number or 'critical', not {min_z!r}")
        return float(min_z)
    rows = np.concatenate([seed, cand])
    sub = m if len(rows) == m.shape[0] else m[np.sort(rows)]
    present = np.bincount(sub.indices, minlength=m.shape[1]) > 0
    return z_critical(int(present.sum()))


def _floor_rescue(
    reject: np.ndarray, y_b: np.ndarray, seen: np.ndarray, kept: np.ndarray, floor: float
) -> np.ndarray:
    """The rows of a batch (in visiting order, labels ``y_b``) that ``reject`` marks but the
    floor keeps: a row of label l is kept while l's kept rows are fewer than ``floor`` × its
    rows visited so far, this one included; so after every row each label keeps at least
    that share of its rows. ``seen`` / ``kept``: the running counts per label, updated."""
    rescue = np.zeros(len(reject), dtype=bool)
    if reject.any():
        s, k = seen.copy(), kept.copy()
        for i, (lab, rej) in enumerate(zip(y_b.tolist(), reject.tolist(), strict=True)):
            s[lab] += 1
            if rej:
                if k[lab] >= floor * s[lab] - 1e-9:
                    continue
                rescue[i] = True
            k[lab] += 1
    final = ~reject | rescue
    seen += np.bincount(y_b, minlength=len(seen))
    kept += np.bincount(y_b[final], minlength=len(kept))
    return rescue


# --------------------------------------------------------------------------- records API


@dataclass
class ZFilterResult:
    """Outputs of :func:`z_filter`.

    ``kept``: Z — the seed records (conditional mode), then the accepted input records, each
    group in input order. ``rejected``: Z⁻ — copies of the rejected input records with
    ``meta["rejected_by"]`` = the biased feature names that rejected each (and
    ``meta["rejected_by_features"]``, the same as FeatureKey dicts). ``accepted``: the
    accepted input records only. ``summary``: counts and top z per label before and after.
    ``features``: the feature matrix of seed + input rows (seed first).
    """

    kept: list[Record]
    rejected: list[Record]
    accepted: list[Record]
    summary: ZFilterSummary
    features: FeatureMatrix | None = None
    arrays: FilterArrays | None = field(default=None, repr=False)


def _top_block(
    names: list[str],
    labels: Sequence[str],
    counts: np.ndarray,
    k: int,
    p0: np.ndarray | None = None,
) -> dict[str, list[dict[str, Any]]]:
    z, n, p = z_from_counts(counts, p0)
    return top_table(names, labels, z, n, p, k)


def _before_after(
    names: list[str],
    labels: Sequence[str],
    before: np.ndarray,
    after: np.ndarray,
    k: int,
    p0: tuple[np.ndarray | None, np.ndarray | None] = (None, None),
) -> dict[str, list[dict[str, Any]]]:
    """Per label, its top ``k`` features before filtering: z, n, p̂ before and after, and the
    rank by z after among the features present after (after values None when absent);
    ``p0``: the null shares before and after (None: 1/L)."""
    zb, nb, pb = z_from_counts(before, p0[0])
    za, na, pa = z_from_counts(after, p0[1])
    present = na > 0
    out: dict[str, list[dict[str, Any]]] = {}
    for li, idx in enumerate(top_k(zb, k, n=nb, min_n=1)):
        rows = []
        for j in idx.tolist():
            row: dict[str, Any] = {
                "feature": names[j],
                "z_before": float(zb[j, li]),
                "n_before": int(nb[j]),
                "p_before": float(pb[j, li]),
                "z_after": None,
                "n_after": int(na[j]),
                "p_after": None,
                "rank_after": None,
            }
            if na[j] > 0:
                row["z_after"] = float(za[j, li])
                row["p_after"] = float(pa[j, li])
                row["rank_after"] = int((za[present, li] > za[j, li]).sum()) + 1
            rows.append(row)
        out[labels[li]] = rows
    return out


def summarize_filter(
    fm: FeatureMatrix,
    y: np.ndarray,
    labels: Sequence[str],
    arrays: FilterArrays,
    *,
    before_rows: np.ndarray,
    n_seed: int,
    settings: dict[str, Any],
    alpha: float = 0.01,
) -> ZFilterSummary:
    """The summary dict: sizes, label counts and top z per label before and after."""
    big_l = len(labels)
    all_rows = len(before_rows) == fm.n_records and np.array_equal(
        before_rows, np.arange(fm.n_records)
    )
    if all_rows:
        before = label_counts(fm.matrix, y, big_l)
    else:
        before = label_counts(fm.matrix[before_rows], y[before_rows], big_l)
    after = arrays.counts
    n_features = int((before.sum(axis=1) > 0).sum())
    z_c = z_critical(n_features, alpha)
    y_before = y[before_rows]
    kept_rows = np.concatenate([np.asarray(before_rows[:n_seed]), arrays.accepted])
    y_after = y[kept_rows]
    prior = settings.get("label_prior")
    totals_before = np.bincount(y_before, minlength=big_l)
    # each side against its own label shares: what `zdebias stats` of that data says
    p0 = (prior_p0(totals_before, prior), prior_p0(np.bincount(y_after, minlength=big_l), prior))
    top_before = _top_block(fm.names, labels, before, SUMMARY_TOP, p0[0])
    top_after = _top_block(fm.names, labels, after, SUMMARY_TOP, p0[1])
    z_before = z_from_counts(before, p0[0])[0]
    z_after = z_from_counts(after, p0[1])[0]
    by_feature = np.bincount(arrays.rejected_by_features, minlength=fm.n_features)
    worst = np.argsort(-by_feature, kind="stable")[:20]
    n_input = len(arrays.accepted) + len(arrays.rejected)
    n_significant_after = int((z_after > z_c).any(axis=1).sum())
    given = settings.get("zfilter_batch_size")
    summary = {
        "n_input": n_input,
        "n_seed": n_seed,
        "n_accepted": len(arrays.accepted),
        "n_kept": n_seed + len(arrays.accepted),
        "n_rejected": len(arrays.rejected),
        "kept_share_of_input": round(len(arrays.accepted) / n_input, 4) if n_input else None,
        "labels": list(labels),
        "label_counts_before": {name: int((y_before == i).sum()) for i, name in enumerate(labels)},
        "label_counts_after": {name: int((y_after == i).sum()) for i, name in enumerate(labels)},
        **settings,
        "zfilter_batch_size": arrays.batch_size,
        "zfilter_batch_size_rule": "given" if given is not None else SCALED_RULE,
        "n_batches": arrays.n_batches,
        "n_features": n_features,
        "z_critical": z_c,
        "n_significant_before": int((z_before > z_c).any(axis=1).sum()),
        "n_significant_after": n_significant_after,
        "top_z_before": {name: (r[0] if r else None) for name, r in top_before.items()},
        "top_z_after": {name: (r[0] if r else None) for name, r in top_after.items()},
        "top_before": top_before,
        "top_after": top_after,
        "top_before_after": _before_after(fm.names, labels, before, after, SUMMARY_TOP, p0),
        "rejections_by_feature": {
            fm.names[j]: int(by_feature[j]) for j in worst.tolist() if by_feature[j] > 0
        },
    }
    summary["label_prior"] = prior or "uniform"
    summary["visiting_order"] = visiting_order(settings)
    summary.update(discards(y, labels, arrays, z_c))
    if p0[0] is not None:  # cells with too few expected rows, tested exactly (of the input)
        summary["exact_test"] = exact_test(before, p0[0], z_c, labels)
    kept = kept_features(fm.names, settings.get("keep_features") or [])
    n_kept_after = 0
    if kept is not None:  # the features that are the task: reported, marked, never filtered
        n_kept_after = int(((z_after > z_c).any(axis=1) & kept.mask).sum())
        block = kept.block(np.asarray((z_before > z_c).any(axis=1)))
        unmatched = block.pop("unmatched")
        block["n_significant_before"] = block.pop("n_significant")
        block.update(n_significant_after=n_kept_after, unmatched=unmatched)
        summary["kept_features"] = block
        mark_kept(kept, summary["top_before"], summary["top_after"], summary["top_before_after"])
    note = still_significant(
        n_significant_after - n_kept_after,
        z_c,
        arrays.batch_size,
        seeded=n_seed > 0,
        min_z=arrays.min_z,
        floored=0 if arrays.floored is None else len(arrays.floored),
    )
    summary["warnings"] = [note] if note else []
    # printed with the summary (stdout), beside the share discarded, not among the warnings
    # that go to stderr: those say what would filter better, this what the filter cost
    summary["label_share_warnings"] = label_share_warnings(
        y, labels, arrays, settings.get("warn_label_share")
    )
    if kept is not None:
        summary["warnings"].extend(kept.warnings())
    if prior is None:
        summary["imbalance"] = imbalance(before, totals_before, z_c, alpha, labels)
        line = imbalance_line(summary["imbalance"])
        if line:
            summary["warnings"].append(
                line + ": z-filtering against 1/L rebalances the labels and drops rows for it"
            )
    return cast("ZFilterSummary", summary)  # its settings' keys (**settings) are in it too


def discards(
    y: np.ndarray, labels: Sequence[str], arrays: FilterArrays, z_c: float
) -> dict[str, Any]:
    """What the filter removed, for the summary: the share of the input rows rejected,
    overall and per label (seed rows excluded: they are never filtered), the z floor used,
    how many rejected rows no feature above ``z_c`` rejected (biased only as the top k of
    their label, not significant), and with ``min_label_share`` the rows it kept."""
    rejected = np.bincount(y[arrays.rejected], minlength=len(labels))
    visited = rejected + np.bincount(y[arrays.accepted], minlength=len(labels))
    n_input = int(visited.sum())
    rows, zs = arrays.rejected_by_rows, arrays.rejected_by_z
    below = None
    if zs is not None:
        below = 0
        if len(rows):
            starts = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
            below = int((np.maximum.reduceat(zs, starts) <= z_c).sum())
    out: dict[str, Any] = {
        "discarded_share": round(len(arrays.rejected) / n_input, 4) if n_input else None,
        "label_discarded_share": {
            name: (round(int(rejected[i]) / int(visited[i]), 4) if visited[i] else None)
            for i, name in enumerate(labels)
        },
        "min_z_used": arrays.min_z,
        "n_rejected_below_critical": below,
    }
    if arrays.floored is not None:
        floored = np.bincount(y[arrays.floored], minlength=len(labels))
        out["n_kept_by_floor"] = len(arrays.floored)
        out["label_kept_by_floor"] = {name: int(floored[i]) for i, name in enumerate(labels)}
    return out


def label_share_warnings(
    y: np.ndarray, labels: Sequence[str], arrays: FilterArrays, floor: float | None
) -> list[str]:
    """One warning per label of which the filter kept less than ``floor`` (the setting
    ``warn_label_share``; None: its default) of the input rows (the seed's not counted)."""
    floor = DEFAULT_WARN_LABEL_SHARE if floor is None else floor
    kept = np.bincount(y[arrays.accepted], minlength=len(labels))
    visited = kept + np.bincount(y[arrays.rejected], minlength=len(labels))
    out = []
    for i, name in enumerate(labels):
        if not visited[i] or kept[i] >= floor * visited[i]:
            continue
        out.append(
            f"z-filtering kept {kept[i]:,} of the {visited[i]:,} {name} rows "
            f"({100 * kept[i] / visited[i]:.1f}%), below --warn-label-share {floor:g}: "
            f"--min-label-share {floor:g} keeps at least that share of each label"
        )
    return out


def visiting_order(settings: dict[str, Any]) -> str:
    """How the rows were visited, and what that means for the count kept: Algorithm 1 judges
    each batch by the rows kept before it, so the order (the seed) changes how many rows it
    keeps, not only which (snli_20k dev: 1,374, 1,319 and 1,337 rows under seeds 0, 1, 2)."""
    if settings.get("shuffle") is False:
        return "file order (--no-shuffle): the same file in another order keeps other rows"
    return (
        f"seeded random order (--seed {settings.get('seed')}): each batch is judged by the "
        "rows kept before it, so another seed keeps another number of rows"
    )


def still_significant(
    n: int,
    z_c: float,
    batch_size: int,
    *,
    seeded: bool = False,
    min_z: float = 0.0,
    floored: int = 0,
) -> str | None:
    """The warning for ``n`` features still significant (z > ``z_c``) in what a z-filter
    with batches of ``batch_size`` kept (``seeded``: the seed data with it), None for none:
    what would filter more. With a z floor ``min_z`` above 0 (``--min-z critical``) a
    feature rejects only once its z over the rows kept so far passes the floor, which few
    rows cannot reach whatever the batch: the floor is what to lower. ``floored``: rows
    that ``min_label_share`` kept though biased features rejected them (they keep those)."""
    if not n:
        return None
    what = f"{n:,} feature{'s' if n != 1 else ''} still significant after z-filtering"
    where = f"z > {z_c:.2f}, {'seed data included, ' if seeded else ''}batches of {batch_size}"
    if floored:
        return (
            f"{what} ({where}): --min-label-share kept {floored:,} rows the biased features "
            "rejected, and those features with them"
        )
    if min_z > 0:
        return (
            f"{what} ({where}): a feature rejects only once its z over the rows kept so far "
            f"exceeds --min-z ({min_z:.2f}); a lower --min-z (0, the paper's) filters more"
        )
    if batch_size > 1:
        return f"{what} ({where}): a smaller --zfilter-batch-size filters more finely"
    return f"{what} ({where}): a larger --biased-k filters more"


def rejected_records(
    records: Sequence[Record],
    arrays: FilterArrays,
    names: Sequence[str],
    keys: Sequence[FeatureKey] | None = None,
) -> list[Record]:
    """Copies of the rejected records with ``meta["rejected_by"]`` (feature names) and
    ``meta["rejected_by_features"]`` (the same features as :class:`FeatureKey` dicts, one
    dict per feature shared by every record it rejected) set.

    ``keys``: the columns' keys (``FeatureMatrix.keys``); derived from ``names`` if omitted.
    """
    if len(arrays.rejected) == 0:
        return []
    cols = arrays.rejected_by_features.tolist()
    if keys is None:
        from zdebias.features.keys import FeatureKey

        key_of = {j: FeatureKey.from_name(names[j]).to_dict() for j in set(cols)}
    else:
        key_of = {j: keys[j].to_dict() for j in set(cols)}
    return tag_rejected(
        map(records.__getitem__, arrays.rejected.tolist()),
        arrays.rejected_by_rows,
        cols,
        {j: names[j] for j in key_of},
        key_of,
    )


def tag_rejected(
    rejected: Iterable[Record],
    rows: np.ndarray,
    cols: list[int],
    name_of: dict[int, str],
    key_of: dict[int, dict[str, Any]],
) -> list[Record]:
    """Copies of the ``rejected`` records with ``meta`` ``rejected_by`` and
    ``rejected_by_features`` set: ``rows`` / ``cols`` hold one entry per (rejected row,
    feature column) as in :class:`FilterArrays`, grouped by row in ascending order, one
    group per record of ``rejected`` in the same order; ``name_of`` / ``key_of``: each
    column's name and key dict.
    """
    # One dict per feature, and one pair of lists per set of rejecting features, shared by
    # the records it rejected (read them, do not edit them): at millions of rejected rows, a
    # copy each costs gigabytes (and the JSONL writer encodes a shared list once).
    shared: dict[tuple[int, ...], tuple[list[str], list[dict[str, Any]]]] = {}

    def lists(combo: tuple[int, ...]) -> tuple[list[str], list[dict[str, Any]]]:
        found = shared.get(combo)
        if found is None:
            found = shared[combo] = ([name_of[j] for j in combo], [key_of[j] for j in combo])
        return found

    # records without meta of their own share one meta dict per set (encoded once, too)
    bare: dict[tuple[int, ...], dict[str, Any]] = {}

    if len(rows) == 0:
        return []
    cuts = [0, *(np.flatnonzero(np.diff(rows)) + 1).tolist(), len(rows)]
    out = []
    for r, a, b in zip(rejected, cuts[:-1], cuts[1:], strict=True):
        combo = tuple(cols[a:b])
        if r.meta:
            by_name, by_key = lists(combo)
            meta = {**r.meta, "rejected_by": by_name, "rejected_by_features": by_key}
        else:
            meta = bare.get(combo)  # type: ignore[assignment]
            if meta is None:
                by_name, by_key = lists(combo)
                meta = bare[combo] = {"rejected_by": by_name, "rejected_by_features": by_key}
        out.append(Record(r.id, r.label, r.premise, r.hypothesis, r.text, meta))
    return out


def filter_options(cfg: ZFilterSettings, names: Sequence[str] | None = None) -> dict[str, Any]:
    """The keywords of :func:`z_filter_matrix` that the settings give: k, batch size (None:
    scaled to the data), visiting order, the z floor, the label prior and, with
    ``keep_features``, the kept columns among ``names`` (the feature matrix's)."""
    out: dict[str, Any] = {
        "top_k": cfg.biased_k,
        "batch_size": cfg.zfilter_batch_size,
        "shuffle_seed": cfg.shuffle_seed,
        "min_z": cfg.min_z,
        "label_prior": cfg.label_prior,
        "min_label_share": cfg.min_label_share,
    }
    if cfg.keep_features:
        if names is None:
            raise ValueError("keep_features needs the feature names")
        kept = kept_features(names, cfg.keep_features)
        out["keep"] = None if kept is None else kept.mask
    return out


def summary_settings(cfg: ZFilterSettings) -> dict[str, Any]:
    """The settings a z-filter summary records, under their names as settings (and CLI
    options, recipe keys): ``zfilter_batch_size`` as given (None: scaled to the data)."""
    return {
        "biased_k": cfg.biased_k,
        "zfilter_batch_size": cfg.zfilter_batch_size,
        "shuffle": cfg.shuffle,
        "seed": cfg.seed,
        "min_z": cfg.min_z,
        "label_prior": cfg.label_prior,
        "features": cfg.features if cfg.features is not None else "default",
        "warn_label_share": cfg.warn_label_share,
        **({"min_label_share": cfg.min_label_share} if cfg.min_label_share is not None else {}),
        **({"keep_features": cfg.keep_features} if cfg.keep_features else {}),
    }


def filter_summary(
    fm: FeatureMatrix,
    y: np.ndarray,
    labels: Sequence[str],
    arrays: FilterArrays,
    cfg: ZFilterSettings,
    *,
    n_seed: int = 0,
    given_matrix: bool = False,
) -> ZFilterSummary:
    """:func:`summarize_filter` of every row of ``fm`` (the first ``n_seed`` the seed's) with
    the settings ``cfg`` records (``given_matrix``: features given, not extracted here)."""
    settings = summary_settings(cfg)
    if given_matrix:
        settings["features"] = "default"
    before = np.arange(fm.n_records)
    return summarize_filter(
        fm, y, labels, arrays, before_rows=before, n_seed=n_seed, settings=settings
    )


def _filter(
    everything: list[Record],
    n_seed: int,
    labels: tuple[str, ...],
    cfg: ZFilterSettings,
    *,
    feature_matrix: FeatureMatrix | None = None,
    progress: bool = False,
) -> tuple[FeatureMatrix, np.ndarray, FilterArrays]:
    """Features (unless given), label ids and Algorithm 1 of seed records (the first
    ``n_seed``) and input records (the rest, at least one)."""
    from zdebias.features.extract import extract_features

    y = label_ids(everything, labels)
    if feature_matrix is not None:
        fm = feature_matrix
        if fm.n_records != len(everything):
            raise ConfigError(
                f"feature matrix has {fm.n_records} rows for {len(everything)} records"
            )
    else:
        kwargs = cfg.feature_kwargs()
        if n_seed:  # the default hypothesis-only model learns from the seed (the original data)
            kwargs.setdefault("hypo_only_fit", np.arange(n_seed))  # alone, as in combine
        fm = extract_features(everything, cfg.features, labels=labels, progress=progress, **kwargs)
    arrays = z_filter_matrix(
        fm.matrix,
        y,
        len(labels),
        rows=np.arange(n_seed, len(everything)),
        seed_rows=np.arange(n_seed),
        progress=progress,
        **filter_options(cfg, fm.names),
    )
    return fm, y, arrays


def z_filter_arrays(
    records: Sequence[Record],
    settings: ZFilterSettings,
    *,
    labels: Sequence[str] | None = None,
    progress: bool = False,
) -> tuple[FeatureMatrix, np.ndarray, FilterArrays, tuple[str, ...]]:
    """:func:`z_filter` of at least one record without a seed, as the feature matrix, the
    label ids, the filter's arrays (rows kept, rows rejected and by which features) and the
    labels, for a caller that writes the records itself (``zdebias filter``); its summary is
    :func:`filter_summary` of them."""
    records = list(records)
    found = tuple(labels) if labels is not None else infer_task(records).labels
    return (*_filter(records, 0, found, settings, progress=progress), found)


def z_filter(
    records: Sequence[Record],
    settings: ZFilterSettings | None = None,
    *,
    seed_records: Sequence[Record] | None = None,
    labels: Sequence[str] | None = None,
    feature_matrix: FeatureMatrix | None = None,
    progress: bool = False,
    **overrides: Any,
) -> ZFilterResult:
    """z-filter ``records`` (Z(D')), or conditionally on ``seed_records`` (Z(D' | D_seed)).

    ``settings``: a :class:`~zdebias.stats.settings.ZFilterSettings` (k, batch, order, features);
    ``overrides``: fields of it as keywords, e.g. ``z_filter(records, biased_k=5)``.
    ``feature_matrix``: ready features whose rows are seed records then ``records``.
    Every input record ends up exactly once in ``kept`` or ``rejected``. With seed records the
    default hypothesis-only model is fitted on them alone (as :func:`~zdebias.stats.recipes.
    combine` fits it on the original data), so ``Z(generated | original)`` here and Z-Aug
    there use the same feature.

    >>> result = z_filter(read_records("train.jsonl"), biased_k=20)   # doctest: +SKIP
    >>> len(result.kept) + len(result.rejected)                         # doctest: +SKIP
    19993
    """
    from zdebias.features.matrix import FeatureMatrix

    if isinstance(overrides.get("features"), FeatureMatrix):
        feature_matrix = overrides.pop("features")  # the 0.1 spelling
    cfg = ZFilterSettings.of(settings, **overrides)
    records = list(records)
    seed = list(seed_records or [])
    everything = seed + records
    labels = tuple(labels) if labels is not None else infer_task(everything).labels
    if not records:
        return ZFilterResult(
            kept=seed,
            rejected=[],
            accepted=[],
            summary=cast(
                "ZFilterSummary",
                {
                    "n_input": 0,
                    "n_seed": len(seed),
                    "n_accepted": 0,
                    "n_kept": len(seed),
                    "n_rejected": 0,
                    "labels": list(labels),
                    **summary_settings(cfg),
                    "zfilter_batch_size_rule": "given"
                    if cfg.zfilter_batch_size is not None
                    else SCALED_RULE,
                    "n_batches": 0,
                    "warnings": [],
                },
            ),
        )
    fm, y, arrays = _filter(
        everything, len(seed), labels, cfg, feature_matrix=feature_matrix, progress=progress
    )
    with gc_paused():
        accepted = [everything[i] for i in arrays.accepted.tolist()]
        rejected = rejected_records(everything, arrays, fm.names, fm.keys)
    summary = filter_summary(
        fm, y, labels, arrays, cfg, n_seed=len(seed), given_matrix=feature_matrix is not None
    )
    return ZFilterResult(
        kept=seed + accepted,
        rejected=rejected,
        accepted=accepted,
        summary=summary,
        features=fm,
        arrays=arrays,
    )


__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_TOP_K",
    "FilterArrays",
    "ZFilterResult",
    "filter_options",
    "filter_summary",
    "still_significant",
    "summarize_filter",
    "z_filter",
    "z_filter_arrays",
    "z_filter_matrix",
]
