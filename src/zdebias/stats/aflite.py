"""AFLite (Le Bras et al. 2020; Sakaguchi et al. 2020, Algorithm 1; docs/design.md §12) on
embeddings.

    S ← D
    while |S| > target:
        train n linear models, each on a random subset of S of size m
        score(i) ← share of the models that did not train on i and predict its label
        remove the k rows of highest score with score ≥ τ (fewer if the target is met)
        stop if fewer than k rows had score ≥ τ

:func:`aflite_arrays` is the algorithm on arrays (embeddings and label ids in, the round each
row was removed in and its score out); :func:`aflite_filter` runs it on records and writes
the verdicts as ``zdebias filter`` does. The embeddings come from above this package
(:data:`Embed`, e.g. :func:`zdebias.classify.embed.embed_records`); nothing here needs torch.

Decisions where the papers are silent:

- The n models of a round are trained at once: multinomial logistic regression with an
  intercept and an L2 penalty, ``aflite_steps`` full-batch steps of Nesterov's accelerated
  gradient with step 1/L (L: a bound on the loss's curvature from the embeddings' largest
  eigenvalue), on the embeddings centred and scaled per round. One matrix product over the
  rows left gives every model's gradient; each model's loss counts only its own rows.
- Each model's m training rows are a seeded random subset; rows of equal score are removed in
  a seeded random order. A run is a function of its inputs and seed.
- m, k and the target are scaled to the data unless given
  (:func:`~zdebias.stats.settings.scaled_aflite`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.data.labels import infer_task
from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.stats.settings import AFLITE_RULE, AfliteSettings, scaled_aflite
from zdebias.stats.zstats import label_ids

if TYPE_CHECKING:
    from zdebias.stats.summaries import AfliteSummary

#: ``(records, settings, *, progress) -> (embeddings [rows, dim], info)``: the rows'
#: embeddings with ``settings.encoder`` and what was done (encoder, cache hit);
#: :func:`zdebias.classify.embed.embed_records`.
Embed = Callable[..., tuple[np.ndarray, dict[str, Any]]]
#: the reason a rejected row carries in ``meta.rejected_by``
REASON = "aflite"


@dataclass
class AfliteArrays:
    """The outcome of :func:`aflite_arrays`, one entry per row.

    ``removed_in``: the round (1, 2, ...) a row was removed in, 0 for a kept row. ``score``:
    its predictability in that round (a kept row: in the last round it was scored; NaN when
    it never was, or no model held it out). ``rounds``: per round, the rows scored, the
    models' train size, the rows at or above τ, the rows removed and the mean score.
    ``stopped``: why the loop ended.
    """

    removed_in: np.ndarray
    score: np.ndarray
    rounds: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = ""


def _softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last (short: the labels) axis, in place; label by label, which is
    several times faster than numpy's reductions over an axis of 2-3."""
    c = logits.shape[-1]
    top = logits[..., 0].copy()
    for j in range(1, c):
        np.maximum(top, logits[..., j], out=top)
    logits -= top[..., None]
    np.exp(logits, out=logits)
    total = logits[..., 0].copy()
    for j in range(1, c):
        total += logits[..., j]
    logits /= total[..., None]
    return logits


def train_models(
    x: np.ndarray, y: np.ndarray, train: np.ndarray, num_labels: int, *, steps: int, l2: float
) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regressions, one per row of ``train`` (bool ``[models, rows]``:
    the rows each model learns from), trained at once. ``x``: ``[rows, dim]`` float32,
    ``y``: label ids. Returns the weights ``[dim, models, labels]`` and intercepts
    ``[models, labels]``.

    Each model minimises its rows' mean cross-entropy + ``l2``/2·|W|² by ``steps`` steps of
    Nesterov's accelerated gradient with step 1/L, L = λ_max(xᵀx / rows)/2 + l2 bounding
    every model's curvature (the intercept's feature 1 included in λ_max)."""
    rows, dim = x.shape
    models = train.shape[0]
    c = num_labels
    onehot = np.zeros((rows, c), dtype=np.float32)
    onehot[np.arange(rows), y] = 1
    per_row = (train.T / np.maximum(train.sum(axis=1), 1)).astype(np.float32)  # [rows, models]
    gram = np.empty((dim + 1, dim + 1), dtype=np.float64)
    gram[:dim, :dim] = x.T.astype(np.float64) @ x
    gram[:dim, dim] = gram[dim, :dim] = x.sum(axis=0)
    gram[dim, dim] = rows
    # a model's rows are a random share of the rows: their Gram matrix per row is the whole's
    # up to sampling noise, which the margin of 1.5 covers
    lipschitz = 1.5 * 0.5 * float(np.linalg.eigvalsh(gram / rows)[-1]) + l2
    lr = np.float32(1.0 / lipschitz)
    ones = np.ones(rows, dtype=np.float32)
    w = np.zeros((dim, models * c), dtype=np.float32)
    b = np.zeros((models, c), dtype=np.float32)
    w_prev, b_prev = w.copy(), b.copy()
    for t in range(steps):
        mom = np.float32(t / (t + 3))
        w_look = w + mom * (w - w_prev)
        b_look = b + mom * (b - b_prev)
        probs = _softmax((x @ w_look).reshape(rows, models, c) + b_look)
        probs -= onehot[:, None, :]
        probs *= per_row[:, :, None]
        grad_w = x.T @ probs.reshape(rows, models * c) + np.float32(l2) * w_look
        grad_b = (ones @ probs.reshape(rows, models * c)).reshape(models, c)
        w_prev, b_prev = w, b
        w = w_look - lr * grad_w
        b = b_look - lr * grad_b
    return w.reshape(dim, models, c), b


def predictability(
    x: np.ndarray,
    y: np.ndarray,
    train: np.ndarray,
    num_labels: int,
    *,
    steps: int,
    l2: float,
) -> np.ndarray:
    """Each row's AFLite score: the share of the models that did not train on it (``train``:
    bool ``[models, rows]``) that predict its label; NaN for a row every model trained on."""
    w, b = train_models(x, y, train, num_labels, steps=steps, l2=l2)
    rows, models = x.shape[0], train.shape[0]
    logits = (x @ w.reshape(x.shape[1], -1)).reshape(rows, models, num_labels) + b
    correct = logits.argmax(axis=2) == y[:, None]  # [rows, models]
    held_out = ~train.T
    n_held = held_out.sum(axis=1)
    hits = (correct & held_out).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_held > 0, hits / n_held, np.nan)


def aflite_arrays(
    x: np.ndarray,
    y: np.ndarray,
    num_labels: int,
    *,
    n: int,
    m: int,
    k: int,
    tau: float,
    target: int,
    seed: int,
    steps: int = 100,
    l2: float = 1e-3,
    progress: bool = False,
) -> AfliteArrays:
    """AFLite on embeddings ``x`` ``[rows, dim]`` with label ids ``y`` ``[rows]``: n models
    of m rows per round, up to k rows at or above τ removed per round, down to ``target``
    rows. Deterministic given ``seed``."""
    x = np.asarray(x, dtype=np.float32)
    y = np.asarray(y, dtype=np.int64)
    if x.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ConfigError(f"embeddings of shape {x.shape} for {y.shape[0]} rows")
    rows = x.shape[0]
    rng = np.random.default_rng(seed)
    removed_in = np.zeros(rows, dtype=np.int32)
    score = np.full(rows, np.nan)
    alive = np.arange(rows)
    out = AfliteArrays(removed_in, score)
    round_no = 0
    while True:
        size = alive.size
        if size <= target:
            out.stopped = f"target size {target} reached"
            break
        if size <= m:
            out.stopped = f"{size} rows left, no more than the train size m = {m}"
            break
        round_no += 1
        xs = x[alive]
        xs = xs - xs.mean(axis=0)
        xs /= max(float(np.sqrt((xs.astype(np.float64) ** 2).sum(axis=1).mean())), 1e-12)
        picks = np.argsort(rng.random((n, size)), axis=1)[:, :m]
        train = np.zeros((n, size), dtype=bool)
        np.put_along_axis(train, picks, True, axis=1)
        scores = predictability(xs, y[alive], train, num_labels, steps=steps, l2=l2)
        score[alive] = scores
        # at or above τ (a share of held-out models: compared as counts, no rounding)
        above = np.flatnonzero(scores >= tau - 1e-12)
        order = np.lexsort((rng.random(above.size), -scores[above]))
        drop = above[order][: min(k, size - target)]
        removed_in[alive[drop]] = round_no
        out.rounds.append(
            {
                "round": round_no,
                "rows": int(size),
                "m": int(m),
                "at_or_above_tau": int(above.size),
                "removed": int(drop.size),
                "mean_score": round(float(np.nanmean(scores)), 4),
            }
        )
        if progress:
            import logging

            logging.getLogger("zdebias").info(
                "aflite round %d: %d rows, %d at or above τ, %d removed",
                round_no,
                size,
                above.size,
                drop.size,
            )
        alive = np.delete(alive, drop)
        if above.size < k:
            out.stopped = f"fewer than k = {k} rows at or above τ = {tau}"
            break
    return out


@dataclass
class AfliteResult:
    """Outputs of :func:`aflite_filter`: ``kept`` and ``rejected`` (copies with
    ``meta.rejected_by`` = ``["aflite"]``, ``meta.aflite_round`` and ``meta.aflite_score``;
    kept rows carry their last ``aflite_score``), each in input order; the ``summary`` and
    the ``arrays``."""

    kept: list[Record]
    rejected: list[Record]
    summary: AfliteSummary
    arrays: AfliteArrays = field(repr=False)


def checked_sizes(n_rows: int, settings: AfliteSettings) -> tuple[int, int, int]:
    """:func:`~zdebias.stats.settings.scaled_aflite` of ``n_rows``, refused when a model
    could not hold any row out (m at or above the rows)."""
    m, k, target = scaled_aflite(n_rows, settings)
    if m >= n_rows:
        raise ConfigError(
            f"aflite_m (--aflite-m): {m} must be below the {n_rows} rows to filter, so each "
            "model holds rows out"
        )
    return m, k, target


def aflite_options(cfg: AfliteSettings, m: int, k: int, target: int) -> dict[str, Any]:
    """The keywords of :func:`aflite_arrays` that the settings and the sizes
    (:func:`checked_sizes`) give."""
    return {
        "n": cfg.aflite_n,
        "m": m,
        "k": k,
        "tau": cfg.aflite_tau,
        "target": target,
        "seed": cfg.seed,
        "steps": cfg.aflite_steps,
        "l2": cfg.aflite_l2,
    }


def _score(value: float) -> float | None:
    return None if np.isnan(value) else round(float(value), 4)


def aflite_filter(
    records: Sequence[Record],
    settings: AfliteSettings | None = None,
    *,
    embeddings: np.ndarray,
    labels: Sequence[str] | None = None,
    embedding_info: dict[str, Any] | None = None,
    progress: bool = False,
    **overrides: Any,
) -> AfliteResult:
    """AFLite of ``records`` on their ``embeddings`` (``[len(records), dim]``, e.g. from
    :func:`zdebias.classify.embed.embed_records`); ``settings`` / ``overrides``: the
    :class:`~zdebias.stats.settings.AfliteSettings` fields. Every record ends up once in
    ``kept`` or ``rejected``."""
    cfg = AfliteSettings.of(settings, **overrides)
    records = list(records)
    labels = tuple(labels) if labels is not None else infer_task(records).labels
    x = np.asarray(embeddings)
    if x.ndim != 2 or x.shape[0] != len(records):
        raise ConfigError(f"embeddings of shape {x.shape} for {len(records)} records")
    m, k, target = checked_sizes(len(records), cfg)
    y = label_ids(records, labels)
    arrays = aflite_arrays(
        x, y, len(labels), **aflite_options(cfg, m, k, target), progress=progress
    )
    kept: list[Record] = []
    rejected: list[Record] = []
    for i, record in enumerate(records):
        s = _score(arrays.score[i])
        r = int(arrays.removed_in[i])
        if r:
            meta = {**record.meta, "rejected_by": [REASON], "aflite_round": r, "aflite_score": s}
            rejected.append(record.replace(meta=meta))
        else:
            kept.append(record.replace(meta={**record.meta, "aflite_score": s}))
    keep = arrays.removed_in == 0
    given = {
        name: getattr(cfg, name) is not None for name in ("aflite_m", "aflite_k", "aflite_target")
    }
    summary: AfliteSummary = {
        "method": "aflite",
        "n_input": len(records),
        "n_seed": 0,
        "n_accepted": len(kept),
        "n_kept": len(kept),
        "n_rejected": len(rejected),
        "kept_share_of_input": round(len(kept) / len(records), 4) if records else 0.0,
        "labels": list(labels),
        "label_counts_before": _counts(y, labels),
        "label_counts_after": _counts(y[keep], labels),
        "aflite_n": cfg.aflite_n,
        "aflite_m": m,
        "aflite_k": k,
        "aflite_tau": cfg.aflite_tau,
        "aflite_target": target,
        "aflite_steps": cfg.aflite_steps,
        "aflite_l2": cfg.aflite_l2,
        "seed": cfg.seed,
        "aflite_rule": {key: "given" if given[key] else rule for key, rule in AFLITE_RULE.items()},
        "n_rounds": len(arrays.rounds),
        "rounds": arrays.rounds,
        "stopped": arrays.stopped,
        "embeddings": {"shape": list(x.shape), **(embedding_info or {})},
        "warnings": [],
    }
    return AfliteResult(kept, rejected, summary, arrays)


def _counts(y: np.ndarray, labels: Sequence[str]) -> dict[str, int]:
    counts = np.bincount(y, minlength=len(labels))
    return {name: int(c) for name, c in zip(labels, counts, strict=True)}


__all__ = [
    "REASON",
    "AfliteArrays",
    "AfliteResult",
    "Embed",
    "aflite_arrays",
    "aflite_filter",
    "aflite_options",
    "checked_sizes",
    "predictability",
    "train_models",
]
