"""What a dataset holds: format, sizes, label counts, skipped rows, text lengths."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any


def _length_stats(lengths: list[int]) -> dict[str, float]:
    if not lengths:
        return {"min": 0, "mean": 0.0, "median": 0.0, "max": 0}
    ordered = sorted(lengths)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    return {
        "min": ordered[0],
        "mean": round(sum(ordered) / n, 2),
        "median": median,
        "max": ordered[-1],
    }


def inspect_dataset(
    ds: Any,
    *,
    limit: int | None = None,
    tokenizer: Callable[[str], list[str]] | None = None,
    short_line: Callable[[Mapping[str, float]], str | None] | None = None,
) -> dict[str, Any]:
    """Summarise a dataset: format, sizes, label counts, skipped rows, text lengths (words
    between spaces, and, with ``tokenizer``, tokens as the features cut them), and
    ``warnings`` (repeated ids, records named ``FILE:LINE`` where others have an id, and
    ``short_line`` of the median token lengths: texts whose median is 1-2 tokens).

    The tokenizer and the warning come from the caller (the features layer), so that this
    module stays below it."""
    labels: Counter[str] = Counter()
    lengths: dict[str, list[int]] = {}
    token_lengths: dict[str, list[int]] = {}
    ids: list[str] = []
    for record in itertools.islice(ds, limit):
        labels[record.label] += 1
        ids.append(record.id)
        fields = ("premise", "hypothesis") if record.is_pair else ("text",)
        for fld in fields:
            text = getattr(record, fld)
            lengths.setdefault(fld, []).append(len(text.split()))
            if tokenizer is not None:
                token_lengths.setdefault(fld, []).append(len(tokenizer(text)))
    rep = ds.report
    task = ds.task or None
    from zdebias.data.labels import get_task
    from zdebias.data.options import repeated_ids_line

    names = list(get_task(rep.task).labels) if rep.task != "?" else sorted(labels)
    by_tokens = {fld: _length_stats(v) for fld, v in token_lengths.items()}
    medians = {fld: st["median"] for fld, st in by_tokens.items()}
    short = short_line(medians) if short_line is not None else None
    warnings = [repeated_ids_line(ids, rep.path), rep.derived_ids_line(), short]
    return {
        "path": rep.path,
        "format": rep.format,
        "task": rep.task,
        "n_examples": sum(labels.values()),
        "label_counts": {name: labels.get(name, 0) for name in names},
        "label_map": rep.label_map,
        "label_map_from": rep.label_map_from,
        "n_skipped_unlabelled": rep.n_unlabelled,
        "n_skipped_errors": rep.n_errors,
        "skipped_errors": [str(e) for e in rep.errors[:20]],
        **({"where": rep.where, "n_skipped_by_where": rep.n_skipped_by_where} if rep.where else {}),
        "length_words": {fld: _length_stats(v) for fld, v in lengths.items()},
        **({"length_tokens": by_tokens} if tokenizer is not None else {}),
        "n_derived_ids": rep.n_derived_ids,
        "warnings": [line for line in warnings if line is not None],
        **({"task_forced": task.name} if task else {}),
    }


__all__ = ["inspect_dataset"]
