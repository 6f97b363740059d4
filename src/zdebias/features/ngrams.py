"""Word n-gram features: ``sleeping@hypothesis``, ``is sleeping@hypothesis``, ``man@premise``.

Premise and hypothesis n-grams are separate features (GD-NLI Table 11); single-text records get
``word@text``. An n-gram is present or absent per example. Vectorised over the whole dataset:
tokens become ids once (see :class:`~zdebias.features.context.FeatureContext`), n-grams are
integer keys, and the per-example presence matrix is built in one pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.errors import ConfigError
from zdebias.features.context import FeatureContext
from zdebias.features.keys import FeatureKey
from zdebias.features.matrix import build_csr
from zdebias.features.registry import register_feature

if TYPE_CHECKING:
    import scipy.sparse as sp

DEFAULT_NGRAM_RANGE = (1, 2)


#: n-gram keys from which :func:`_factorize` hashes (pandas) instead of sorting.
HASH_FACTORIZE = 2_000_000


def _factorize(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys and each key's position among them (``np.unique`` semantics).

    Past :data:`HASH_FACTORIZE` keys it uses a hash table (pandas), then sorts only the unique
    keys, which is much faster than sorting every key; below, sorting them all costs less than
    importing pandas. The result is identical either way.
    """
    if len(keys) < HASH_FACTORIZE:
        uniq, inverse = np.unique(keys, return_inverse=True)
        return uniq, inverse.ravel()
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas comes with datasets
        uniq, inverse = np.unique(keys, return_inverse=True)
        return uniq, inverse.ravel()
    codes, uniques = pd.factorize(keys, sort=False)
    uniques = np.asarray(uniques)
    order = np.argsort(uniques, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return uniques[order], rank[codes]


def ngram_block(ctx: FeatureContext, field_name: str, n: int) -> tuple[sp.csr_matrix, list[str]]:
    """Presence of every word n-gram of one field: ``(csr [n_records, n_ngrams], names)``."""
    m, names, _ = ngram_keyed_block(ctx, field_name, n)
    return m, names


def ngram_keyed_block(
    ctx: FeatureContext, field_name: str, n: int
) -> tuple[sp.csr_matrix, list[str], list[FeatureKey]]:
    """:func:`ngram_block` plus each column's :class:`FeatureKey` (the n-gram's tokens)."""
    key = ("ngrams", field_name, n)
    if key in ctx.cache:
        return ctx.cache[key]
    col = ctx.tokens(field_name)
    vocab = ctx.vocab_list()
    n_rows = col.n_distinct
    ids = col.ids
    rows = col.distinct_row_of_token()
    total = len(ids)
    suffix = f"@{field_name}"
    if n == 1:
        present = np.bincount(ids, minlength=len(vocab))
        used = np.flatnonzero(present)
        remap = np.full(len(vocab), -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        grams = [(vocab[i],) for i in used.tolist()]
        names = [gram[0] + suffix for gram in grams]
        entry_rows, entry_cols = rows, remap[ids]
    elif total < n:
        grams, names, entry_rows, entry_cols = [], [], rows[:0], ids[:0]
    else:
        starts = np.flatnonzero(rows[: total - n + 1] == rows[n - 1 :])
        size = max(len(vocab), 1)
        if size**n < 2**62:
            codes = np.zeros(len(starts), dtype=np.int64)
            for i in range(n):
                codes *= size
                codes += ids[starts + i]
            uniq, inverse = _factorize(codes)
            parts = []
            rest = uniq.copy()
            for _ in range(n):
                parts.append(rest % size)
                rest //= size
            parts.reverse()
        else:  # pragma: no cover - needs a huge vocabulary and n >= 4
            stacked = np.stack([ids[starts + i] for i in range(n)], axis=1)
            uniq2, inverse = np.unique(stacked, axis=0, return_inverse=True)
            parts = [uniq2[:, i] for i in range(n)]
        columns = [p.tolist() for p in parts]
        grams = [tuple(vocab[t] for t in gram) for gram in zip(*columns, strict=True)]
        names = [" ".join(gram) + suffix for gram in grams]
        entry_rows, entry_cols = rows[starts], inverse.ravel()
    # Canonical column order (alphabetical), whatever the tokenisation route or vocabulary
    # order: z ties are broken by column order, so this keeps runs comparable.
    order = np.asarray(sorted(range(len(names)), key=names.__getitem__), dtype=np.int64)
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names))
    names = [names[i] for i in order.tolist()]
    spec = ctx.tokenizer.spec
    keys = [
        FeatureKey.ngram(name, field_name, grams[i], spec)
        for name, i in zip(names, order.tolist(), strict=True)
    ]
    m = build_csr(entry_rows, rank[entry_cols], n_rows, len(names))
    ctx.cache[("distinct", *key)] = m  # one row per distinct text (col.inverse maps records)
    m = col.expand(m)
    ctx.cache[key] = (m, names, keys)
    return m, names, keys


def distinct_ngram_block(
    ctx: FeatureContext, field_name: str, n: int
) -> tuple[sp.csr_matrix, np.ndarray | None]:
    """:func:`ngram_block`'s matrix with one row per distinct text of the field, and each
    record's row in it (``None``: one row per record, as when another process made it)."""
    m, _, _ = ngram_keyed_block(ctx, field_name, n)
    distinct = ctx.cache.get(("distinct", "ngrams", field_name, n))
    if distinct is None or distinct is m:
        return m, None
    inverse = ctx.cache.get(("inverse", field_name))  # given where ctx holds no records
    return distinct, inverse if inverse is not None else ctx.tokens(field_name).inverse


def parse_ngram_range(value: Any) -> tuple[int, int]:
    """``(min, max)`` n-gram lengths from a pair or a ``"1-2"`` string, checked."""
    if isinstance(value, str):
        first, _, last = value.partition("-")
        value = (first, last or first)
    try:
        lo, hi = (int(v) for v in value)
    except (TypeError, ValueError):
        raise ConfigError(f"ngram_range must be two integers like (1, 2), not {value!r}") from None
    if not 1 <= lo <= hi:
        raise ConfigError(f"ngram_range must satisfy 1 <= min <= max, not {value!r}")
    return lo, hi


def _fields(ctx: FeatureContext) -> Sequence[str]:
    fields = ctx.settings.get("ngram_fields")
    if fields is None:
        return ctx.fields
    if isinstance(fields, str):
        fields = [f.strip() for f in fields.split(",") if f.strip()]
    bad = [f for f in fields if f not in ctx.fields]
    if bad:
        raise ConfigError(
            f"ngram_fields {bad} not among this data's fields {', '.join(ctx.fields)}"
        )
    return list(fields)


NgramBlocks = tuple[list["sp.csr_matrix"], list[str], list[FeatureKey]]


def _ngrams(ctx: FeatureContext, orders: Sequence[int]) -> NgramBlocks:
    blocks, names, keys = [], [], []
    for field_name in _fields(ctx):
        for n in orders:
            m, fn, fk = ngram_keyed_block(ctx, field_name, n)
            blocks.append(m)
            names.extend(fn)
            keys.extend(fk)
    return blocks, names, keys


@register_feature("ngrams", batch=True, settings=("ngram_range", "ngram_fields"))
def ngrams(ctx: FeatureContext) -> NgramBlocks:
    """Unigrams and bigrams (ngram_range) of premise and hypothesis, or of text."""
    lo, hi = parse_ngram_range(ctx.settings.get("ngram_range", DEFAULT_NGRAM_RANGE))
    return _ngrams(ctx, range(lo, hi + 1))


@register_feature("unigrams", batch=True, settings=("ngram_fields",))
def unigrams(ctx: FeatureContext) -> NgramBlocks:
    """Single words: man@premise, sleeping@hypothesis."""
    return _ngrams(ctx, [1])


@register_feature("bigrams", batch=True, settings=("ngram_fields",))
def bigrams(ctx: FeatureContext) -> NgramBlocks:
    """Word pairs: is sleeping@hypothesis."""
    return _ngrams(ctx, [2])


def parse_ngram(name: str) -> tuple[list[str], str] | None:
    """``"is sleeping@hypothesis"`` → ``(["is", "sleeping"], "hypothesis")``; None otherwise.

    The legacy way back from a name to its tokens (default tokenisation only); prefer the
    :class:`FeatureKey` the extractor returns (``FeatureMatrix.keys``).
    """
    key = FeatureKey.from_name(name)
    return (list(key.tokens), key.field) if key.kind == "ngram" and key.field else None
