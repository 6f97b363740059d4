"""Feature extraction: the records' feature matrix from the named feature groups.

:func:`extract_features` resolves the groups (:mod:`zdebias.features.catalogue`), tokenises
once into a :class:`~zdebias.features.context.FeatureContext`, runs each group in turn (or
chunk by chunk over several processes, :mod:`zdebias.features.parallel`) with an optional
progress bar, and assembles the blocks into a :class:`~zdebias.features.matrix.FeatureMatrix`.
A name is a registered group (``ngrams``, ``hypo-len``, ...) or a dotted path to a user function
(``mypkg.features:has_negation`` or ``mypkg.features.has_negation``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.data.labels import infer_task
from zdebias.data.process import gc_paused
from zdebias.data.schema import Record
from zdebias.errors import DataError
from zdebias.features.catalogue import feature_specs
from zdebias.features.context import FeatureContext
from zdebias.features.groups import run_group
from zdebias.features.keys import FeatureKey
from zdebias.features.matrix import FeatureMatrix, assemble_matrix
from zdebias.features.parallel import chunkable, resolve_num_proc, run_groups_parallel
from zdebias.features.registry import FeatureSpec

if TYPE_CHECKING:
    import scipy.sparse as sp


def _progress(show: bool, total: int, n_records: int) -> Any:
    """A transient rich progress bar on stderr over the feature groups (None if not shown)."""
    if not show:
        return None
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)
    if not console.is_terminal:  # a bar would draw nothing but leave a blank line
        return None
    bar = Progress(console=console, transient=True)
    bar.add_task(f"features of {n_records:,} records", total=total)
    bar.start()
    return bar


def _run_groups(
    specs: list[FeatureSpec],
    ctx: FeatureContext,
    settings: dict[str, Any],
    pair: bool,
    progress: bool,
) -> tuple[list[sp.csr_matrix], list[str], list[FeatureKey]]:
    """Every group's blocks, names and keys, in group order."""
    records = ctx.records
    blocks: list[sp.csr_matrix] = []
    all_names: list[str] = []
    all_keys: list[FeatureKey] = []
    bar = _progress(progress, len(specs), len(records))
    try:
        for spec in specs:
            if bar is not None:
                bar.update(bar.task_ids[0], description=f"features: {spec.name}")
            m, fnames, fkeys = run_group(spec, ctx, records, settings, pair)
            blocks.extend(m)
            all_names.extend(fnames)
            all_keys.extend(fkeys)
            if bar is not None:
                bar.advance(bar.task_ids[0])
    finally:
        if bar is not None:
            bar.stop()
    return blocks, all_names, all_keys


def extract_features(
    records: Sequence[Record],
    names: Sequence[str] | None = None,
    *,
    labels: Sequence[str] | None = None,
    progress: bool = False,
    num_proc: int | None = None,
    **settings: Any,
) -> FeatureMatrix:
    """Binary features of ``records`` (one row each) from the named feature groups.

    ``names``: registered groups (``ngrams``, ``unigrams``, ``bigrams``, ``hypo-len``,
    ``len-ratio``, ``lex-overlap``, ``hypo-only``, ``null``) or dotted paths of user functions;
    default :data:`~zdebias.features.catalogue.DEFAULT_PAIR_FEATURES` for pairs,
    :data:`~zdebias.features.catalogue.DEFAULT_TEXT_FEATURES` for text.
    ``labels``: the task's label names (the hypothesis-only feature needs them; inferred from
    the records when omitted). ``settings``: bin edges, tokenisation, hypothesis-only options
    (see ``docs/stats.md``). Columns that no record has are dropped. ``progress`` shows which
    group is running (on stderr). ``num_proc``: processes (default 1, 0: every core); the
    output is the same for any number (:mod:`zdebias.features.parallel`).

    >>> fm = extract_features(records, ["unigrams", "null"])          # doctest: +SKIP
    >>> fm.matrix.shape, fm.names[:2]                                 # doctest: +SKIP
    ((19993, 7412), ['two@premise', 'older@premise'])
    """
    from operator import attrgetter

    import scipy.sparse as sp

    records = records if isinstance(records, list) else list(records)
    if records:
        pair = records[0].is_pair
        # pair records have text None, single-text ones a string: one C-level pass
        if len(set(map(type, map(attrgetter("text"), records)))) > 1:
            mixed = next(r for r in records if r.is_pair != pair)
            raise DataError(
                f"record {mixed.id!r} is a {'pair' if mixed.is_pair else 'single-text'} record "
                "but the first record is not; features need one kind of record"
            )
    else:
        pair = True
    specs = feature_specs(names, pair=pair, settings=settings)
    if labels is None and records:
        labels = infer_task(records).labels
    if not records:
        return FeatureMatrix(sp.csr_matrix((0, 0), dtype=np.uint8), [], [])
    ctx = FeatureContext(records, settings, labels=labels)
    workers = resolve_num_proc(num_proc, len(records))
    # Names and keys are many small objects: the cyclic GC would walk every record each time.
    with gc_paused():
        if workers > 1 and any(chunkable(spec) for spec in specs):
            blocks, all_names, all_keys = run_groups_parallel(specs, ctx, settings, pair, workers)
        else:
            blocks, all_names, all_keys = _run_groups(specs, ctx, settings, pair, progress)
    ctx.release()  # the blocks and tokens it holds can go once copied into the matrix
    return assemble_matrix(blocks, all_names, all_keys, len(records))


#: the group computing each kind of feature from a row alone (hypo-only and custom features
#: need a model or a user's function: not here)
_GROUP_OF_KIND = {
    "length": "hypo-len",
    "ratio": "len-ratio",
    "overlap": "lex-overlap",
    "null": "null",
}


def presence_group(name: str) -> tuple[str, tuple[tuple[str, Any], ...]] | None:
    """The feature group (and its settings) that tells whether a row has feature ``name``
    with the default tokenisation and bins; None for a kind not computed from the row alone
    (``hypo-only``, ``custom``)."""
    key = FeatureKey.from_name(name)
    if key.kind == "ngram" and key.field is not None:
        k = len(key.tokens)
        return "ngrams", (("ngram_range", (k, k)), ("ngram_fields", (key.field,)))
    group = _GROUP_OF_KIND.get(key.kind)
    return (group, ()) if group is not None else None


def feature_presence(
    records: Sequence[Record], names: Sequence[str], *, labels: Sequence[str]
) -> dict[str, np.ndarray | None]:
    """For each feature name, whether each record has it (``[len(records)]`` booleans), by the
    extractor itself (default settings); None for a feature :func:`presence_group` cannot
    compute. One extraction per group needed.

    >>> feature_presence(records, ["nobody@hypothesis"], labels=LABELS)  # doctest: +SKIP
    {'nobody@hypothesis': array([ True, False])}
    """
    out: dict[str, np.ndarray | None] = {}
    wanted: dict[tuple[str, tuple[tuple[str, Any], ...]], list[str]] = {}
    for name in dict.fromkeys(names):
        group = presence_group(name)
        if group is None:
            out[name] = None
        else:
            wanted.setdefault(group, []).append(name)
    for (kind, options), group_names in wanted.items():
        settings: dict[str, Any] = {k: list(v) if k == "ngram_fields" else v for k, v in options}
        fm = extract_features(list(records), [kind], labels=labels, **settings)
        column = {n: j for j, n in enumerate(fm.names)}
        matrix = fm.matrix.tocsc()
        for name in group_names:
            j = column.get(name)
            has = np.zeros(len(records), dtype=bool)
            if j is not None:
                has[matrix.indices[matrix.indptr[j] : matrix.indptr[j + 1]]] = True
            out[name] = has
    return out
