"""Structured features: what a feature column is, beside its display name (docs/design.md §2).

Feature extractors return a :class:`FeatureKey` per column, parallel to the names
(``FeatureMatrix.keys``). z-filtering records the keys of the biased features that rejected an
example in ``meta["rejected_by_features"]`` (as dicts), and the generator's unlikelihood mask
reads the n-gram's own tokens from them instead of parsing names.

>>> FeatureKey.from_name("is sleeping@hypothesis").tokens
('is', 'sleeping')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: The kinds of feature, and the text fields a feature can be about.
KINDS: tuple[str, ...] = ("ngram", "length", "ratio", "overlap", "hypo-only", "null", "custom")
FIELDS: tuple[str, ...] = ("premise", "hypothesis", "text")
NULL_FEATURE = "<null>"

#: Display-name prefixes of the built-in non-n-gram features (for names without keys).
_PREFIX_KINDS = (
    ("hypo-len", "length", "hypothesis"),
    ("text-len", "length", "text"),
    ("len-ratio", "ratio", None),
    ("lex-overlap", "overlap", None),
    ("full-lex-overlap", "overlap", None),
    ("no-lex-overlap", "overlap", None),
    ("hypo-only-pred=", "hypo-only", "hypothesis"),
)


@dataclass(frozen=True)
class FeatureKey:
    """One feature column: display ``name``, ``kind``, text ``field`` and n-gram ``tokens``.

    The constructors trust their caller (extractors make hundreds of thousands of keys);
    :meth:`from_dict` checks ``kind`` and ``field``.
    ``field``: the text the feature is about (``premise``, ``hypothesis``, ``text``), ``None``
    when it relates both texts (ratio, overlap) or is unknown (``custom``). ``tokens``: an
    n-gram's own word tokens, else empty. ``tokenizer``: how those tokens were cut when not the
    default (:attr:`zdebias.features.tokenize.Tokenizer.spec`).
    """

    name: str
    kind: str
    field: str | None = None
    tokens: tuple[str, ...] = ()
    tokenizer: str | None = None

    @classmethod
    def ngram(
        cls, name: str, field: str, tokens: Iterable[str], tokenizer: str | None = None
    ) -> FeatureKey:
        """An n-gram feature of ``field``."""
        return cls(name, "ngram", field, tuple(tokens), tokenizer)

    @classmethod
    def many(cls, names: Iterable[str], kind: str, field: str | None = None) -> list[FeatureKey]:
        """Keys of one kind for some names (bins, thresholds, predictions)."""
        return [cls(name, kind, field) for name in names]

    @classmethod
    def from_name(cls, name: str, *, kind: str | None = None) -> FeatureKey:
        """The key a display name stands for, by the naming rules of docs/design.md §2.

        The legacy path, for names without keys (files written before keys existed, user
        features): ``w1 w2@field`` is an n-gram cut by the default tokeniser. ``kind`` forces
        the kind (e.g. ``custom`` for a user feature), keeping field and tokens of the name.
        """
        if name == NULL_FEATURE:
            return cls(name, kind or "null")
        words, sep, where = name.rpartition("@")
        if sep and words and where in FIELDS:
            return cls(name, kind or "ngram", where, tuple(words.split(" ")))
        for prefix, k, field in _PREFIX_KINDS:
            if name.startswith(prefix):
                return cls(name, kind or k, field)
        return cls(name, kind or "custom")

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as in ``meta["rejected_by_features"]`` (``tokenizer`` only if not default)."""
        out: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "field": self.field,
            "tokens": list(self.tokens),
        }
        if self.tokenizer is not None:
            out["tokenizer"] = self.tokenizer
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FeatureKey:
        """The inverse of :meth:`to_dict`; ValueError for an unknown kind or field."""
        kind, where = str(data["kind"]), data.get("field")
        if kind not in KINDS:
            raise ValueError(f"unknown feature kind {kind!r}; expected one of {', '.join(KINDS)}")
        if where is not None and where not in FIELDS:
            raise ValueError(
                f"unknown feature field {where!r}; expected one of {', '.join(FIELDS)}"
            )
        tokens = tuple(str(t) for t in data.get("tokens") or ())
        return cls(str(data["name"]), kind, where, tokens, data.get("tokenizer"))
