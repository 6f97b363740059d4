"""Streaming readers for every supported input format (SPEC §1).

Formats: ``jsonl``, ``json`` (a list of objects), ``csv``, ``tsv``, ``parquet``, ``triplets``
(robust-nli ``s1.X s2.X labels.X``), ``hans`` (``heuristics_evaluation_set.txt``), ``hf``
(``hf:NAME[@CONFIG][:SPLIT[@REVISION]]`` through HF ``datasets``, cached), ``hf-disk`` (a
``save_to_disk`` folder; ``DIR::SPLIT`` for a DatasetDict), ``arrow`` (an Arrow IPC file), and
``.gz`` of any file format (:mod:`zdebias.data.hf` reads the HF ones). The format is detected
from the file and can be forced with ``format=``.

>>> ds = open_dataset("train.jsonl")            # doctest: +SKIP
>>> for record in ds: ...                       # doctest: +SKIP
>>> ds.report.n_records, ds.report.n_unlabelled # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import csv
import gc
import gzip
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

from zdebias.data.labels import Task, get_task
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError

FORMATS = ("jsonl", "json", "csv", "tsv", "parquet", "triplets", "hans", "hf", "hf-disk", "arrow")
OnError = Literal["raise", "skip"]

#: Column names recognised for each field, in order of preference (matched case-insensitively).
COLUMN_CANDIDATES: dict[str, tuple[str, ...]] = {
    "premise": ("premise", "sentence1", "s1"),
    "hypothesis": ("hypothesis", "sentence2", "s2"),
    "text": ("text", "sentence", "review", "content"),
    "label": ("label", "gold_label", "sentiment", "labels"),
    "id": ("id", "pairid", "guid", "idx", "uid"),
}
#: Columns never copied into ``meta`` (parse trees are large and re-derivable).
_DROPPED_SUFFIXES = ("_parse",)


@dataclass
class ReadReport:
    """What a read saw: records given, unlabelled rows skipped, bad rows skipped (``skip`` mode)."""

    path: str
    format: str
    task: str
    n_records: int = 0
    n_unlabelled: int = 0
    unlabelled_lines: list[int] = field(default_factory=list)
    errors: list[DataError] = field(default_factory=list)

    @property
    def n_errors(self) -> int:
        return len(self.errors)

    @property
    def labels(self) -> tuple[str, ...] | None:
        """The label set of the task read (None when it could not be told)."""
        return get_task(self.task).labels if self.task and self.task != "?" else None

    @property
    def n_rows(self) -> int:
        """All data rows seen: records + unlabelled + bad."""
        return self.n_records + self.n_unlabelled + self.n_errors

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary (first 20 error lines only)."""
        return {
            "path": self.path,
            "format": self.format,
            "task": self.task,
            "n_records": self.n_records,
            "n_unlabelled": self.n_unlabelled,
            "n_errors": self.n_errors,
            "errors": [str(e) for e in self.errors[:20]],
        }


def _open_binary(path: Path) -> BinaryIO:
    """Open a file for binary reading, transparently un-gzipping by magic bytes."""
    if not path.exists():
        raise DataError("no such file or folder", path=str(path))
    if path.is_dir():
        raise DataError("is a folder; expected a file", path=str(path))
    fh = path.open("rb")
    if fh.read(2) == b"\x1f\x8b":
        fh.seek(0)
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    fh.seek(0)
    return fh


def _peek(path: Path, n: int = 4096) -> bytes:
    with _open_binary(path) as fh:
        try:
            return fh.read(n)
        except (OSError, EOFError, zlib.error) as err:
            raise DataError(f"corrupt gzip data: {err}", path=str(path)) from None


def _decoded_lines(fh: BinaryIO, path: str) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` of a binary stream, failing clearly on bad UTF-8 or gzip."""
    lineno = 0
    try:
        for raw in fh:
            lineno += 1
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                bad = raw[err.start]
                yield (
                    lineno,
                    _BadLine(f"not valid UTF-8: byte 0x{bad:02x} at column {err.start + 1}"),
                )  # type: ignore[misc]
                continue
            if lineno == 1 and text.startswith("\ufeff"):
                text = text[1:]
            yield lineno, text
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"corrupt gzip data: {err}", path=path, line=lineno + 1) from None


class _BadLine(str):
    """A line that could not be decoded; its value is the error message."""


def split_path_and_split(path: str | Path) -> tuple[Path, str | None]:
    """Parse ``DIR::SPLIT`` (triplet folder and split); plain paths have no split."""
    text = str(path)
    if "::" in text:
        head, split = text.rsplit("::", 1)
        return Path(head), split
    return Path(text), None


def detect_format(path: str | Path) -> str:
    """The format of a path, from its name and first bytes."""
    text = str(path)
    if text.startswith("hf:"):
        return "hf"
    p, split = split_path_and_split(text)
    from zdebias.data.hf import is_saved_dataset

    if is_saved_dataset(p):
        return "hf-disk"
    if split is not None or p.is_dir():
        return "triplets"
    if p.suffix.lower() == ".arrow":
        return "arrow"
    if p.name.split(".", 1)[0] in ("s1", "s2", "labels") and "." in p.name:
        if not p.name.endswith((".jsonl", ".json", ".csv", ".tsv", ".parquet", ".gz")):
            return "triplets"
    head = _peek(p).removeprefix(b"\xef\xbb\xbf")
    if head.startswith(b"PAR1"):
        return "parquet"
    name = p.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    suffix = Path(name).suffix
    first_line = head.split(b"\n", 1)[0]
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".parquet":
        return "parquet"
    if suffix == ".json":
        return "json" if _json_document(p, head) else "jsonl"
    if b"\t" in first_line and b"heuristic" in first_line and b"gold_label" in first_line:
        return "hans"
    if suffix == ".tsv":
        return "tsv"
    if suffix == ".csv":
        return "csv"
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        return "jsonl"
    if stripped.startswith(b"["):
        return "json"
    if b"\t" in first_line:
        return "tsv"
    if b"," in first_line:
        return "csv"
    raise DataError(
        f"cannot tell the format; pass --format (one of {', '.join(FORMATS)})", path=str(p)
    )


def _json_document(path: Path, head: bytes) -> bool:
    """Whether a ``.json`` file is one JSON document (a list, or ``{"data": [...]}`` as HF's
    ``field="data"``) rather than JSON lines: a list, or a first line that is not a whole
    object by itself, or one whose ``data`` is a list."""
    head = head.lstrip()
    if head.startswith(b"["):
        return True
    if not head.startswith(b"{"):
        return False
    with _open_binary(path) as fh:
        first = fh.readline(1 << 22).removeprefix(b"\xef\xbb\xbf")
    try:
        obj = json.loads(first)
    except (ValueError, RecursionError):
        return True  # a pretty-printed document; the JSON reader names the line if it is bad
    return isinstance(obj, dict) and isinstance(obj.get("data"), list)


#: a JSON escape of a lone UTF-16 surrogate (not valid Unicode; no UTF-8 writer accepts it)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _surrogate(value: Any) -> tuple[str, str] | None:
    """``(field, character)`` of the first lone surrogate in a parsed JSON row, else None."""
    if isinstance(value, str):
        for ch in value:
            if "\ud800" <= ch <= "\udfff":
                return "", f"\\u{ord(ch):04x}"
        return None
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        found = _surrogate(item)
        if found is not None:
            return (found[0] or str(key)) if isinstance(value, dict) else found[0], found[1]
    return None


def _json_value(text: str, path: Path, line: int, *, document: bool = False) -> Any:
    """``json.loads(text)``, every failure one located :class:`DataError`: invalid JSON, a
    number over Python's digit limit, nesting too deep, a lone surrogate in a string.
    ``document``: ``text`` is a whole file starting at ``line`` (else one line of JSONL)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(
            f"invalid JSON: {err.msg} at column {err.colno}",
            path=str(path),
            line=line + err.lineno - 1 if document else line,
        ) from None
    except ValueError as err:  # int("7" * 5000): over sys.get_int_max_str_digits()
        digits = str(err).split("value has ")[-1].split(";")[0]
        raise DataError(
            f"invalid JSON: a number too long to read ({digits})", path=str(path), line=line
        ) from None
    except RecursionError:
        raise DataError("invalid JSON: nested too deeply", path=str(path), line=line) from None
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):  # the cheap test first
        found = _surrogate(value)
        if found is not None:
            raise DataError(
                f"lone surrogate {found[1]} in text (not valid Unicode)",
                path=str(path),
                line=line,
                field=found[0] or None,
            )
    return value


# --------------------------------------------------------------------------- row → Record


class _RowMapper:
    """Turns raw dict rows into Records: column mapping, label mapping, validation."""

    def __init__(
        self,
        *,
        path: str,
        keys: Iterable[str],
        task: Task | None,
        columns: Mapping[str, str] | None,
        label_map: Mapping[str, str] | None,
        default_task: str,
        id_prefix: str,
        label_names: list[str] | None = None,
    ) -> None:
        self.path = path
        keys = list(keys)
        lower = {k.lower(): k for k in keys}
        mapping: dict[str, str] = {}
        for fld, candidates in COLUMN_CANDIDATES.items():
            for cand in candidates:
                if cand in lower:
                    mapping[fld] = lower[cand]
                    break
        if columns:
            for fld, col in columns.items():
                if fld not in COLUMN_CANDIDATES:
                    raise ConfigError(
                        f"unknown field {fld!r} in column mapping; expected one of "
                        f"{', '.join(COLUMN_CANDIDATES)}"
                    )
                mapping[fld] = col
        self.pair = "premise" in mapping and "hypothesis" in mapping
        if task is None:
            task = get_task(default_task if self.pair else "sentiment")
        self.task = task
        needed = ("premise", "hypothesis", "label") if task.pair else ("text", "label")
        if task.pair and not self.pair:
            missing = [f for f in ("premise", "hypothesis") if f not in mapping]
        else:
            missing = [f for f in needed if f not in mapping]
        if missing:
            raise DataError(
                f"no column for {', '.join(missing)}; found columns {keys}; map them with "
                f"--columns {missing[0]}=COLUMN",
                path=path,
                line=1,
            )
        self.mapping = mapping
        self.text_fields = ("premise", "hypothesis") if task.pair else ("text",)
        used = {mapping[f] for f in (*needed, "id") if f in mapping}
        self.extra = [
            k for k in keys if k not in used and k != "meta" and not k.endswith(_DROPPED_SUFFIXES)
        ]
        self.label_map = {str(k).strip().lower(): v for k, v in (label_map or {}).items()}
        self.label_names = label_names
        self.id_prefix = id_prefix
        #: (raw label, its type) → label name or None, for raw labels already read
        self._labels: dict[tuple[Any, type], str | None] = {}

    def __call__(self, row: Mapping[str, Any], line: int) -> Record | None:
        """A Record, or None for an unlabelled row. Raises DataError on bad rows."""
        if type(row) is not dict and not isinstance(row, Mapping):
            raise DataError(
                f"expected a JSON object, got {type(row).__name__}", path=self.path, line=line
            )
        values: dict[str, str] = {}
        for fld in self.text_fields:
            col = self.mapping[fld]
            if col not in row:
                raise DataError("missing field", path=self.path, line=line, field=col)
            value = row[col]
            if not isinstance(value, str):
                kind = "null" if value is None else type(value).__name__
                raise DataError(f"expected text, got {kind}", path=self.path, line=line, field=col)
            value = value.strip()
            if not value:
                raise DataError("empty text", path=self.path, line=line, field=col)
            values[fld] = value
        label_col = self.mapping["label"]
        if label_col not in row:
            raise DataError("missing field", path=self.path, line=line, field=label_col)
        raw = row[label_col]
        cached = (raw, type(raw)) if type(raw) is str or type(raw) is int else None
        if cached is not None and cached in self._labels:
            label = self._labels[cached]
        else:
            label = self._label(raw, line, label_col)
            if cached is not None:
                self._labels[cached] = label
        if label is None:
            return None
        id_col = self.mapping.get("id")
        rid = row.get(id_col) if id_col else None
        rid = f"{self.id_prefix}:{line}" if rid is None or rid == "" else str(rid)
        meta: dict[str, Any] = {}
        raw_meta = row.get("meta")
        if isinstance(raw_meta, str) and raw_meta.startswith("{"):
            try:
                raw_meta = json.loads(raw_meta)
            except (ValueError, RecursionError):
                raw_meta = None
        if isinstance(raw_meta, dict):
            meta.update(raw_meta)
        for key in self.extra:
            value = row.get(key)
            if value is not None and value != "":
                meta[key] = value
        if self.task.pair:
            return Record(rid, label, values["premise"], values["hypothesis"], None, meta)
        return Record(rid, label, None, None, values["text"], meta)

    def _label(self, raw: Any, line: int, label_col: str) -> str | None:
        """The label name of a raw label (None: unlabelled); DataError if unknown."""
        if (
            self.label_names is not None
            and isinstance(raw, int)
            and 0 <= raw < len(self.label_names)
        ):
            raw = self.label_names[raw]
        if raw is not None and str(raw).strip().lower() in self.label_map:
            raw = self.label_map[str(raw).strip().lower()]
        try:
            return self.task.normalize(raw)
        except ValueError as err:
            raise DataError(str(err), path=self.path, line=line, field=label_col) from None


# --------------------------------------------------------------------------- raw row sources
# Each source yields (line_number, row) where row is a dict, or a DataError for a bad row.


#: JSON values orjson reads exactly as ``json`` does (it reads an integer past 64 bits as a
#: float, so rows holding a float take the ``json`` route)
_EXACT_TYPES = frozenset({str, int, bool, type(None)})


def _exact(value: Any) -> bool:
    """True when ``value`` (a row orjson parsed) holds no float, in any nested list or dict."""
    kind = type(value)
    if kind is dict:
        return all(map(_exact, value.values()))
    if kind is list:
        return all(map(_exact, value))
    return kind in _EXACT_TYPES


def _fast_loads() -> Callable[[bytes], Any] | None:
    """``orjson.loads`` when installed (3x faster than ``json``), else None."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a dependency
        return None
    return orjson.loads


def _jsonl_line(raw: bytes, lineno: int, path: Path) -> Any:
    """One JSONL line read the careful way: its value, a DataError, or None (blank line)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        bad = raw[err.start]
        return DataError(
            f"not valid UTF-8: byte 0x{bad:02x} at column {err.start + 1}",
            path=str(path),
            line=lineno,
        )
    if lineno == 1 and text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        return None
    try:
        return _json_value(text, path, lineno)
    except DataError as err:
        return err


def lines_before(path: Path, offset: int) -> int:
    """How many lines start before byte ``offset`` of a plain (uncompressed) file."""
    n, done = 0, 0
    with path.open("rb") as fh:
        while done < offset:
            block = fh.read(min(1 << 24, offset - done))
            if not block:
                break
            n += block.count(b"\n")
            done += len(block)
    return n


def _jsonl_rows(path: Path, start: int = 0, end: int | None = None) -> Iterator[tuple[int, Any]]:
    """Rows of a JSONL file. A line that orjson reads as an object without floats is taken
    as it is (the same value ``json`` gives); any other goes through :func:`_jsonl_line`
    (UTF-8, BOM, blank lines, located errors), so both routes read every file alike.

    ``start`` / ``end``: only the lines that start in that byte range of a plain file
    (``start`` at a line start), numbered as in the whole file.
    """
    loads = _fast_loads()
    exact_types = _EXACT_TYPES
    lineno = lines_before(path, start) if start else 0
    pos = start
    with _open_binary(path) as fh:
        if start:
            fh.seek(start)
        try:
            for raw in fh:
                if end is not None:
                    if pos >= end:
                        break
                    pos += len(raw)
                lineno += 1
                if loads is not None:
                    try:
                        value = loads(raw)
                    except ValueError:
                        pass
                    else:
                        if type(value) is dict and (
                            exact_types.issuperset(map(type, value.values())) or _exact(value)
                        ):
                            yield lineno, value
                            continue
                row = _jsonl_line(raw, lineno, path)
                if row is not None:
                    yield lineno, row
        except (OSError, EOFError, zlib.error) as err:
            raise DataError(f"corrupt gzip data: {err}", path=str(path), line=lineno + 1) from None


def _json_rows(path: Path) -> Iterator[tuple[int, Any]]:
    with _open_binary(path) as fh:
        try:
            data = fh.read()
        except (OSError, EOFError, zlib.error) as err:
            raise DataError(f"corrupt gzip data: {err}", path=str(path)) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise DataError(
            f"not valid UTF-8: byte 0x{data[err.start]:02x}", path=str(path), line=line
        ) from None
    rows = _json_value(text, path, 1, document=True)
    if isinstance(rows, dict) and isinstance(rows.get("data"), list):
        rows = rows["data"]
    if not isinstance(rows, list):
        raise DataError(
            f"expected a JSON list of objects, got {type(rows).__name__}", path=str(path), line=1
        )
    yield from enumerate(rows, 1)


def _delimited_rows(path: Path, delimiter: str) -> Iterator[tuple[int, Any]]:
    with _open_binary(path) as fh:
        lines = _decoded_lines(fh, str(path))
        bad: list[tuple[int, str]] = []

        def text_lines() -> Iterator[str]:
            for lineno, text in lines:
                if isinstance(text, _BadLine):
                    bad.append((lineno, str(text)))
                    yield "\x00BAD\x00\n"
                else:
                    yield text

        reader = csv.reader(text_lines(), delimiter=delimiter)
        try:
            header = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise DataError(f"bad header: {err}", path=str(path), line=1) from None
        if bad and bad[0][0] == 1:
            raise DataError(bad[0][1], path=str(path), line=1)
        header = [h.strip() for h in header]
        _no_duplicate_columns(header, path)
        yield 0, header  # the header, for column detection
        while True:
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as err:
                yield (
                    reader.line_num,
                    DataError(f"bad CSV/TSV row: {err}", path=str(path), line=reader.line_num),
                )
                continue
            line = reader.line_num
            if cells == ["\x00BAD\x00"]:
                lineno, message = bad.pop(0)
                yield lineno, DataError(message, path=str(path), line=lineno)
                continue
            if not cells or cells == [""]:
                continue
            if len(cells) != len(header):
                yield (
                    line,
                    DataError(
                        f"expected {len(header)} columns ({', '.join(header)}), found {len(cells)}",
                        path=str(path),
                        line=line,
                    ),
                )
                continue
            yield line, dict(zip(header, cells, strict=True))


def _no_duplicate_columns(header: list[str], path: Path) -> None:
    """A header naming one column twice is refused: a reader would keep only one of them."""
    seen: dict[str, int] = {}
    for i, name in enumerate(header, 1):
        if name.lower() in seen:
            raise DataError(
                f"column {name!r} appears twice in the header (columns {seen[name.lower()]} and "
                f"{i}); rename one",
                path=str(path),
                line=1,
                field=name,
            )
        seen[name.lower()] = i


def _parquet_rows(path: Path) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(str(path))
    except Exception as err:  # pyarrow raises several types for a broken file
        raise DataError(f"not a readable parquet file: {err}", path=str(path)) from None
    _no_duplicate_columns(pf.schema_arrow.names, path)
    yield 0, pf.schema_arrow.names
    row = 0
    for batch in pf.iter_batches(batch_size=4096):
        for item in batch.to_pylist():
            row += 1
            yield row, item


def _triplet_files(path: Path, split: str | None) -> tuple[Path, Path, Path, str]:
    if path.is_file():
        name = path.name
        split = name.partition(".")[2]
        path = path.parent
    if not path.is_dir():
        raise DataError("no such folder", path=str(path))
    if split is None:
        splits = sorted(p.name[3:] for p in path.glob("s1.*"))
        if len(splits) != 1:
            raise DataError(
                f"folder holds splits {splits or 'none'}; name one as {path}::SPLIT",
                path=str(path),
            )
        split = splits[0]
    files = (path / f"s1.{split}", path / f"s2.{split}", path / f"labels.{split}")
    for f in files:
        if not f.exists():
            raise DataError(f"missing triplet file {f.name} (need s1, s2, labels)", path=str(f))
    return (*files, split)


def _triplet_rows(path: Path, split: str | None) -> Iterator[tuple[int, Any]]:
    s1, s2, labels, split = _triplet_files(path, split)
    yield 0, ["premise", "hypothesis", "label"]
    with _open_binary(s1) as f1, _open_binary(s2) as f2, _open_binary(labels) as f3:
        it1, it2, it3 = (_decoded_lines(f, str(p)) for f, p in ((f1, s1), (f2, s2), (f3, labels)))
        sentinel = (None, None)
        while True:
            a, b, c = next(it1, sentinel), next(it2, sentinel), next(it3, sentinel)
            ends = [x[0] is None for x in (a, b, c)]
            if all(ends):
                return
            if any(ends):
                short = [p.name for p, e in zip((s1, s2, labels), ends, strict=True) if e]
                longer = next(p for p, e in zip((s1, s2, labels), ends, strict=True) if not e)
                line = next(x[0] for x in (a, b, c) if x[0] is not None)
                raise DataError(
                    f"{', '.join(short)} ended at line {line - 1} but {longer.name} goes on",
                    path=str(longer),
                    line=line,
                )
            line = a[0]
            bad = next(
                (
                    (p, x)
                    for p, x in zip((s1, s2, labels), (a, b, c), strict=True)
                    if isinstance(x[1], _BadLine)
                ),
                None,
            )
            if bad is not None:
                yield line, DataError(str(bad[1][1]), path=str(bad[0]), line=line)
                continue
            yield (
                line,
                {
                    "premise": a[1].rstrip("\r\n"),
                    "hypothesis": b[1].rstrip("\r\n"),
                    "label": c[1].strip(),
                },
            )


# --------------------------------------------------------------------------- public API


def _default_task_for(row: Mapping[str, Any], default: str) -> str:
    """``nli-binary`` when a pair file's first label is a binary-NLI name (HANS-style output)."""
    for key in ("label", "gold_label"):
        value = row.get(key)
        if isinstance(value, str) and value.strip().lower() in (
            "non-entailment",
            "non_entailment",
            "not_entailment",
        ):
            return "nli-binary"
    return default


class Dataset:
    """A re-iterable, streaming view of one input. Each pass refreshes ``report``."""

    def __init__(
        self,
        path: str | Path,
        *,
        format: str | None = None,
        task: str | Task | None = None,
        columns: Mapping[str, str] | None = None,
        label_map: Mapping[str, str] | None = None,
        split: str | None = None,
        on_error: OnError = "raise",
    ) -> None:
        if format is not None and format not in FORMATS:
            raise ConfigError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
        if on_error not in ("raise", "skip"):
            raise ConfigError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
        self.spec = str(path)
        self.path, path_split = (
            split_path_and_split(path)
            if not self.spec.startswith("hf:")
            else (Path(self.spec), None)
        )
        self.split = split or path_split
        self.format = format or detect_format(
            self.spec if self.split is None else f"{self.path}::{self.split}"
        )
        self.task = get_task(task) if task is not None else None
        self.columns = dict(columns or {})
        self.label_map = dict(label_map or {})
        self.on_error = on_error
        self.report = ReadReport(self.spec, self.format, self.task.name if self.task else "?")

    def _rows(self) -> tuple[Iterator[tuple[int, Any]], list[str] | None, str]:
        fmt, p = self.format, self.path
        if fmt in ("hf", "hf-disk", "arrow"):
            from zdebias.data import hf

            if fmt == "hf":
                rows, names = hf.hub_rows(self.spec)
                return rows, names, self.spec
            if fmt == "hf-disk":
                rows, names = hf.saved_rows(p, self.split)
                return rows, names, p.name if self.split is None else f"{p.name}/{self.split}"
            rows, names = hf.arrow_rows(p)
            return rows, names, p.name
        if fmt == "triplets":
            s1, _, _, split = _triplet_files(p, self.split)
            return _triplet_rows(p, self.split), None, f"{s1.parent.name}/{split}"
        sources: dict[str, Callable[[Path], Iterator[tuple[int, Any]]]] = {
            "jsonl": _jsonl_rows,
            "json": _json_rows,
            "csv": lambda q: _delimited_rows(q, ","),
            "tsv": lambda q: _delimited_rows(q, "\t"),
            "hans": lambda q: _delimited_rows(q, "\t"),
            "parquet": _parquet_rows,
        }
        return sources[fmt](p), None, p.name

    def __iter__(self) -> Iterator[Record]:
        rows, label_names, id_prefix = self._rows()
        return self._records(rows, label_names, id_prefix)

    def iter_range(self, start: int, end: int) -> Iterator[Record]:
        """The records of the JSONL lines that start in bytes ``[start, end)`` of a plain
        file (``start`` at a line start), read exactly as a whole pass reads them: line
        numbers, ids and columns as in the whole file (the columns come from its first JSON
        object). ``report`` counts this range only."""
        if self.format != "jsonl":
            raise ConfigError(f"reading a byte range needs a jsonl file, not {self.format}")
        mapper = None
        if start > 0:
            first = next(
                (row for _, row in _jsonl_rows(self.path) if isinstance(row, Mapping)), None
            )
            if first is not None:
                mapper = self._mapper(
                    list(first), _default_task_for(first, "nli"), self.path.name, None
                )
        return self._records(_jsonl_rows(self.path, start, end), None, self.path.name, mapper)

    def _records(
        self,
        rows: Iterator[tuple[int, Any]],
        label_names: list[str] | None,
        id_prefix: str,
        mapper: _RowMapper | None = None,
    ) -> Iterator[Record]:
        default_task = "nli-binary" if self.format == "hans" else "nli"
        report = ReadReport(self.spec, self.format, self.task.name if self.task else "?")
        self.report = report
        if mapper is not None:
            report.task = mapper.task.name
        header_given = self.format in (
            "csv",
            "tsv",
            "hans",
            "parquet",
            "triplets",
            "hf",
            "hf-disk",
            "arrow",
        )
        skip = self.on_error == "skip"
        for line, row in rows:
            if line == 0 and header_given:
                mapper = self._mapper(row, default_task, id_prefix, label_names)
                report.task = mapper.task.name
                continue
            try:
                if isinstance(row, DataError):
                    raise row
                if mapper is None:
                    if not isinstance(row, Mapping):
                        raise DataError(
                            f"expected a JSON object, got {type(row).__name__}",
                            path=str(self.path),
                            line=line,
                        )
                    mapper = self._mapper(
                        list(row), _default_task_for(row, default_task), id_prefix, label_names
                    )
                    report.task = mapper.task.name
                record = mapper(row, line)
            except DataError as err:
                if not skip:
                    raise
                report.errors.append(err)
                continue
            if record is None:
                report.n_unlabelled += 1
                report.unlabelled_lines.append(line)
                continue
            report.n_records += 1
            yield record

    def _mapper(
        self, keys: list[str], default_task: str, id_prefix: str, label_names: list[str] | None
    ) -> _RowMapper:
        return _RowMapper(
            path=self.spec,
            keys=keys,
            task=self.task,
            columns=self.columns,
            label_map=self.label_map,
            default_task=default_task,
            id_prefix=id_prefix,
            label_names=label_names,
        )


def open_dataset(path: str | Path, **options: Any) -> Dataset:
    """Open any supported input for streaming; see :class:`Dataset` for the options."""
    return Dataset(path, **options)


def iter_records(path: str | Path, **options: Any) -> Iterator[Record]:
    """Stream the records of one input."""
    return iter(Dataset(path, **options))


def read_records(path: str | Path, **options: Any) -> list[Record]:
    """All records of one input, in file order."""
    return list(Dataset(path, **options))


#: objects a :func:`gc_paused` block must leave behind to be frozen at its end
GC_FREEZE_AFTER = 200_000


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while creating many records.

    With millions of live objects, each automatic collection walks them all; a loop creating
    a million records would spend most of its time there. When the block leaves more than
    :data:`GC_FREEZE_AFTER` new objects, re-enabling would walk them all at once (seconds
    for a million records), so they are frozen first (``gc.freeze``: reference counting still
    frees them; only reference cycles among them are never collected, and records hold none).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_count()[0] > GC_FREEZE_AFTER:
                gc.freeze()
            gc.enable()


#: glibc's ``mallopt`` parameter for the size from which blocks get their own memory map.
_M_MMAP_THRESHOLD = -3


def mmap_large_allocations(threshold: int = 1 << 20) -> None:
    """Give every allocation of ``threshold`` bytes or more (arrays) its own memory map, which
    goes back to the system as soon as it is freed.

    glibc raises that threshold each time a mapped block is freed (up to 32 MB), so after a
    while arrays of tens of MB come from the heap, and the memory they leave stays with the
    process: holding millions of rows' features, that was gigabytes (docs/scaling.md). The
    setting is process-wide and kept by forked children; elsewhere than glibc it does nothing.
    """
    import ctypes

    try:
        ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, int(threshold))
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


def read_document(path: str | Path, *, missing: str) -> Any:
    """A JSON or YAML file (by its suffix), parsed; else one :class:`ConfigError` line:
    ``missing`` when there is no such file, the parser's complaint when it is not valid."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(missing)
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: not valid YAML: {err}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON ({err.msg})") from None


def parse_mapping(text: str | None, what: str) -> dict[str, str]:
    """Parse ``a=b,c=d`` (a CLI option) into a dict, failing clearly."""
    if not text:
        return {}
    out: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ConfigError(f"bad {what} {part!r}: expected KEY=VALUE[,KEY=VALUE...]")
        out[key.strip()] = value.strip()
    return out
