"""Feature registry and extraction (SPEC §2).

A *feature group* is a registered function that turns records into binary features, each named
as in GD-NLI Table 12 (``sleeping@hypothesis``, ``hypo-len<5``, ``lex-overlap>0.8``,
``hypo-only-pred=contradiction``, ``<null>``). Two kinds are supported:

- per-record functions ``fn(record, **settings) -> Iterable[str]`` (the easy way for users):

  >>> @register_feature("has-negation")                       # doctest: +SKIP
  ... def has_negation(record):
  ...     return ["negation@hypothesis"] if " not " in record.hypothesis else []

- batch functions ``fn(ctx: FeatureContext) -> (csr_matrix, names[, keys])``, registered with
  ``batch=True`` (the built-ins: vectorised over the whole dataset, sharing one tokenisation,
  and returning a :class:`~zdebias.features.keys.FeatureKey` per column).

``extract_features(records, names)`` runs the groups and returns a :class:`FeatureMatrix`.
A name is a registered group (``ngrams``, ``hypo-len``, ...) or a dotted path to a user function
(``mypkg.features:has_negation`` or ``mypkg.features.has_negation``).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.data.labels import infer_task
from zdebias.data.process import gc_paused
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError
from zdebias.features.keys import NULL_FEATURE, FeatureKey
from zdebias.features.tokenize import Tokenizer, load_function

if TYPE_CHECKING:
    import scipy.sparse as sp

#: Default feature groups for pair (NLI) records, in column order.
DEFAULT_PAIR_FEATURES = ("ngrams", "hypo-len", "len-ratio", "lex-overlap", "hypo-only", "null")
#: Default feature groups for single-text records (n-grams and length on ``text``).
DEFAULT_TEXT_FEATURES = ("ngrams", "hypo-len", "null")

#: Settings every extraction understands, whatever groups it runs.
GLOBAL_SETTINGS = frozenset({"lowercase", "token_pattern", "tokenizer", "seed"})
#: Texts tokenised per regex pass (bounds the memory of the flat token list).
TOKENIZE_CHUNK = 100_000


@dataclass(frozen=True)
class FeatureSpec:
    """A registered feature group."""

    name: str
    fn: Callable[..., Any]
    batch: bool = False
    pair_only: bool = False
    #: Setting names the function takes (``None``: any, it has ``**kwargs``).
    settings: frozenset[str] | None = frozenset()
    doc: str = ""


_REGISTRY: dict[str, FeatureSpec] = {}
_ALIASES: dict[str, str] = {"length": "hypo-len", "text-len": "hypo-len", "<null>": "null"}
_BUILTINS_LOADED = False


def _setting_names(fn: Callable[..., Any], *, skip_first: bool) -> frozenset[str] | None:
    params = list(inspect.signature(fn).parameters.values())
    if skip_first and params:
        params = params[1:]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return frozenset(
        p.name
        for p in params
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    )


def register_feature(
    name: str,
    *,
    batch: bool = False,
    pair_only: bool = False,
    settings: Iterable[str] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a feature group under ``name`` (decorator).

    A per-record function gets the record and, by keyword, the settings its signature names.
    A batch function (``batch=True``) gets a :class:`FeatureContext` and returns
    ``(csr_matrix [n_records, n_cols], column_names)`` (or a list of matrices whose columns
    follow each other, to save a copy), optionally with a third item, the columns'
    :class:`~zdebias.features.keys.FeatureKey` (else they are ``custom``); declare the settings
    it reads in ``settings`` so unknown settings can be reported.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        if batch:
            accepted = frozenset(settings or ())
        else:
            accepted = _setting_names(fn, skip_first=True)
        _REGISTRY[name] = FeatureSpec(
            name=name,
            fn=fn,
            batch=batch,
            pair_only=pair_only,
            settings=accepted,
            doc=(inspect.getdoc(fn) or "").split("\n", 1)[0],
        )
        fn.zdebias_feature = name  # type: ignore[attr-defined]
        return fn

    return decorate


def _load_builtins() -> None:
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    _BUILTINS_LOADED = True
    from zdebias.features import (  # noqa: F401  (imported for their registrations)
        hypothesis_only,
        lengths,
        ngrams,
        overlap,
    )


def available_features() -> dict[str, str]:
    """Registered group names → one-line description."""
    _load_builtins()
    return {name: spec.doc for name, spec in sorted(_REGISTRY.items())}


def get_feature(name: str) -> FeatureSpec:
    """The feature group of that name, or a user function named by dotted path.

    Unknown names raise :class:`ConfigError` listing the valid ones.
    """
    _load_builtins()
    key = _ALIASES.get(name, name)
    if key in _REGISTRY:
        return _REGISTRY[key]
    if "." in name or ":" in name:
        fn = load_function(name)
        registered = getattr(fn, "zdebias_feature", None)
        if registered in _REGISTRY and _REGISTRY[registered].fn is fn:
            return _REGISTRY[registered]
        return FeatureSpec(
            name=name,
            fn=fn,
            batch=False,
            settings=_setting_names(fn, skip_first=True),
            doc=(inspect.getdoc(fn) or "").split("\n", 1)[0],
        )
    valid = ", ".join(sorted(_REGISTRY))
    raise ConfigError(
        f"unknown feature {name!r}; expected one of {valid}, or a dotted path pkg.module:function"
    )


# --------------------------------------------------------------------------- the matrix


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


# --------------------------------------------------------------------------- context


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
        inverse, unique_texts = _factorize_strings(texts)
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
        local_ids, local = _factorize_strings(flat)
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


def _factorize_strings(items: list[str]) -> tuple[np.ndarray, list[str]]:
    """``(codes, uniques)``: each item's index among the distinct items, first-seen order.

    A plain dict: 2-3x faster than ``pandas.factorize`` on strings (which hashes them anew).
    """
    seen: dict[str, int] = {}
    add = seen.setdefault
    codes = np.array([add(item, len(seen)) for item in items], dtype=np.int64)
    return codes, list(seen)


# --------------------------------------------------------------------------- extraction


def _record_feature(
    spec: FeatureSpec, records: Sequence[Record], settings: dict[str, Any]
) -> tuple[sp.csr_matrix, list[str]]:
    """Run a per-record feature function over all records."""
    if spec.settings is None:
        kwargs = dict(settings)
    else:
        kwargs = {k: v for k, v in settings.items() if k in spec.settings}
    names: dict[str, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for i, record in enumerate(records):
        out = spec.fn(record, **kwargs)
        if out is None:
            continue
        if isinstance(out, str):
            raise ConfigError(
                f"feature {spec.name!r} returned a string; it must return an iterable of names"
            )
        for fname in out:
            j = names.setdefault(str(fname), len(names))
            rows.append(i)
            cols.append(j)
    m = build_csr(
        np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64), len(records), len(names)
    )
    return m, list(names)


def _check_settings(specs: list[FeatureSpec], settings: dict[str, Any]) -> None:
    _load_builtins()
    known = set(GLOBAL_SETTINGS)
    for spec in (*_REGISTRY.values(), *specs):
        if spec.settings is None:
            return
        known |= spec.settings
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ConfigError(
            f"unknown feature setting(s) {', '.join(unknown)}; known settings: "
            f"{', '.join(sorted(known))}"
        )


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


def _run_group(
    spec: FeatureSpec,
    ctx: FeatureContext,
    records: Sequence[Record],
    settings: dict[str, Any],
    pair: bool,
) -> tuple[list[sp.csr_matrix], list[str], list[FeatureKey]]:
    """Run one feature group; its blocks (CSR), column names and keys, checked.

    A group without keys (a user feature) gets ``custom`` keys derived from its names.
    """
    if spec.pair_only and not pair:
        raise ConfigError(
            f"feature {spec.name!r} needs premise/hypothesis pairs; these records are single-text"
        )
    out = spec.fn(ctx) if spec.batch else _record_feature(spec, records, settings)
    m, fnames = out[0], list(out[1])
    if len(out) > 2:
        keys = list(out[2])
    else:
        keys = [FeatureKey.from_name(name, kind="custom") for name in fnames]
    parts = m if isinstance(m, list) else [m]  # a group may return several blocks
    n_cols = sum(p.shape[1] for p in parts)
    if any(p.shape[0] != len(records) for p in parts) or n_cols != len(fnames):
        raise ConfigError(
            f"feature {spec.name!r} returned {[p.shape for p in parts]} matrices for "
            f"{len(records)} records and {len(fnames)} names"
        )
    if len(keys) != len(fnames) or any(k.name != n for k, n in zip(keys, fnames, strict=True)):
        raise ConfigError(f"feature {spec.name!r} returned keys that do not match its names")
    return [p.tocsr() for p in parts], fnames, keys


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
            m, fnames, fkeys = _run_group(spec, ctx, records, settings, pair)
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
    default :data:`DEFAULT_PAIR_FEATURES` for pairs, :data:`DEFAULT_TEXT_FEATURES` for text.
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
    if names is None:
        names = DEFAULT_PAIR_FEATURES if pair else DEFAULT_TEXT_FEATURES
    specs = [get_feature(n) for n in dict.fromkeys(names)]
    _check_settings(specs, settings)
    if labels is None and records:
        labels = infer_task(records).labels
    if not records:
        return FeatureMatrix(sp.csr_matrix((0, 0), dtype=np.uint8), [], [])
    ctx = FeatureContext(records, settings, labels=labels)
    from zdebias.features.parallel import chunkable, resolve_num_proc, run_groups_parallel

    workers = resolve_num_proc(num_proc, len(records))
    # Names and keys are many small objects: the cyclic GC would walk every record each time.
    with gc_paused():
        if workers > 1 and any(chunkable(spec) for spec in specs):
            blocks, all_names, all_keys = run_groups_parallel(specs, ctx, settings, pair, workers)
        else:
            blocks, all_names, all_keys = _run_groups(specs, ctx, settings, pair, progress)
    ctx.cache.clear()  # the blocks and tokens it holds can go once copied into the matrix
    ctx._columns.clear()
    return assemble_matrix(blocks, all_names, all_keys, len(records))


#: Rows copied at a time by :func:`_hstack`.
HSTACK_ROWS = 1 << 20
#: Matrix entries counted or renumbered at a time (bounds the temporary copies numpy makes).
ENTRY_SLICE = 1 << 24


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


# --------------------------------------------------------------------------- null feature


@register_feature("null", batch=True)
def null_feature(ctx: FeatureContext) -> tuple[sp.csr_matrix, list[str], list[FeatureKey]]:
    """<null>: on every example; its z is the label imbalance."""
    n = len(ctx.records)
    return (
        bins_matrix(np.zeros(n, dtype=np.int64), 1),
        [NULL_FEATURE],
        [FeatureKey(NULL_FEATURE, "null")],
    )
