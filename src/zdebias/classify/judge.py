"""What a confidence-filter judge accepts and what it deletes (docs/design.md §7, §12), as pure
functions.

- :func:`reference_record` is the pair the delta-p rule (DISCO) compares a sample with: for a
  counterfactual edit (``meta.type`` ``counterfactual``) the original it was made from (found
  by ``meta.source_id``); for any other sample (generated, premise-conditioned or not) its own
  premise with an empty hypothesis. The judge's probability of the label there is its prior
  for the label under that premise, before any hypothesis says anything, so the rise measures
  what the hypothesis itself adds. It needs no other sample: a sample's verdict does not depend
  on which siblings of its premise survived parsing and dedup, nor on how the file is split.
- :func:`delta_p_mask`: accept when p(label | sample) − p(label | reference) > δ, strictly.
- :func:`disco_rejection`: DISCO's two rejections, each off unless asked.
- :func:`pass_counts`, :func:`cell_of`, :func:`premise_counts`, :func:`agreement`: what the
  summary reports (pass rates per label and cell, premises left without a sample, label
  fidelity and hypothesis-only accuracy).

>>> delta_p_mask(np.array([0.8125, 0.75]), np.array([0.5, 0.5]), 0.25).tolist()
[True, False]
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError

#: words whose addition makes DISCO's "negation" contradictions (and every word ending n't)
NEGATION_WORDS = frozenset(
    {"no", "not", "never", "nobody", "nothing", "none", "nowhere", "neither", "nor", "cannot"}
)
#: the label whose samples the added-negation rejection looks at
CONTRADICTION = "contradiction"
#: kinds of reference pair (:func:`reference_record`)
ORIGINAL, EMPTY_HYPOTHESIS, EMPTY_TEXT = "original", "empty-hypothesis", "empty-text"

_WORD = re.compile(r"\w+(?:'\w+)?")


def words(text: str | None) -> set[str]:
    """The lower-cased words of ``text`` (``isn't`` is one word)."""
    return set(_WORD.findall((text or "").lower()))


def reference_record(record: Record, originals: Mapping[str, Record]) -> tuple[Record, str]:
    """The pair the delta-p rule compares ``record`` with, and its kind (module docstring).

    ``originals``: records by id, where counterfactual edits find their source.
    """
    if record.meta.get("type") == "counterfactual":
        source_id = record.meta.get("source_id")
        source = originals.get(str(source_id)) if source_id is not None else None
        if source is None:
            where = "not among the originals" if originals else "no originals were given"
            raise DataError(
                f"record {record.id!r} is a counterfactual edit of {source_id!r}, {where}: "
                "pass the file it was made from (--originals FILE)",
                field="meta.source_id",
            )
        text = {"premise": source.premise, "hypothesis": source.hypothesis, "text": source.text}
        return record.replace(**text), ORIGINAL
    if record.is_pair:
        return record.replace(hypothesis=""), EMPTY_HYPOTHESIS
    return record.replace(text=""), EMPTY_TEXT


def delta_p_mask(p_sample: np.ndarray, p_reference: np.ndarray, delta: float) -> np.ndarray:
    """``p_sample - p_reference > delta`` per row: two ``[N]`` float arrays → ``[N]`` bools."""
    if not 0.0 <= delta <= 1.0:
        raise ConfigError(f"delta must lie in [0, 1], got {delta}")
    p_sample, p_reference = np.asarray(p_sample), np.asarray(p_reference)
    if p_sample.shape != p_reference.shape or p_sample.ndim != 1:
        raise ValueError(f"probabilities {p_sample.shape} and {p_reference.shape} do not match")
    return (p_sample - p_reference) > delta


def jaccard(a: set[str], b: set[str]) -> float:
    """|a ∩ b| / |a ∪ b| (0 for two empty sets)."""
    return len(a & b) / len(a | b) if a or b else 0.0


def disco_rejection(
    record: Record, *, reject_added_negation: bool = False, max_overlap: float | None = None
) -> str | None:
    """DISCO's rejection of ``record``, if any: ``added-negation`` (a contradiction whose
    hypothesis has a negation word its premise lacks) or ``premise-overlap`` (Jaccard word
    overlap of hypothesis and premise above ``max_overlap``); ``None`` for a pair it keeps and
    for single texts."""
    if not record.is_pair:
        return None
    hyp, prem = words(record.hypothesis), words(record.premise)
    if reject_added_negation and record.label == CONTRADICTION:
        if any(w in NEGATION_WORDS or w.endswith("n't") for w in hyp - prem):
            return "added-negation"
    if max_overlap is not None and jaccard(hyp, prem) > max_overlap:
        return "premise-overlap"
    return None


def cell_of(record: Record) -> str | None:
    """The shortcut-breaking cell a sample was made for: ``meta.cell`` (a name, or a mapping
    with ``feature`` and ``label``), else ``meta.feature`` with the sample's label, as
    ``FEATURE -> LABEL``; ``None`` for an untagged sample."""
    cell = record.meta.get("cell")
    if isinstance(cell, str):
        return cell
    if isinstance(cell, Mapping) and "feature" in cell:
        return f"{cell['feature']} -> {cell.get('label', record.label)}"
    feature = record.meta.get("feature")
    return f"{feature} -> {record.label}" if isinstance(feature, str) else None


def pass_counts(
    keys: Sequence[Hashable | None], keep: np.ndarray, order: Sequence[Hashable] | None = None
) -> dict[Any, dict[str, Any]]:
    """``{key: {"n", "kept", "rejected", "pass_rate"}}`` over the rows with a key (not None),
    in ``order`` (keys it lacks last, sorted), else sorted; ``pass_rate`` = kept / n, 4 places."""
    n: dict[Any, int] = {}
    kept: dict[Any, int] = {}
    for key, k in zip(keys, np.asarray(keep, dtype=bool).tolist(), strict=True):
        if key is None:
            continue
        n[key] = n.get(key, 0) + 1
        kept[key] = kept.get(key, 0) + int(k)
    first = [k for k in (order or ()) if k in n]
    rest = sorted((k for k in n if k not in set(first)), key=str)
    return {
        k: {
            "n": n[k],
            "kept": kept[k],
            "rejected": n[k] - kept[k],
            "pass_rate": round(kept[k] / n[k], 4),
        }
        for k in first + rest
    }


def premise_counts(records: Sequence[Record], keep: np.ndarray) -> dict[str, int] | None:
    """For samples with ``meta.premise_id``: how many premises, how many keep at least one
    sample, how many lose all; ``None`` when no sample has a premise id."""
    kept: dict[str, bool] = {}
    for r, k in zip(records, np.asarray(keep, dtype=bool).tolist(), strict=True):
        pid = r.meta.get("premise_id")
        if pid is not None:
            kept[str(pid)] = kept.get(str(pid), False) or k
    if not kept:
        return None
    with_kept = sum(kept.values())
    return {"n": len(kept), "with_kept": with_kept, "all_rejected": len(kept) - with_kept}


def agreement(predicted: Sequence[str], gold: Sequence[str]) -> dict[str, Any]:
    """How often ``predicted`` labels equal the ``gold`` (intended) ones: ``{"n", "agree",
    "share", "per_label": {gold label: {"n", "agree", "share"}}}``, shares to 4 places
    (``None`` for no rows)."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} labels")
    hits = np.array([p == g for p, g in zip(predicted, gold, strict=True)], dtype=bool)
    per = pass_counts(list(gold), hits)

    def share(agree: int, n: int) -> float | None:
        return round(agree / n, 4) if n else None

    return {
        "n": len(gold),
        "agree": int(hits.sum()),
        "share": share(int(hits.sum()), len(gold)),
        "per_label": {
            k: {"n": v["n"], "agree": v["kept"], "share": v["pass_rate"]} for k, v in per.items()
        },
    }


__all__ = [
    "CONTRADICTION",
    "EMPTY_HYPOTHESIS",
    "EMPTY_TEXT",
    "NEGATION_WORDS",
    "ORIGINAL",
    "agreement",
    "cell_of",
    "delta_p_mask",
    "disco_rejection",
    "jaccard",
    "pass_counts",
    "premise_counts",
    "reference_record",
    "words",
]
