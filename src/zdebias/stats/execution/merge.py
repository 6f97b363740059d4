"""The sharded z-filter's parent side of reading: the workers' reads put together, in file
order, into one read report (:func:`merged_report`), the dataset warnings
(:func:`merged_warnings`) and the input's feature matrix with what the kept-rows summary needs
of each row (:func:`merged_rows`), exactly as reading and extracting in one process gives them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np

from zdebias.data.mapping import SHOWN_IDS, ReadReport
from zdebias.data.process import gc_paused
from zdebias.stats.execution.hypotheses import distinct_hypotheses
from zdebias.stats.execution.kept import InputRows


def combine_read(final: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One worker's read: what
    :meth:`~zdebias.stats.execution.shard.Shard.read_and_extract` returned (``final``) and its
    chunks' ``parts`` put together."""
    return {
        **final,
        "chunks": [p["chunk"] for p in parts],
        "y": _concat([p["y"] for p in parts]),
        "meta_preds": _concat([p["meta_preds"] for p in parts]),
        "ids": [p["ids"] for p in parts],
        "id_hashes": _concat([p["id_hashes"] for p in parts]),
        "hypotheses": [p["hypotheses"] for p in parts if p["hypotheses"] is not None],
    }


def merged_report(path: str, results: list[dict[str, Any]]) -> ReadReport:
    """The read report of the whole file from the workers' reads (:func:`combine_read`)."""
    tasks = [r["report"][0] for r in results]
    task = next((t for t in tasks if t != "?"), "?")
    report = ReadReport(path, "jsonl", task)
    maps = [r["label_map"] for r in results if r["label_map"][0] is not None]
    report.label_map, report.label_map_from = maps[0] if maps else (None, "names")
    for r in results:
        report.n_records += r["report"][1]
        report.n_unlabelled += r["report"][2]
        report.unlabelled_lines.extend(r["unlabelled_lines"])
        report.errors.extend(r["errors"])
        report.n_derived_ids += r["derived_ids"][0]
        report.derived_ids.extend(r["derived_ids"][1])
    del report.derived_ids[SHOWN_IDS:]
    return report


def merged_warnings(
    results: list[dict[str, Any]], labels: tuple[str, ...], name: str, *, min_records: int
) -> list[str]:
    """:func:`~zdebias.data.options.dataset_warnings` of the records the workers read, the
    input named ``name``; fewer than ``min_records`` is an error."""
    from zdebias.data.options import label_and_id_warnings

    y = _concat([r["y"] for r in results])
    counts = np.bincount(y, minlength=len(labels))
    label_counts = Counter({labels[i]: int(c) for i, c in enumerate(counts.tolist()) if c})
    hashes = np.sort(_concat([r["id_hashes"] for r in results]))
    repeated = bool((hashes[1:] == hashes[:-1]).any())  # np.unique hashes: 15x slower
    parts = chain.from_iterable(r["ids"] for r in results)
    ids = (
        chain.from_iterable(p.split("\x00") if isinstance(p, str) else p for p in parts)
        if repeated
        else ()
    )
    return label_and_id_warnings(label_counts, len(y), ids, name, min_records=min_records)


def merged_rows(
    results: list[dict[str, Any]],
    feature_names: Sequence[str] | None,
    settings: dict[str, Any],
    labels: tuple[str, ...],
    pair: bool,
) -> InputRows:
    """The feature matrix, label ids, ``meta.hypo_only_pred`` indices and hypothesis codes of
    the rows the workers described, in file order."""
    from zdebias.features.catalogue import feature_specs
    from zdebias.features.context import FeatureContext
    from zdebias.features.hypothesis_only import LABEL_IDS, META_PREDICTIONS
    from zdebias.features.matrix import assemble_matrix
    from zdebias.features.parallel import merge_chunks

    y = _concat([r["y"] for r in results])
    meta_preds = _concat([r["meta_preds"] for r in results])
    hypotheses = _hypothesis_codes(results) if pair else np.zeros(0, dtype=np.int64)
    n = len(y)
    specs = feature_specs(feature_names, pair=pair, settings=settings)
    ctx = FeatureContext(range(n), settings, labels=labels, pair=pair)  # type: ignore[arg-type]
    ctx.cache[LABEL_IDS] = y
    ctx.cache[META_PREDICTIONS] = meta_preds
    chunks = list(chain.from_iterable(r["chunks"] for r in results))
    with gc_paused():
        if chunks:
            blocks, names, keys = merge_chunks(
                specs,
                chunks,
                ctx,
                settings,
                pair,
                ready=lambda c: distinct_hypotheses(c, hypotheses),
            )
        else:
            blocks, names, keys = [], [], []
        ctx.cache.clear()  # the blocks it holds can go once copied into the matrix
        fm = assemble_matrix(blocks, names, keys, n)
        return InputRows(fm, y, meta_preds, hypotheses, labels, pair)


def _hypothesis_codes(results: list[dict[str, Any]]) -> np.ndarray:
    """Each row's hypothesis as an integer (equal texts, equal codes) across the workers."""
    index: dict[str, int] = {}
    parts = []
    for codes, texts in chain.from_iterable(r["hypotheses"] for r in results):
        remap = np.fromiter(
            (index.setdefault(t, len(index)) for t in texts), dtype=np.int64, count=len(texts)
        )
        parts.append(remap[codes] if len(codes) else codes)
    return _concat(parts)


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


__all__ = ["combine_read", "merged_report", "merged_rows", "merged_warnings"]
