"""Raw rows of each file format: JSONL, JSON, CSV / TSV / HANS, parquet, triplet folders.

Each source yields ``(line_number, row)``: ``row`` a dict, or a :class:`DataError` for a bad
row (kept in line, so ``--on-error skip`` can count it). A source whose format has a header
yields it first as line 0, the list of column names; data rows are numbered from 1, as
lines of the file. :func:`format_rows` picks the source of a format (the HF ones are in
:mod:`zdebias.data.hf`). Mapping rows to records is :mod:`zdebias.data.mapping`'s job.
"""

from __future__ import annotations

import csv
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

from zdebias.data.files import (
    BadLine,
    check_keys,
    decoded_lines,
    json_value,
    key_count,
    located_rows,
    open_binary,
)
from zdebias.errors import DataError

Rows = Iterator[tuple[int, Any]]


def format_rows(
    fmt: str, spec: str, path: Path, split: str | None
) -> tuple[Rows, list[str] | None, str]:
    """The rows of input ``spec`` (``path`` and ``split`` parsed from it) in format ``fmt``,
    the label names the input declares (a ``ClassLabel``), and the prefix of default ids."""
    if fmt in ("hf", "hf-disk", "arrow"):
        from zdebias.data.hf import arrow_rows, hub_rows, saved_rows

        if fmt == "hf":
            rows, names = hub_rows(spec)
            return rows, names, spec
        if fmt == "hf-disk":
            rows, names = saved_rows(path, split)
            return rows, names, path.name if split is None else f"{path.name}/{split}"
        rows, names = arrow_rows(path)
        return rows, names, path.name
    if fmt == "triplets":
        s1, _, _, name = triplet_files(path, split)
        return triplet_rows(path, split), None, f"{s1.parent.name}/{name}"
    sources: dict[str, Callable[[Path], Rows]] = {
        "jsonl": jsonl_rows,
        "json": json_rows,
        "csv": lambda q: delimited_rows(q, ","),
        "tsv": lambda q: delimited_rows(q, "\t"),
        "hans": lambda q: delimited_rows(q, "\t"),
        "parquet": parquet_rows,
    }
    return sources[fmt](path), None, path.name


# --------------------------------------------------------------------------- JSONL and JSON

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
        return json_value(text, path, lineno)
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


def jsonl_rows(path: Path, start: int = 0, end: int | None = None) -> Rows:
    """Rows of a JSONL file. A line that orjson reads as an object without floats is taken
    as it is (the same value ``json`` gives); any other goes through :func:`_jsonl_line`
    (UTF-8, BOM, blank lines, located errors), so both routes read every file alike. On
    both, an object key given twice is a located error (:func:`~zdebias.data.files.
    check_keys`: a count of ``":`` per line, the exact check only where it disagrees).

    ``start`` / ``end``: only the lines that start in that byte range of a plain file
    (``start`` at a line start), numbered as in the whole file.
    """
    loads = _fast_loads()
    exact_types = _EXACT_TYPES
    lineno = lines_before(path, start) if start else 0
    pos = start
    with open_binary(path) as fh:
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
                        if type(value) is dict:
                            if exact_types.issuperset(map(type, value.values())):
                                n_keys = len(value)
                            else:
                                n_keys = key_count(value) if _exact(value) else -1
                            if n_keys >= 0:
                                if raw.count(b'":') + raw.count(b'" :') != n_keys:
                                    try:  # perhaps a key given twice: the exact check
                                        check_keys(raw, value, path, lineno)
                                    except DataError as err:
                                        yield lineno, err
                                        continue
                                yield lineno, value
                                continue
                row = _jsonl_line(raw, lineno, path)
                if row is not None:
                    yield lineno, row
        except (OSError, EOFError, zlib.error) as err:
            raise DataError(f"corrupt gzip data: {err}", path=str(path), line=lineno + 1) from None


def json_rows(path: Path) -> Rows:
    """Rows of one JSON document: a list of objects, or ``{"data": [...]}``, each numbered by
    the line it starts on (a record without an id is named by its place in the list); an
    object key given twice is an error at its line, as in JSONL
    (:func:`~zdebias.data.files.located_rows`)."""
    with open_binary(path) as fh:
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
    yield from located_rows(text, path)


# --------------------------------------------------------------------------- tables


#: The longest CSV / TSV field read (the csv module's default is 131,072 characters): the
#: largest value its limit takes on every platform (a C long); a line is in memory anyway.
FIELD_SIZE_LIMIT = 2**31 - 1


def allow_long_fields() -> None:
    """Raise the csv module's field size limit (process-wide) to :data:`FIELD_SIZE_LIMIT`;
    never lowers a higher limit set by someone else."""
    if csv.field_size_limit() < FIELD_SIZE_LIMIT:
        csv.field_size_limit(FIELD_SIZE_LIMIT)


def delimited_rows(path: Path, delimiter: str) -> Rows:
    """Rows of a CSV / TSV file (HANS too): the header as line 0, then one dict a line. A
    field may be of any length; a NUL character in one is a located error."""
    allow_long_fields()
    with open_binary(path) as fh:
        lines = decoded_lines(fh, str(path))
        bad: list[tuple[int, str]] = []
        nul = [False]  # a line read since the last row holds a NUL

        def text_lines() -> Iterator[str]:
            for lineno, text in lines:
                if isinstance(text, BadLine):
                    bad.append((lineno, str(text)))
                    yield "\x00BAD\x00\n"
                else:
                    if "\x00" in text:
                        nul[0] = True
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
            if nul[0]:
                nul[0] = False
                at = next((i for i, cell in enumerate(cells) if "\x00" in cell), None)
                if at is not None:
                    yield line, _nul_error(header, at, path, line)
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


def _nul_error(header: list[str], at: int, path: Path, line: int) -> DataError:
    """The error for a NUL character in field ``at`` of a row (a column past the header's
    named by its number)."""
    name = header[at] if at < len(header) else f"column {at + 1}"
    return DataError(
        "NUL character (\\x00) in the field (a corrupt or binary file?)",
        path=str(path),
        line=line,
        field=name,
    )


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


def parquet_rows(path: Path) -> Rows:
    """Rows of a parquet file, batch by batch: the column names as line 0, then each row."""
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


# --------------------------------------------------------------------------- triplets


def triplet_files(path: Path, split: str | None) -> tuple[Path, Path, Path, str]:
    """The ``s1``, ``s2`` and ``labels`` files of a robust-nli split, and the split's name
    (a folder's only split when ``split`` is None)."""
    if path.is_file():
        name = path.name
        split = name.partition(".")[2]
        path = path.parent
    if not path.is_dir():
        hint = ""
        if split is not None:  # "a::b.jsonl": read as folder a, split b.jsonl
            whole = f"{path}::{split}"
            hint = (
                f" (read {whole!r} as folder {str(path)!r} and split {split!r}; a file "
                f"whose name holds '::' is read when it exists, or quoted: '\"{whole}\"')"
            )
        raise DataError(f"no such folder{hint}", path=str(path))
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


def triplet_rows(path: Path, split: str | None) -> Rows:
    """Rows of a triplet split, the three files read line by line together."""
    s1, s2, labels, split = triplet_files(path, split)
    yield 0, ["premise", "hypothesis", "label"]
    with open_binary(s1) as f1, open_binary(s2) as f2, open_binary(labels) as f3:
        it1, it2, it3 = (decoded_lines(f, str(p)) for f, p in ((f1, s1), (f2, s2), (f3, labels)))
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
            # none ended (checked above): three lines, numbered alike
            line, first = cast("tuple[int, str]", a)
            second, label = cast("str", b[1]), cast("str", c[1])
            bad = next(
                (
                    (p, x)
                    for p, x in zip((s1, s2, labels), (a, b, c), strict=True)
                    if isinstance(x[1], BadLine)
                ),
                None,
            )
            if bad is not None:
                yield line, DataError(str(bad[1][1]), path=str(bad[0]), line=line)
                continue
            yield (
                line,
                {
                    "premise": first.rstrip("\r\n"),
                    "hypothesis": second.rstrip("\r\n"),
                    "label": label.strip(),
                },
            )


__all__ = [
    "FIELD_SIZE_LIMIT",
    "Rows",
    "allow_long_fields",
    "delimited_rows",
    "format_rows",
    "json_rows",
    "jsonl_rows",
    "lines_before",
    "parquet_rows",
    "triplet_files",
    "triplet_rows",
]
