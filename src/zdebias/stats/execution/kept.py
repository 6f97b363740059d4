"""The filter summary's ``stats_of_kept`` (what ``zdebias stats`` reports for ``kept.jsonl``)
from the input's feature matrix, without extracting the kept records' features again.

Every feature group but the hypothesis-only one depends on its record alone, so the kept rows'
columns are theirs in the input's matrix; the hypothesis-only feature is refitted on the kept
rows from their hypothesis n-grams. :func:`matrix_describes_kept` says when that holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from zdebias.data.schema import Record
from zdebias.stats.execution.hypotheses import distinct_hypotheses
from zdebias.stats.settings import StatsSettings, ZFilterSettings


@dataclass(frozen=True)
class InputRows:
    """The z-filter's input as the kept-rows summary reads it: its feature matrix ``fm``, and
    for each row its label id (``y``), ``meta.hypo_only_pred`` index (``meta_preds``, -1:
    none) and hypothesis code (``hypotheses``: equal texts, equal codes; empty for single
    texts); the ``labels`` and whether the records are pairs."""

    fm: Any
    y: np.ndarray
    meta_preds: np.ndarray
    hypotheses: np.ndarray
    labels: tuple[str, ...]
    pair: bool


def matrix_describes_kept(settings: ZFilterSettings) -> bool:
    """Whether, with these settings, the features of any subset of the records can be taken
    from the whole input's matrix (:func:`kept_summary`): built-in groups that depend on one
    record at a time, and the default hypothesis-only feature, refitted from the hypothesis
    n-grams in the matrix. Not with plugin settings or a trained hypothesis-only model."""
    from zdebias.features.catalogue import get_feature
    from zdebias.features.parallel import chunkable

    if settings.hypo_only_model or settings.feature_options:
        return False
    names = settings.features or ()
    if any(not (chunkable(s) or s.name == "hypo-only") for s in map(get_feature, names)):
        return False
    return _hypothesis_ngrams_in_matrix(settings)


def _hypothesis_ngrams_in_matrix(settings: ZFilterSettings) -> bool:
    """Whether the matrix holds the hypothesis unigrams and bigrams that the hypothesis-only
    feature reads, when it is used (:func:`_kept_matrix` refits it from them)."""
    from zdebias.features.ngrams import parse_ngram_range

    names = settings.features
    if names is not None and "hypo-only" not in names:
        return True
    fields = settings.ngram_fields
    if fields is not None and "hypothesis" not in fields:
        return False
    lo, hi = parse_ngram_range(settings.ngram_range or (1, 2))
    ngrams = names is None or "ngrams" in names
    return (ngrams and lo <= 1 and hi >= 2) or (
        names is not None and {"unigrams", "bigrams"} <= set(names)
    )


def kept_summary(
    rows: InputRows, kept: np.ndarray, settings: ZFilterSettings
) -> dict[str, Any] | None:
    """The filter summary's ``stats_of_kept`` of the rows ``kept`` (indices into ``rows``);
    only where :func:`matrix_describes_kept`. None when nothing was kept."""
    from zdebias.stats.measure import kept_stats
    from zdebias.stats.zstats import describe_matrix

    if not len(kept):
        return None
    cfg = StatsSettings.take(settings, top=1)
    kwargs = {k: v for k, v in cfg.feature_kwargs().items() if k != "num_proc"}
    fm_kept = _kept_matrix(rows, kept, kwargs, settings.features)
    rep = describe_matrix(
        fm_kept,
        rows.y[kept],
        rows.labels,
        top=1,
        alpha=cfg.alpha,
        label_prior=settings.label_prior or "uniform",
    )
    return kept_stats(rep)


def input_rows(fm: Any, records: Sequence[Record], labels: Sequence[str]) -> InputRows:
    """:class:`InputRows` of ``records`` (at least one), whose feature matrix is ``fm``."""
    from zdebias.data.labels import label_ids
    from zdebias.features.context import FeatureContext, factorize_strings
    from zdebias.features.hypothesis_only import meta_predictions

    labels = tuple(labels)
    pair = records[0].is_pair
    if pair:
        preds = meta_predictions(FeatureContext(records, {}), labels)
        texts = cast("list[str]", [r.hypothesis for r in records])  # pairs: every one has one
        hypotheses = factorize_strings(texts)[0]
    else:
        preds = np.full(len(records), -1, dtype=np.int64)
        hypotheses = np.zeros(0, dtype=np.int64)
    return InputRows(fm, label_ids(records, labels), preds, hypotheses, labels, pair)


def kept_summary_of(
    result: Any, records: Sequence[Record], settings: ZFilterSettings
) -> dict[str, Any] | None:
    """:func:`kept_summary` for a one-process :func:`~zdebias.stats.zfilter.z_filter` result
    (no seed records) on ``records``."""
    rows = input_rows(result.features, records, result.summary["labels"])
    return kept_summary(rows, result.arrays.accepted, settings)


def _kept_matrix(
    rows: InputRows,
    kept: np.ndarray,
    settings: dict[str, Any],
    feature_names: Sequence[str] | None,
) -> Any:
    """What extracting the features of the kept records alone gives, from the input's matrix:
    every group but the hypothesis-only one depends on its record alone, so its columns are the
    kept rows' (columns no kept record has dropped); the hypothesis-only feature is refitted on
    the kept rows, from their hypothesis n-grams."""
    from zdebias.features.catalogue import feature_specs
    from zdebias.features.context import FeatureContext
    from zdebias.features.groups import run_group
    from zdebias.features.hypothesis_only import LABEL_IDS, META_PREDICTIONS
    from zdebias.features.matrix import assemble_matrix
    from zdebias.features.parallel import HYPO_NGRAM_KEYS

    n, pair = len(kept), rows.pair
    sub = rows.fm.matrix[kept]
    names, keys = list(rows.fm.names), list(rows.fm.keys)
    specs = feature_specs(feature_names, pair=pair, settings=settings)
    hypo = next((s for s in specs if s.name == "hypo-only"), None)
    if hypo is None:
        return assemble_matrix([sub], names, keys, n)
    ctx = FeatureContext(range(n), settings, labels=rows.labels, pair=pair)  # type: ignore[arg-type]
    ctx.cache[LABEL_IDS] = rows.y[kept]
    ctx.cache[META_PREDICTIONS] = rows.meta_preds[kept]
    for key in HYPO_NGRAM_KEYS:
        cols = [
            j
            for j, k in enumerate(keys)
            if k.kind == "ngram" and k.field == "hypothesis" and len(k.tokens) == key[2]
        ]
        block = sub[:, cols]
        present = np.flatnonzero(np.bincount(block.indices, minlength=len(cols)))
        ctx.cache[key] = (
            block[:, present],
            [names[cols[j]] for j in present.tolist()],
            [keys[cols[j]] for j in present.tolist()],
        )
    distinct_hypotheses(ctx, rows.hypotheses[kept])
    parts, hypo_names, hypo_keys = run_group(hypo, ctx, range(n), settings, pair)  # type: ignore[arg-type]
    at = [j for j, k in enumerate(keys) if k.kind == "hypo-only"]
    if not at or at != list(range(at[0], at[-1] + 1)):  # pragma: no cover - never apart
        raise RuntimeError("hypothesis-only columns not found together in the matrix")
    p, q = at[0], at[-1] + 1
    return assemble_matrix(
        [sub[:, :p], *parts, sub[:, q:]],
        [*names[:p], *hypo_names, *names[q:]],
        [*keys[:p], *hypo_keys, *keys[q:]],
        n,
    )


__all__ = [
    "InputRows",
    "input_rows",
    "kept_summary",
    "kept_summary_of",
    "matrix_describes_kept",
]
