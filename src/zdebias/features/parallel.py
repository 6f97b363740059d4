"""Feature extraction over several processes (the ``num_proc`` setting).

The records are cut into contiguous chunks; a forked worker runs the feature groups on each
chunk, and the parent merges the blocks back by feature name, reproducing the column order of a
single process exactly, so the output never depends on ``num_proc``:

- n-gram blocks are sorted by name, so their union is sorted again;
- bins, thresholds and ``<null>`` emit the same columns in every chunk;
- per-record (user) features are numbered by first appearance, chunk after chunk.

The hypothesis-only feature is fitted once, in the parent, on every record (its cross-fitting
needs them all), from the merged hypothesis n-grams; user batch groups also run in the parent.
Workers are forked (the records are shared, not copied through a pipe); where ``fork`` is not
available extraction stays in one process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from itertools import chain, pairwise
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.data.process import forked_pool, gc_paused
from zdebias.data.schema import Record
from zdebias.features.context import FeatureContext
from zdebias.features.groups import run_group
from zdebias.features.keys import FeatureKey
from zdebias.features.matrix import RowParts
from zdebias.features.registry import FeatureSpec

if TYPE_CHECKING:
    import scipy.sparse as sp

#: ``num_proc`` unset means one process: measured on 2 cores (docs/scaling.md), the parent's
#: share (merging, the hypothesis-only fit) left no gain to take.
DEFAULT_NUM_PROC = 1
#: Built-in batch groups that can run chunk by chunk; n-gram groups merge by sorted name.
CHUNKED_GROUPS = frozenset(
    {"ngrams", "unigrams", "bigrams", "hypo-len", "len-ratio", "lex-overlap", "null"}
)
SORTED_GROUPS = frozenset({"ngrams", "unigrams", "bigrams"})
#: The hypothesis n-grams the hypothesis-only feature reads (``ngram_block`` cache keys).
HYPO_NGRAM_KEYS = (("ngrams", "hypothesis", 1), ("ngrams", "hypothesis", 2))

Block = tuple["sp.csr_matrix", list[str], list[FeatureKey]]

_STATE: dict[str, Any] = {}


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def resolve_num_proc(num_proc: int | None, n_records: int) -> int:
    """Processes to use: ``num_proc`` (default :data:`DEFAULT_NUM_PROC`; 0: every core),
    never more than records; 1 without ``fork``."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1  # pragma: no cover - Windows
    if num_proc is None:
        num_proc = DEFAULT_NUM_PROC
    if num_proc == 0:
        num_proc = available_cores()
    return max(1, min(int(num_proc), n_records))


def chunkable(spec: FeatureSpec) -> bool:
    """True for groups whose features of a record depend on that record alone."""
    return not spec.batch or spec.name in CHUNKED_GROUPS


def _split(parts: list[sp.csr_matrix], names: list[str], keys: list[FeatureKey]) -> list[Block]:
    out, at = [], 0
    for p in parts:
        width = p.shape[1]
        out.append((p, names[at : at + width], keys[at : at + width]))
        at += width
    return out


def _pack(block: Block) -> tuple[Any, ...]:
    """A block made cheap to send back: n-gram names as one string, their keys rebuilt by the
    parent (a hundred thousand pickled keys cost more than extracting them)."""
    m, names, keys = block
    if keys and all(k.kind == "ngram" for k in keys):
        field, tokenizer = keys[0].field, keys[0].tokenizer
        suffix = f"@{field}"
        simple = all(
            k.field == field and k.tokenizer == tokenizer and " ".join(k.tokens) + suffix == name
            for name, k in zip(names, keys, strict=True)
        )
        joined = "\x00".join(names)
        if simple and joined.count("\x00") == len(names) - 1:  # no NUL inside a name
            return m, joined, (field, tokenizer)
    return m, names, keys


def _names(packed: tuple[Any, ...]) -> list[str]:
    names = packed[1]
    return (names.split("\x00") if names else []) if isinstance(names, str) else names


def _ngram_keys(names: list[str], field: str, tokenizer: str | None) -> list[FeatureKey]:
    cut = -len(field) - 1
    return [FeatureKey.ngram(n, field, n[:cut].split(" "), tokenizer) for n in names]


def _chunk_worker(start: int, end: int) -> ChunkResult:
    """Run the chunkable groups on records ``[start, end)`` (in a forked worker)."""
    return chunk_blocks(
        _STATE["records"][start:end],
        _STATE["specs"],
        _STATE["settings"],
        labels=_STATE["labels"],
        pair=_STATE["pair"],
        hypo_ngrams=_STATE["hypo_ngrams"],
    )


#: one chunk's packed blocks per group, and the hypothesis n-gram blocks (references into
#: those, or packed blocks of their own)
ChunkResult = tuple[list[list[Any]], dict[Any, Any]]


def chunk_blocks(
    records: Sequence[Record],
    specs: list[FeatureSpec],
    settings: dict[str, Any],
    *,
    labels: Sequence[str] | None,
    pair: bool,
    hypo_ngrams: bool,
) -> ChunkResult:
    """The chunkable groups ``specs`` run on ``records`` (one chunk), packed to send back;
    ``hypo_ngrams``: also the hypothesis n-grams the hypothesis-only feature reads."""
    ctx = FeatureContext(records, settings, labels=labels)
    groups: list[list[tuple[Any, ...]]] = []
    with gc_paused():
        for spec in specs:
            parts, names, keys = run_group(spec, ctx, records, settings, pair)
            groups.append([_pack(block) for block in _split(parts, names, keys)])
        extra: dict[Any, Any] = {}
        if hypo_ngrams:
            from zdebias.features.ngrams import ngram_keyed_block

            for key in HYPO_NGRAM_KEYS:
                block = ngram_keyed_block(ctx, key[1], key[2])
                extra[key] = next(
                    (
                        (g, b)
                        for g, blocks in enumerate(groups)
                        for b, (m, _, _) in enumerate(blocks)
                        if m is block[0]
                    ),
                    _pack(block),  # not among the groups' blocks: sent on its own
                )
    return groups, extra


def _union(
    chunks: list[tuple[Any, ...]], sort: bool
) -> tuple[list[list[str]], list[str], list[FeatureKey]]:
    """Each chunk's column names, and the columns of the merged block: names and keys."""
    names_of = [_names(packed) for packed in chunks]
    if sort:
        union = sorted(set(chain.from_iterable(names_of)))
    else:
        union = list(dict.fromkeys(chain.from_iterable(names_of)))
    packed_keys = {packed[2] for packed in chunks if isinstance(packed[1], str)}
    if len(packed_keys) == 1 and all(isinstance(p[1], str) or not p[1] for p in chunks):
        return names_of, union, _ngram_keys(union, *packed_keys.pop())
    key_of: dict[str, FeatureKey] = {}
    for packed, names in zip(chunks, names_of, strict=True):
        keys = _ngram_keys(names, *packed[2]) if isinstance(packed[1], str) else packed[2]
        for name, key in zip(names, keys, strict=True):
            key_of.setdefault(name, key)
    return names_of, union, [key_of[name] for name in union]


def _align(
    chunks: list[tuple[Any, ...]], sort: bool, in_place: bool = True
) -> tuple[RowParts, list[str], list[FeatureKey]]:
    """The same (packed) block of every chunk as one block of row parts: each part's columns
    renumbered (``in_place``: in the chunk's own arrays) to the union of the chunks' columns
    (n-gram blocks are sorted by name, so their union is sorted and the renumbering keeps
    each row's order)."""
    import scipy.sparse as sp

    names_of, union, keys = _union(chunks, sort)
    index = {name: j for j, name in enumerate(union)}
    parts = []
    for (m, _, _), names in zip(chunks, names_of, strict=True):
        cols = np.fromiter(map(index.__getitem__, names), dtype=m.indices.dtype, count=len(names))
        indices = m.indices
        if len(cols) and len(indices):
            if in_place and indices.flags.writeable:
                np.take(cols, indices, out=indices)
            else:
                indices = cols[indices]
        parts.append(sp.csr_matrix((m.data, indices, m.indptr), shape=(m.shape[0], len(union))))
    return RowParts(parts, len(union)), union, keys


def _part(block: tuple[RowParts, list[str], list[FeatureKey]], c: int) -> tuple[Any, ...]:
    """Chunk ``c``'s part of an aligned block, packed."""
    parts, union, keys = block
    return parts.parts[c], union, keys


def _merge(
    chunks: list[tuple[Any, ...]], sort: bool
) -> tuple[sp.csr_matrix, list[str], list[FeatureKey]]:
    """One block from the same (packed) block of every chunk: rows stacked, columns unified
    by name."""
    parts, union, keys = _align(chunks, sort, in_place=False)
    merged = parts.stacked()
    merged.sort_indices()
    return merged, union, keys


def run_groups_parallel(
    specs: list[FeatureSpec],
    ctx: FeatureContext,
    settings: dict[str, Any],
    pair: bool,
    num_proc: int,
) -> tuple[list[Any], list[str], list[FeatureKey]]:
    """Every group's blocks, names and keys, as one process gets them (chunked blocks as row
    parts), with the chunkable groups run on ``num_proc`` chunks of the records in forked
    workers."""
    records = ctx.records
    chunked = [s for s in specs if chunkable(s)]
    hypo_ngrams = any(s.name == "hypo-only" for s in specs)
    n = len(records)
    bounds = np.linspace(0, n, num_proc + 1).astype(np.int64).tolist()
    _STATE.update(
        records=records,
        settings=settings,
        labels=ctx.labels,
        specs=chunked,
        pair=pair,
        hypo_ngrams=hypo_ngrams,
    )
    try:
        with forked_pool(num_proc) as pool:
            futures = [pool.submit(_chunk_worker, a, b) for a, b in pairwise(bounds)]
            results = [f.result() for f in futures]
    finally:
        _STATE.clear()
    return merge_chunks(specs, results, ctx, settings, pair)


def merge_chunks(
    specs: list[FeatureSpec],
    results: list[ChunkResult],
    ctx: FeatureContext,
    settings: dict[str, Any],
    pair: bool,
    ready: Callable[[FeatureContext], None] | None = None,
) -> tuple[list[Any], list[str], list[FeatureKey]]:
    """Every group's blocks, names and keys from the chunks' results (in record order): the
    chunkable groups' blocks as :class:`~zdebias.features.matrix.RowParts`, the others (the
    hypothesis-only feature) run on ``ctx``, which gets the merged hypothesis n-grams
    (``ready(ctx)`` is called then, before they run)."""
    records = ctx.records
    chunked = [s for s in specs if chunkable(s)]
    hypo_ngrams = any(s.name == "hypo-only" for s in specs)
    merged: list[list[tuple[RowParts, list[str], list[FeatureKey]]]] = []
    for g, spec in enumerate(chunked):
        per_chunk = [groups[g] for groups, _ in results]
        n_blocks = {len(chunk) for chunk in per_chunk}
        if len(n_blocks) != 1:  # pragma: no cover - a group's blocks depend on its data
            raise RuntimeError(f"feature {spec.name!r} returned a different number of blocks")
        sort = spec.batch and spec.name in SORTED_GROUPS
        group = []
        for b in range(n_blocks.pop()):
            group.append(_align([chunk[b] for chunk in per_chunk], sort))
            for chunk in per_chunk:  # the row parts hold them now: let them go with those
                chunk[b] = None
        merged.append(group)
    if hypo_ngrams:
        # the hypothesis-only feature reads the hypothesis n-grams stacked (a copy, which the
        # caller lets go, with ctx.cache, before the matrix is assembled)
        for key in HYPO_NGRAM_KEYS:
            refs = [extra[key] for _, extra in results]
            if len({r if len(r) == 2 else None for r in refs}) == 1 and len(refs[0]) == 2:
                g, b = refs[0]
                parts, union, keys = merged[g][b]
                ctx.cache[key] = (parts.stacked(), union, keys)
            else:
                own = [  # packed blocks; a group's block as aligned above
                    r if len(r) == 3 else _part(merged[r[0]][r[1]], c) for c, r in enumerate(refs)
                ]
                ctx.cache[key] = _merge(own, sort=True)
    if ready is not None:
        ready(ctx)
    blocks: list[Any] = []
    all_names: list[str] = []
    all_keys: list[FeatureKey] = []
    done = iter(merged)
    for spec in specs:
        if chunkable(spec):
            parts = next(done)
        else:
            m, names, keys = run_group(spec, ctx, records, settings, pair)
            parts = _split(m, names, keys)
        for m, names, keys in parts:
            blocks.append(m)
            all_names.extend(names)
            all_keys.extend(keys)
    return blocks, all_names, all_keys
