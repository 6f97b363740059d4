"""Which tokens of a rejected example carry its biased features (SPEC §6, GD-NLI §4.1).

For an example I⁻ of Z⁻ the debiasing loss uses a per-token mask m_t: 0 where token t
contributes to a biased feature of the example's label (unlikelihood there), 1 elsewhere
(ordinary likelihood). :func:`biased_token_mask` returns the complement, ``True`` = biased
(m_t = 0), from the feature names z-filtering recorded in ``meta["rejected_by"]``:

- n-gram features ``w@premise``, ``w1 w2@hypothesis``, ``w@text``: every sub-word token that
  overlaps a character of any occurrence of the n-gram (word tokens from
  :func:`zdebias.features.tokenize.word_spans`, so the same words the feature counted);
- ``<null>`` (the label-imbalance feature, on every example): the label token. Its z-statistic
  is the label's over-representation, and the token that decides the label is the label token,
  so unlikelihood there lowers p(label | premise) and nothing else;
- every other feature (hypothesis length, length ratio, lexical overlap, hypothesis-only
  prediction, and any user-registered feature): all hypothesis tokens (all text tokens for
  single-text tasks). The end-of-sequence token is not included.

>>> biased_token_mask(record, encoded)                   # doctest: +SKIP
[False, False, True, ...]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from zdebias.data.schema import Record
from zdebias.features.ngrams import parse_ngram
from zdebias.features.tokenize import word_spans
from zdebias.generation.format import EncodedExample

NULL_FEATURE = "<null>"


@dataclass
class MaskReport:
    """What a mask covered: tokens per feature kind, and n-grams not found in the text."""

    n_biased: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    unmatched: list[str] = field(default_factory=list)


def _token_overlaps(
    offsets: Sequence[tuple[int, int]], spans: Iterable[tuple[int, int]]
) -> list[int]:
    """Indices of tokens whose character range overlaps any of ``spans``."""
    spans = list(spans)
    return [
        i
        for i, (s, e) in enumerate(offsets)
        if e > s and any(s < we and e > ws for ws, we in spans)
    ]


def _ngram_spans(text: str, target: list[str]) -> list[tuple[int, int]]:
    """Character spans of each occurrence of the word n-gram ``target`` in ``text``."""
    words = word_spans(text)
    n = len(target)
    out = []
    for i in range(len(words) - n + 1):
        if [w for w, _, _ in words[i : i + n]] == target:
            out.append((words[i][1], words[i + n - 1][2]))
    return out


def feature_kind(name: str) -> str:
    """``ngram``, ``null`` or ``hypothesis`` (a whole-hypothesis feature)."""
    if name == NULL_FEATURE:
        return "null"
    return "ngram" if parse_ngram(name) is not None else "hypothesis"


def biased_token_mask(
    record: Record,
    encoded: EncodedExample,
    features: Iterable[str] | None = None,
    *,
    report: MaskReport | None = None,
) -> list[bool]:
    """Per position of ``encoded.input_ids``: True where the token carries a biased feature.

    ``features`` defaults to ``record.meta["rejected_by"]``. The unlikelihood mask of SPEC §6
    is ``m_t = 0`` exactly where this is True. ``report`` (if given) is filled in.
    """
    if features is None:
        features = record.meta.get("rejected_by") or []
    out = [False] * len(encoded.input_ids)
    rep = report if report is not None else MaskReport()

    def mark(start: int, indices: Iterable[int], kind: str) -> None:
        for i in indices:
            if not out[start + i]:
                out[start + i] = True
                rep.by_kind[kind] = rep.by_kind.get(kind, 0) + 1

    main_text = record.text if not record.is_pair else record.hypothesis
    for name in features:
        kind = feature_kind(name)
        if kind == "null":
            mark(encoded.label_index, [0], kind)
            continue
        if kind == "hypothesis":
            start, end = encoded.main
            mark(start, range(end - start), kind)
            continue
        parsed = parse_ngram(name)
        assert parsed is not None
        words, where = parsed
        if where == "premise":
            text, start, offsets = record.premise or "", encoded.premise[0], encoded.premise_offsets
        else:
            text, start, offsets = main_text or "", encoded.main[0], encoded.main_offsets
        if where == "premise" and not record.is_pair:
            rep.unmatched.append(name)
            continue
        hits = _token_overlaps(offsets, _ngram_spans(text, words))
        if not hits:
            rep.unmatched.append(name)
        mark(start, hits, kind)
    rep.n_biased = sum(out)
    return out
