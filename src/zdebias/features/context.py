"""What a batch feature function receives: the records, the settings and one tokenisation.

:class:`FeatureContext` tokenises each text field once, into ids of one vocabulary shared by
every field (so premise and hypothesis tokens compare directly), as a :class:`TokenColumn`;
feature groups cache what they share (n-gram blocks, overlap ratios) in ``ctx.cache``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.data.schema import Record
from zdebias.errors import DataError
from zdebias.features.tokenize import Tokenizer

if TYPE_CHECKING:
    import scipy.sparse as sp

#: Texts tokenised per regex pass (bounds the memory of the flat token list).
TOKENIZE_CHUNK = 100_000


@dataclass
class TokenColumn:
    """Word tokens of one text field, as ids into the context's vocabulary.

    Repeated texts (SNLI premises come three times or more; generated data repeats them far
    more) are tokenised once: ``ids[offsets[u]:offsets[u + 1]]`` are the tokens of distinct
    text ``u``, and record ``i`` has text ``inverse[i]``.
    """

    ids: np.ndarray
    offsets: np.ndarray
    inverse: np.ndarray

    @property
    def n_distinct(self) -> int:
        return len(self.offsets) - 1

    @property
    def all_distinct(self) -> bool:
        """True when every record has its own text (``inverse`` is the identity)."""
        return self.n_distinct == len(self.inverse)

    @property
    def distinct_lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def lengths(self) -> np.ndarray:
        """Token count per record."""
        lengths = self.distinct_lengths
        return lengths if self.all_distinct else lengths[self.inverse]

    def distinct_row_of_token(self) -> np.ndarray:
        """The distinct-text index of each token in ``ids``."""
        return np.repeat(np.arange(self.n_distinct, dtype=np.int64), self.distinct_lengths)

    def record_tokens(self, i: int) -> np.ndarray:
        """Token ids of record ``i``."""
        u = self.inverse[i]
        return self.ids[self.offsets[u] : self.offsets[u + 1]]

    def expand(self, m: sp.csr_matrix) -> sp.csr_matrix:
        """Rows of a per-distinct-text matrix, gathered to one row per record."""
        return m if self.all_distinct else m[self.inverse]


class FeatureContext:
    """What batch feature functions share: the records, the settings, one tokenisation.

    Tokens of every field map into one vocabulary (``vocab``), so premise and hypothesis ids
    can be compared directly.
    """

    def __init__(
        self,
        records: Sequence[Record],
        settings: dict[str, Any],
        *,
        labels: Sequence[str] | None = None,
        pair: bool | None = None,
    ) -> None:
        self.records = records
        self.settings = settings
        self.pair = (bool(records) and records[0].is_pair) if pair is None else pair
        self.labels = tuple(labels) if labels is not None else None
        self.vocab: dict[str, int] = {}
        self._vocab_list: list[str] | None = None
        self._columns: dict[str, TokenColumn] = {}
        self.cache: dict[Any, Any] = {}
        #: The word tokeniser of every text feature (settings token_pattern, lowercase, tokenizer).
        self.tokenizer = Tokenizer.from_settings(settings)

    @property
    def fields(self) -> tuple[str, ...]:
        """The text fields n-grams come from: premise and hypothesis, or text."""
        return ("premise", "hypothesis") if self.pair else ("text",)

    @property
    def main_field(self) -> str:
        """The field length features measure: hypothesis, or text."""
        return "hypothesis" if self.pair else "text"

    def vocab_list(self) -> list[str]:
        """Token id → token."""
        if self._vocab_list is None or len(self._vocab_list) != len(self.vocab):
            self._vocab_list = list(self.vocab)
        return self._vocab_list

    def texts(self, field_name: str) -> list[str]:
        """The text of one field for every record (a DataError if one lacks it)."""
        from operator import attrgetter

        out = list(map(attrgetter(field_name), self.records))
        if set(map(type, out)) - {str}:
            i = next(i for i, text in enumerate(out) if not isinstance(text, str))
            raise DataError(
                f"record {self.records[i].id!r} has no {field_name} text", field=field_name
            )
        return out

    def tokens(self, field_name: str) -> TokenColumn:
        """Tokenise one field for all records (cached)."""
        col = self._columns.get(field_name)
        if col is not None:
            return col
        texts = self.texts(field_name)
        inverse, unique_texts = factorize_strings(texts)
        ids_parts: list[np.ndarray] = []
        len_parts: list[np.ndarray] = []
        for start in range(0, len(unique_texts), TOKENIZE_CHUNK):
            ids, lengths = self._chunk_ids(unique_texts[start : start + TOKENIZE_CHUNK])
            ids_parts.append(ids)
            len_parts.append(lengths)
        ids = np.concatenate(ids_parts) if ids_parts else np.zeros(0, dtype=np.int32)
        lengths = np.concatenate(len_parts) if len_parts else np.zeros(0, dtype=np.int64)
        offsets = np.zeros(len(unique_texts) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        col = TokenColumn(ids, offsets, inverse)
        self._columns[field_name] = col
        return col

    def release(self) -> None:
        """Let go of the tokens and of what the groups cached (once the matrix holds it)."""
        self.cache.clear()
        self._columns.clear()

    def _chunk_ids(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Token ids (shared vocabulary) and token counts of some texts.

        With the default tokenisation, plain ASCII texts without apostrophes (most of
        English data) are tokenised apart from the others, on the fast route, then merged
        back in order.
        """
        if self.tokenizer.is_default and len(texts) > 1:
            n = len(texts)
            plain = np.fromiter(map(str.isascii, texts), dtype=bool, count=n)
            plain &= ~np.fromiter(map(str.__contains__, texts, repeat("'")), dtype=bool, count=n)
            if 0 < plain.sum() < n:
                groups = [np.flatnonzero(plain), np.flatnonzero(~plain)]
                parts = [self._ids_of([texts[i] for i in g.tolist()]) for g in groups]
                lengths = np.zeros(len(texts), dtype=np.int64)
                for g, (_, part_lengths) in zip(groups, parts, strict=True):
                    lengths[g] = part_lengths
                offsets = np.concatenate([[0], np.cumsum(lengths)])
                ids = np.empty(offsets[-1], dtype=np.int32)
                for g, (part_ids, part_lengths) in zip(groups, parts, strict=True):
                    part_offsets = np.concatenate([[0], np.cumsum(part_lengths)[:-1]])
                    pos = np.repeat(offsets[g] - part_offsets, part_lengths)
                    ids[pos + np.arange(len(part_ids))] = part_ids
                return ids, lengths
        return self._ids_of(texts)

    def _ids_of(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        flat, lengths = self.tokenizer.tokenize_many(texts)
        # Ids local to the chunk first (hash table in C), then mapped to the shared vocabulary
        # through a small array.
        local_ids, local = factorize_strings(flat)
        del flat
        vocab = self.vocab
        remap = np.empty(len(local), dtype=np.int64)
        for i, tok in enumerate(local):
            if tok == "\x00" and lengths is None:
                remap[i] = -1
            else:
                remap[i] = vocab.setdefault(tok, len(vocab))
        ids = remap[local_ids] if len(local_ids) else np.zeros(0, dtype=np.int64)
        if lengths is None:
            is_sep = ids < 0
            bounds = np.concatenate([[-1], np.flatnonzero(is_sep), [len(ids)]])
            lengths = np.diff(bounds) - 1
            ids = ids[~is_sep]
        return ids.astype(np.int32), lengths


def factorize_strings(items: list[str]) -> tuple[np.ndarray, list[str]]:
    """``(codes, uniques)``: each item's index among the distinct items, first-seen order.

    A plain dict: 2-3x faster than ``pandas.factorize`` on strings (which hashes them anew).
    """
    seen: dict[str, int] = {}
    add = seen.setdefault
    codes = np.array([add(item, len(seen)) for item in items], dtype=np.int64)
    return codes, list(seen)
