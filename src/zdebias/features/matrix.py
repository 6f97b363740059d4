"""The feature matrix and its sparse building blocks.

:class:`FeatureMatrix` is what extraction returns: a binary CSR matrix (one row per record,
one column per feature) with the columns' names and keys. The rest builds one: a binary CSR
from (row, col) pairs or one bin per row (what feature groups return), and
:func:`assemble_matrix`, which sets every group's blocks side by side (:class:`RowParts`: a
block kept as the row parts of the chunks that made it), merges the columns two groups share
and drops the columns no record has, in about one copy of the matrix's memory.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.features.keys import FeatureKey

if TYPE_CHECKING:
    import scipy.sparse as sp

#: Rows copied at a time by :func:`_hstack`.
HSTACK_ROWS = 1 << 20
#: Matrix entries counted or renumbered at a time (bounds the temporary copies numpy makes).
ENTRY_SLICE = 1 << 24


@dataclass
class FeatureMatrix:
    """Binary features of a list of records.

    ``matrix``: ``scipy.sparse.csr_matrix`` of ``uint8`` ones, shape ``[n_records, n_features]``
    (row ``i`` = record ``i``; a feature is present or absent, never counted twice).
    ``names``: the column names (``sleeping@hypothesis``, ``hypo-len<5``, ...).
    ``keys``: the same columns as :class:`~zdebias.features.keys.FeatureKey` (kind, field,
    n-gram tokens); derived from the names when not given.
    """

    matrix: sp.csr_matrix
    names: list[str]
    keys: list[FeatureKey] = None  # type: ignore[assignment]
    _index: dict[str, int] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.keys is None:
            self.keys = [FeatureKey.from_name(name) for name in self.names]
        elif len(self.keys) != len(self.names):
            raise ValueError(f"{len(self.keys)} feature keys for {len(self.names)} names")

    @property
    def n_records(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.matrix.shape[1])

    @property
    def index(self) -> dict[str, int]:
        """Feature name → column."""
        if self._index is None:
            self._index = {name: i for i, name in enumerate(self.names)}
        return self._index

    def column(self, name: str) -> np.ndarray:
        """Boolean presence of one feature over the records (all False if unknown)."""
        j = self.index.get(name)
        if j is None:
            return np.zeros(self.n_records, dtype=bool)
        m = self.matrix
        out = np.zeros(self.n_records, dtype=bool)
        out[_rows_of(m)[m.indices == j]] = True
        return out

    def features_of(self, row: int) -> list[str]:
        """The names of the features record ``row`` has, in column order."""
        m = self.matrix
        cols = m.indices[m.indptr[row] : m.indptr[row + 1]]
        return [self.names[j] for j in np.sort(cols)]

    def rows(self, index: np.ndarray | Sequence[int]) -> FeatureMatrix:
        """The same features for a subset (or reordering) of the records."""
        return FeatureMatrix(self.matrix[np.asarray(index, dtype=np.int64)], self.names, self.keys)


def _rows_of(m: sp.csr_matrix) -> np.ndarray:
    return np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))


def build_csr(rows: np.ndarray, cols: np.ndarray, n_rows: int, n_cols: int) -> sp.csr_matrix:
    """A canonical binary CSR matrix from (row, col) pairs; ``rows`` must be non-decreasing.

    Duplicates collapse into one (a feature is present once per record).
    """
    import scipy.sparse as sp

    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int32)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
    m = sp.csr_matrix((np.ones(len(cols), dtype=np.uint8), cols, indptr), shape=(n_rows, n_cols))
    m.sum_duplicates()
    m.data[:] = 1
    return m


def bins_matrix(bin_of_row: np.ndarray, n_bins: int) -> sp.csr_matrix:
    """One-hot CSR for one bin per row; rows with bin -1 get no feature."""
    valid = bin_of_row >= 0
    rows = np.flatnonzero(valid)
    return build_csr(rows, bin_of_row[valid], len(bin_of_row), n_bins)


def _merge_duplicate_columns(
    m: sp.csr_matrix, names: list[str], keys: list[FeatureKey]
) -> tuple[sp.csr_matrix, list[str], list[FeatureKey]]:
    """Two groups may emit the same feature name: OR their columns into one (first key wins)."""
    if len(set(names)) == len(names):
        return m, names, keys
    unique: dict[str, int] = {}
    target = np.fromiter(
        (unique.setdefault(n, len(unique)) for n in names), dtype=np.int64, count=len(names)
    )
    if len(unique) == len(names):
        return m, names, keys
    first = dict(zip(reversed(names), reversed(keys), strict=True))
    rows = _rows_of(m)
    cols = target[m.indices]
    merged = build_csr(rows, cols, m.shape[0], len(unique))
    return merged, list(unique), [first[name] for name in unique]


@dataclass
class RowParts:
    """One block kept as the CSR parts of its rows, top to bottom, all ``width`` columns wide
    (a chunked group's block as the chunks returned it): :func:`_hstack` copies it into the
    matrix part by part and lets each part go, so the block is never stacked on its own."""

    parts: list[Any]
    width: int

    @property
    def shape(self) -> tuple[int, int]:
        return sum(p.shape[0] for p in self.parts), self.width

    def bounds(self) -> list[int]:
        """The first row of each part, and the row count."""
        return [0, *np.cumsum([p.shape[0] for p in self.parts]).tolist()]

    def stacked(self) -> sp.csr_matrix:
        import scipy.sparse as sp

        if len(self.parts) == 1:
            return self.parts[0]
        return sp.vstack(self.parts, format="csr")


def _row_lengths(b: Any) -> np.ndarray:
    if isinstance(b, RowParts):
        return np.concatenate([np.diff(p.indptr) for p in b.parts])
    return np.diff(b.indptr)


def _hstack(blocks: list[Any], n_rows: int) -> sp.csr_matrix:
    """CSR blocks (or :class:`RowParts`) side by side (``uint8`` values), like
    ``scipy.sparse.hstack`` but emptying ``blocks`` as it goes. The matrix is filled a range of
    rows at a time (a million, or the row parts' own ranges), every block's rows of the range
    in turn, and row parts are let go once copied: memory the parts give back, the matrix's
    untouched pages take, so the peak is about one copy of the matrix, not two or three
    (gigabytes at millions of rows)."""
    import scipy.sparse as sp

    cuts = {tuple(b.bounds()) for b in blocks if isinstance(b, RowParts)}
    if len(cuts) > 1:  # parts of different heights: not from the same chunks
        blocks[:] = [b.stacked() if isinstance(b, RowParts) else b for b in blocks]
        cuts = set()
    bounds = list(cuts.pop()) if cuts else [*range(0, n_rows, HSTACK_ROWS), n_rows]
    lengths = np.zeros(n_rows, dtype=np.int64)
    n_cols = 0
    for b in blocks:
        lengths += _row_lengths(b)
        n_cols += b.shape[1]
    nnz = int(lengths.sum())
    idx = np.int32 if max(nnz, n_cols) < 2**31 else np.int64
    indptr = np.zeros(n_rows + 1, dtype=idx)
    np.cumsum(lengths, out=indptr[1:])
    del lengths
    indices = np.empty(nnz, dtype=idx)
    data = np.empty(nnz, dtype=np.uint8)
    offsets = np.cumsum([0, *(b.shape[1] for b in blocks)]).tolist()
    for k, (a, e) in enumerate(itertools.pairwise(bounds)):
        free = indptr[a:e].astype(np.int64)  # each row's next free slot
        for b, offset in zip(blocks, offsets, strict=False):
            if isinstance(b, RowParts):
                part, b.parts[k] = b.parts[k], None
                b_indptr = part.indptr.astype(np.int64, copy=False)
                part_indices, part_data = part.indices, part.data
                lo, hi = 0, int(b_indptr[-1])
            else:
                b_indptr = b.indptr[a : e + 1].astype(np.int64, copy=False)
                part_indices, part_data = b.indices, b.data
                lo, hi = int(b_indptr[0]), int(b_indptr[-1])
            rows = np.diff(b_indptr)
            if hi > lo:
                dest = np.repeat(free - b_indptr[:-1], rows)
                dest += np.arange(lo, hi)
                indices[dest] = part_indices[lo:hi] + offset
                data[dest] = part_data[lo:hi]
            free += rows
            del b_indptr, part_indices, part_data
    blocks.clear()
    return sp.csr_matrix((data, indices, indptr), shape=(n_rows, n_cols))


def _column_counts(m: sp.csr_matrix) -> np.ndarray:
    """Entries per column, counted a slice at a time (``np.bincount`` makes an int64 copy of
    what it counts: gigabytes for the indices of millions of rows)."""
    counts = np.zeros(m.shape[1], dtype=np.int64)
    step = ENTRY_SLICE
    for a in range(0, len(m.indices), step):
        counts += np.bincount(m.indices[a : a + step], minlength=m.shape[1])
    return counts


def assemble_matrix(
    blocks: list[Any], all_names: list[str], all_keys: list[FeatureKey], n_records: int
) -> FeatureMatrix:
    """The :class:`FeatureMatrix` of every group's blocks side by side: columns two groups
    share merged, columns no record has dropped, indices sorted. ``blocks`` is emptied (each
    block let go once copied)."""
    import scipy.sparse as sp

    if len(blocks) == 1 and not isinstance(blocks[0], RowParts):
        matrix = blocks.pop().astype(np.uint8)
    elif blocks:
        matrix = _hstack(blocks, n_records)
    else:
        matrix = sp.csr_matrix((n_records, 0), dtype=np.uint8)
    matrix, all_names, all_keys = _merge_duplicate_columns(matrix, all_names, all_keys)
    counts = _column_counts(matrix)
    if (counts == 0).any():
        keep = np.flatnonzero(counts)
        remap = (np.cumsum(counts > 0) - 1).astype(matrix.indices.dtype)
        # in place and a slice at a time (numpy copies an input that overlaps ``out``): this
        # matrix is a new one, and another copy of its indices is gigabytes at millions of rows
        indices = matrix.indices
        step = ENTRY_SLICE
        for a in range(0, len(indices), step):
            part = indices[a : a + step]
            np.take(remap, part, out=part, mode="clip")
        matrix = sp.csr_matrix(
            (matrix.data, matrix.indices, matrix.indptr), shape=(matrix.shape[0], len(keep))
        )
        all_names = [all_names[j] for j in keep.tolist()]
        all_keys = [all_keys[j] for j in keep.tolist()]
    matrix.sort_indices()
    return FeatureMatrix(matrix.astype(np.uint8, copy=False), all_names, all_keys)
