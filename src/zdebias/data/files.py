"""Input files: which format a path holds, and its bytes opened and decoded.

Gzip is recognised by its magic bytes whatever the name; lines are decoded as UTF-8 (a BOM
dropped) and JSON values parsed with every failure one located :class:`DataError`
(``FILE:LINE: what is wrong``). The row sources of :mod:`zdebias.data.sources` read through
these.
"""

from __future__ import annotations

import gzip
import itertools
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from zdebias.errors import DataError

FORMATS = ("jsonl", "json", "csv", "tsv", "parquet", "triplets", "hans", "hf", "hf-disk", "arrow")


def open_binary(path: Path) -> BinaryIO:
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
    with open_binary(path) as fh:
        try:
            return fh.read(n)
        except (OSError, EOFError, zlib.error) as err:
            raise DataError(f"corrupt gzip data: {err}", path=str(path)) from None


class BadLine(str):
    """A line that could not be decoded; its value is the error message."""


def decoded_lines(fh: BinaryIO, path: str) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` of a binary stream, failing clearly on bad gzip; a line
    that is not UTF-8 comes as a :class:`BadLine` holding the message."""
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
                    BadLine(f"not valid UTF-8: byte 0x{bad:02x} at column {err.start + 1}"),
                )
                continue
            if lineno == 1 and text.startswith("\ufeff"):
                text = text[1:]
            yield lineno, text
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"corrupt gzip data: {err}", path=path, line=lineno + 1) from None


def split_path_and_split(path: str | Path) -> tuple[Path, str | None]:
    """Parse ``DIR::SPLIT`` (triplet folder and split); plain paths have no split. A path
    that exists as written is taken whole (a file named ``a::b.jsonl``), and so is one in
    double quotes: ``"a::b.jsonl"``, ``"my::dir"::dev``."""
    text = str(path)
    if text.startswith('"') and text.find('"', 1) > 0:
        end = text.find('"', 1)
        rest = text[end + 1 :]
        if not rest:
            return Path(text[1:end]), None
        if rest.startswith("::"):
            return Path(text[1:end]), rest[2:]
    if "::" in text and not Path(text).exists():
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
    with open_binary(path) as fh:
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


def key_count(value: Any) -> int:
    """How many object keys a parsed JSON value holds, nested objects included."""
    nested = (dict, list)
    if isinstance(value, dict):
        n = len(value)
        for item in value.values():
            if isinstance(item, nested):  # a call for each string or number costs more
                n += key_count(item)
        return n
    if isinstance(value, list):
        return sum([key_count(item) for item in value if isinstance(item, nested)])
    return 0


def key_marks(text: str | bytes) -> int:
    """How often ``":`` or ``" :`` occurs in a JSON text: once per object key written the
    usual way, so a count above the parsed value's :func:`key_count` suggests a repeated key
    (or those characters inside a string, or keys spaced unusually: :func:`repeated_key`
    then decides)."""
    if isinstance(text, bytes):
        return text.count(b'":') + text.count(b'" :')
    return text.count('":') + text.count('" :')


def repeated_key(text: str | bytes) -> tuple[str, int] | None:
    """The first object key that ``text`` (valid JSON) gives more than once, with how many
    times, else None. ``json`` and orjson both keep the last value silently."""
    found: list[tuple[str, int]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(items)
        if len(out) < len(items) and not found:
            keys = [k for k, _ in items]
            key = next(k for k in keys if keys.count(k) > 1)
            found.append((key, keys.count(key)))
        return out

    json.loads(text, object_pairs_hook=pairs)
    return found[0] if found else None


def duplicate_key_error(key: str, times: int, path: Path, line: int) -> DataError:
    """The located error for an object key given ``times`` times (JSONL and JSON alike)."""
    message = f"duplicate key: the object gives it {times} times (only one value can be read)"
    return DataError(message, path=str(path), line=line, field=key)


class _Pairs(list):
    """A JSON object read as its ``(key, value)`` pairs, every key kept."""


def _repeated_pair(value: Any) -> tuple[str, int] | None:
    """The first key a value read with :class:`_Pairs` gives twice (depth-first), with how
    many times, else None."""
    if type(value) is _Pairs:
        keys = [k for k, _ in value]
        if len(set(keys)) < len(keys):
            key = next(k for k in keys if keys.count(k) > 1)
            return key, keys.count(key)
        value = [v for _, v in value]
    if type(value) is list:
        for item in value:
            found = _repeated_pair(item)
            if found is not None:
                return found
    return None


def _plain(value: Any) -> Any:
    """A value read with :class:`_Pairs` as ``json`` reads it (dicts)."""
    if type(value) is _Pairs:
        return {k: _plain(v) for k, v in value}
    if type(value) is list:
        return [_plain(v) for v in value]
    return value


def document_rows(text: str, value: Any, path: Path) -> list[Any]:
    """The rows of a JSON document ``text`` (parsed as ``value``): a list, or the list under
    ``data``; a row giving an object key twice comes as its located :class:`DataError`
    (numbered as the rows are, from 1), as a JSONL line does; the wrapper giving one twice
    is raised. A cheap count first (:func:`key_marks`), the exact check only when it
    disagrees with the value."""
    if key_marks(text) != key_count(value):
        doc = json.loads(text, object_pairs_hook=_Pairs)
        if type(doc) is _Pairs:
            keys = [k for k, _ in doc]
            key = next((k for k in keys if keys.count(k) > 1), None)
            if key is not None:
                raise duplicate_key_error(key, keys.count(key), path, 1)
            doc = dict(doc)
            if type(doc.get("data")) is list:
                doc = doc["data"]
        if type(doc) is list:
            rows = []
            for i, row in enumerate(doc, 1):
                found = _repeated_pair(row)
                rows.append(_plain(row) if found is None else duplicate_key_error(*found, path, i))
            return rows
    if isinstance(value, dict) and isinstance(value.get("data"), list):
        value = value["data"]
    if not isinstance(value, list):
        raise DataError(
            f"expected a JSON list of objects, got {type(value).__name__}", path=str(path), line=1
        )
    return value


class RecordLine(int):
    """The line a JSON list's record starts on (its value: what errors name), that also
    knows the record's place in the list (``record``, from 1: what names a record without an
    id, ``FILE:N``, since several records may share a line)."""

    record: int


def record_line(line: int, record: int) -> RecordLine:
    """A :class:`RecordLine`: ``line``, knowing ``record``."""
    value = RecordLine(line)
    value.record = record
    return value


_WS = re.compile(r"[ \t\n\r]*")
#: a JSON string or a bracket, for finding where a repeated key is (valid JSON only)
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]', re.S)


class _NotPlain(Exception):
    """The document is not a plain list (or ``{"data": [...]}``) of valid JSON: read it whole."""


def _list_items(
    text: str, pos: int, scan: Any, spans: list[tuple[int, int]]
) -> tuple[list[Any], int]:
    """The items of the JSON list that starts at ``text[pos]`` (``[``) and the offset after
    the list; where each item starts and ends is appended to ``spans``."""
    items: list[Any] = []
    space, blank = _WS.match, " \t\n\r"
    pos = space(text, pos + 1).end()  # type: ignore[union-attr]
    if text.startswith("]", pos):
        return items, pos + 1
    add, span = items.append, spans.append
    try:
        while True:
            value, end = scan(text, pos)
            add(value)
            span((pos, end))
            mark = text[end]
            if mark in blank:
                end = space(text, end).end()  # type: ignore[union-attr]
                mark = text[end]
            if mark == ",":
                pos = end + 1
                if text[pos] in blank:
                    pos = space(text, pos).end()  # type: ignore[union-attr]
            elif mark == "]":
                return items, end + 1
            else:
                raise _NotPlain
    except (StopIteration, IndexError):  # no value where one must be; the text ends early
        raise _NotPlain from None


def _plain_document(
    text: str,
) -> tuple[Any, list[Any], list[tuple[int, int]], list[tuple[str, int]]]:
    """A JSON list, or an object holding one under ``data``, read item by item: the value,
    the list's items, where each starts and ends, and the object's keys with their offsets.
    Raises :class:`_NotPlain` for anything else (then :func:`json_value` says what is wrong).
    """
    decoder = json.JSONDecoder()
    scan = decoder.scan_once  # type: ignore[attr-defined]  # set by __init__; typeshed lacks it
    pos = _WS.match(text).end()  # type: ignore[union-attr]
    keys: list[tuple[str, int]] = []
    spans: list[tuple[int, int]] = []
    try:
        if text.startswith("[", pos):
            items, end = _list_items(text, pos, scan, spans)
            value: Any = items
        elif text.startswith("{", pos):
            value, items = {}, []
            pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
            end = pos + 1 if text.startswith("}", pos) else -1
            while end < 0:
                if not text.startswith('"', pos):
                    raise _NotPlain
                key, after = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]  # typeshed lacks it
                keys.append((key, pos))
                after = _WS.match(text, after).end()  # type: ignore[union-attr]
                if not text.startswith(":", after):
                    raise _NotPlain
                after = _WS.match(text, after + 1).end()  # type: ignore[union-attr]
                if key == "data" and text.startswith("[", after):
                    spans.clear()  # a "data" given twice: the error names it
                    items, after = _list_items(text, after, scan, spans)
                    value[key] = items
                else:
                    try:
                        value[key], after = scan(text, after)
                    except StopIteration:
                        raise _NotPlain from None
                    if key == "data":
                        items = []
                        spans.clear()
                pos = _WS.match(text, after).end()  # type: ignore[union-attr]
                if text.startswith(",", pos):
                    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
                elif text.startswith("}", pos):
                    end = pos + 1
                else:
                    raise _NotPlain
        else:
            raise _NotPlain
    except (ValueError, RecursionError):  # invalid JSON (JSONDecodeError), a number too long
        raise _NotPlain from None
    if _WS.match(text, end).end() != len(text):  # type: ignore[union-attr]
        raise _NotPlain
    return value, items, spans, keys


def _repeat_offset(text: str, key: str) -> int:
    """Where in the JSON object ``text`` the key ``key`` is given again inside one object
    (the first time it is), else 0."""
    stack: list[set[str] | None] = []
    for token in _TOKEN.finditer(text):
        mark = token.group()
        if mark in ("{", "["):
            stack.append(set() if mark == "{" else None)
        elif mark in ("}", "]"):
            if stack:
                stack.pop()
        elif stack and stack[-1] is not None:
            after = _WS.match(text, token.end()).end()  # type: ignore[union-attr]
            if text.startswith(":", after):
                name = json.loads(mark)
                if name == key and name in stack[-1]:
                    return token.start()
                stack[-1].add(name)
    return 0


def located_rows(text: str, path: Path) -> list[tuple[RecordLine, Any]]:
    """The rows of a JSON document ``text`` (a list of objects, or the list under ``data``),
    each with the line it starts on (:class:`RecordLine`); a row giving an object key twice
    comes as its :class:`DataError` at the line of the key given again, as a JSONL line's
    does. Anything wrong with the document as a whole is raised, located: invalid JSON, a
    wrapper object giving a key twice, a lone surrogate, not a list. Read item by item with
    ``json``'s scanner, so a pretty-printed list costs no second parse; a document on one
    line (``json.dump``'s way) is read whole, every record on line 1."""
    if "\n" not in text.rstrip():
        whole = document_rows(text, json_value(text, path, 1, document=True), path)
        return [
            (
                record_line(1, i),
                DataError(row.message, path=row.path, line=1, field=row.field)
                if isinstance(row, DataError)
                else row,
            )
            for i, row in enumerate(whole, 1)
        ]
    try:
        value, items, spans, keys = _plain_document(text)
    except _NotPlain:
        value = json_value(text, path, 1, document=True)  # raises what is wrong, located
        whole = document_rows(text, value, path)
        return [(record_line(1, i), row) for i, row in enumerate(whole, 1)]
    starts = [start for start, _ in spans]
    steps = map(text.count, itertools.repeat("\n"), [0, *starts[:-1]], starts)
    lines = list(map(RecordLine, itertools.accumulate(steps, initial=1)))[1:]
    for i, at in enumerate(lines, 1):
        at.record = i
    names = [k for k, _ in keys]
    for n, (key, offset) in enumerate(keys):
        if key in names[:n]:  # the wrapper gives it again here
            raise duplicate_key_error(key, names.count(key), path, text.count("\n", 0, offset) + 1)
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
        for where, row in zip(lines, items, strict=True):
            if (lone := _surrogate(row)) is not None:
                raise DataError(
                    f"lone surrogate {lone[1]} in text (not valid Unicode)",
                    path=str(path),
                    line=where,
                    field=lone[0] or None,
                )
        json_value(text, path, 1, document=True)  # one in the wrapper: raised at line 1
    if isinstance(value, dict) and not isinstance(value.get("data"), list):
        document_rows(text, value, path)  # raises: not a list of objects
    rows: list[tuple[RecordLine, Any]] = list(zip(lines, items, strict=True))
    if key_marks(text) != key_count(value):  # perhaps a key given twice: the exact check
        for i, (start, end) in enumerate(spans):
            piece = text[start:end]
            if key_marks(piece) == key_count(items[i]):
                continue
            found = _repeated_pair(json.loads(piece, object_pairs_hook=_Pairs))
            if found is not None:
                line = lines[i] + piece.count("\n", 0, _repeat_offset(piece, found[0]))
                rows[i] = (lines[i], duplicate_key_error(*found, path, line))
    return rows


def check_keys(text: str | bytes, value: Any, path: Path, line: int) -> None:
    """Raise a located :class:`DataError` when the JSON ``text`` (parsed as ``value``) gives
    an object key twice; a cheap count first (:func:`key_marks`), the exact check only when
    it disagrees with the value."""
    if key_marks(text) == key_count(value):
        return
    found = repeated_key(text)
    if found is None:
        return
    raise duplicate_key_error(*found, path, line)


def json_value(text: str, path: Path, line: int, *, document: bool = False) -> Any:
    """``json.loads(text)``, every failure one located :class:`DataError`: invalid JSON, a
    number over Python's digit limit, nesting too deep, a lone surrogate in a string, an
    object key given twice (one line of JSONL).
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
    if not document:
        check_keys(text, value, path, line)
    return value


__all__ = [
    "FORMATS",
    "BadLine",
    "check_keys",
    "decoded_lines",
    "detect_format",
    "document_rows",
    "duplicate_key_error",
    "json_value",
    "key_count",
    "located_rows",
    "open_binary",
    "record_line",
    "split_path_and_split",
]
