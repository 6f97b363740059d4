"""Which tokens of a rejected example carry its biased features (docs/design.md §6, GD-NLI §4.1).

For an example I⁻ of Z⁻ the debiasing loss uses a per-token mask m_t: 0 where token t
contributes to a biased feature of the example's label (unlikelihood there), 1 elsewhere
(ordinary likelihood). :func:`biased_token_mask` returns the complement, ``True`` = biased
(m_t = 0), from the structured features z-filtering recorded in
``meta["rejected_by_features"]`` (:class:`~zdebias.features.keys.FeatureKey` dicts):

- n-gram features (``w@premise``, ``w1 w2@hypothesis``, ``w@text``): every sub-word token that
  overlaps a character of any occurrence of the n-gram's tokens, the words found by the same
  tokeniser that cut the feature (:class:`zdebias.features.tokenize.Tokenizer`, so a custom
  ``token_pattern`` is honoured);
- ``<null>`` (the label-imbalance feature, on every example): all hypothesis tokens by default
  (``null_mask="hypothesis"``, the paper's rule for every non-n-gram feature), or only the
  label token (``null_mask="label"``: the token that decides the label, so unlikelihood there
  lowers p(label | premise) and nothing else);
- every other feature (hypothesis length, length ratio, lexical overlap, hypothesis-only
  prediction, and any user-registered feature): all hypothesis tokens (all text tokens for
  single-text tasks). The end-of-sequence token is not included.

Files written before the structured features existed only have the names in
``meta["rejected_by"]``; those are parsed by the naming rules (the legacy path,
:func:`rejecting_features`), which assumes the default tokenisation.

>>> biased_token_mask(record, encoded)                   # doctest: +SKIP
[False, False, True, ...]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from zdebias.data.schema import Record
from zdebias.features.keys import NULL_FEATURE, FeatureKey
from zdebias.features.tokenize import Tokenizer
from zdebias.generation.format import EncodedExample


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


@lru_cache(maxsize=16)
def _tokenizer(spec: str | None) -> Tokenizer:
    return Tokenizer.from_spec(spec)


def _ngram_spans(text: str, key: FeatureKey) -> list[tuple[int, int]]:
    """Character spans of each occurrence of the n-gram ``key.tokens`` in ``text``."""
    words = _tokenizer(key.tokenizer).spans(text)
    target = [t.lower() for t in key.tokens]
    n = len(target)
    out = []
    for i in range(len(words) - n + 1):
        if [w for w, _, _ in words[i : i + n]] == target:
            out.append((words[i][1], words[i + n - 1][2]))
    return out


def as_feature_key(feature: str | FeatureKey | Mapping[str, Any]) -> FeatureKey:
    """A :class:`FeatureKey` from a key, its dict form, or (legacy) a feature name."""
    if isinstance(feature, FeatureKey):
        return feature
    if isinstance(feature, Mapping):
        return FeatureKey.from_dict(feature)
    return FeatureKey.from_name(str(feature))


def rejecting_features(record: Record) -> list[FeatureKey]:
    """The biased features that rejected ``record``: ``meta["rejected_by_features"]``.

    Legacy path: records z-filtered before structured features existed have only the names in
    ``meta["rejected_by"]``; they are parsed by the naming rules (default tokenisation).
    """
    structured = record.meta.get("rejected_by_features")
    if structured is not None:
        return [FeatureKey.from_dict(d) for d in structured]
    return [FeatureKey.from_name(name) for name in record.meta.get("rejected_by") or []]


def _mask_kind(key: FeatureKey) -> str:
    """What the mask covers: ``ngram`` (its words), ``null`` (the label token) or
    ``hypothesis`` (the whole hypothesis). A user feature named like an n-gram
    (``word@hypothesis``) is masked as one, as before structured features."""
    if key.kind == "null" or (key.kind == "custom" and key.name == NULL_FEATURE):
        return "null"
    if key.kind in ("ngram", "custom") and key.tokens and key.field is not None:
        return "ngram"
    return "hypothesis"


def feature_kind(name: str) -> str:
    """``ngram``, ``null`` or ``hypothesis`` (a whole-hypothesis feature), from a name."""
    return _mask_kind(FeatureKey.from_name(name))


def biased_token_mask(
    record: Record,
    encoded: EncodedExample,
    features: Iterable[str | FeatureKey | Mapping[str, Any]] | None = None,
    *,
    report: MaskReport | None = None,
    null_mask: str = "hypothesis",
) -> list[bool]:
    """Per position of ``encoded.input_ids``: True where the token carries a biased feature.

    ``features`` (keys, their dicts, or names) defaults to :func:`rejecting_features`. The
    unlikelihood mask of docs/design.md §6 is ``m_t = 0`` exactly where this is True. ``report`` (if
    given) is filled in; its ``unmatched`` lists feature names. ``null_mask``: ``hypothesis``
    (the paper) or ``label``, the tokens the ``<null>`` feature marks.
    """
    if null_mask not in ("hypothesis", "label"):
        raise ValueError(f"null_mask must be 'hypothesis' or 'label', not {null_mask!r}")
    keys = rejecting_features(record) if features is None else [as_feature_key(f) for f in features]
    out = [False] * len(encoded.input_ids)
    rep = report if report is not None else MaskReport()

    def mark(start: int, indices: Iterable[int], kind: str) -> None:
        for i in indices:
            if not out[start + i]:
                out[start + i] = True
                rep.by_kind[kind] = rep.by_kind.get(kind, 0) + 1

    main_text = record.text if not record.is_pair else record.hypothesis
    for key in keys:
        kind = _mask_kind(key)
        if kind == "null" and null_mask == "label":
            mark(encoded.label_index, [0], kind)
            continue
        if kind in ("hypothesis", "null"):
            start, end = encoded.main
            mark(start, range(end - start), kind)
            continue
        if key.field == "premise":
            text, start, offsets = record.premise or "", encoded.premise[0], encoded.premise_offsets
        else:
            text, start, offsets = main_text or "", encoded.main[0], encoded.main_offsets
        if key.field == "premise" and not record.is_pair:
            rep.unmatched.append(key.name)
            continue
        hits = _token_overlaps(offsets, _ngram_spans(text, key))
        if not hits:
            rep.unmatched.append(key.name)
        mark(start, hits, kind)
    rep.n_biased = sum(out)
    return out
