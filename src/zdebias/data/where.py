"""Row selection by column values (``--where split=TRAIN``): which raw rows a read keeps.

A condition is ``COLUMN=VALUE``; ``VALUE`` may list alternatives as ``V1|V2``, and several
conditions must all hold. A row's value is compared as a string, exactly as the file holds
it (nothing stripped; a number as its digits, ``true``/``false`` for a JSON boolean, a
missing or null value as the empty string), before any column or label mapping, so rows
left out are never mapped or checked (a TEST split with labels of its own does not fail the
read). A column no row carries is an error naming the columns the rows have (a file with a
header: at once; JSON rows, each with its own keys: once every row was seen); the rows left
out are counted in the read's report (``n_skipped_by_where``).

**Quoting** (the one convention of ``--where``, ``--columns``, ``--label-map`` and the
``PATH::KEY=VALUE`` suffix): text between double quotes is taken as it is, separators
(``,`` ``|`` ``=`` ``;`` ``::``) and spaces included; ``""`` inside quotes is one ``"``.
Unquoted text is stripped of the spaces around it. ``--where 'text="a|b, c"'`` selects
the rows whose ``text`` is ``a|b, c``; ``--where 'ws=" pad "'`` the rows holding `` pad ``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from zdebias.data.mapping import ReadReport
from zdebias.errors import ConfigError

#: how many distinct values of a column the selection remembers, to say what the rows hold
_SEEN = 10


def where_text(where: Mapping[str, str]) -> str:
    """The selection as the user writes it: ``split=TRAIN,lang=en|de``."""
    return ",".join(f"{k}={v}" for k, v in where.items())


def raw_text(value: Any) -> str:
    """A raw row value as a string: text as it is, a boolean as JSON writes it, a missing
    or null value as ``""``."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool | list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _scan(text: str) -> list[tuple[str, bool]]:
    """Each character of ``text`` with whether it is inside double quotes (the quotes
    themselves dropped, ``""`` inside quotes read as one ``"``)."""
    out: list[tuple[str, bool]] = []
    quoted, i = False, 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            if quoted and text[i + 1 : i + 2] == '"':
                out.append(('"', True))
                i += 2
                continue
            quoted = not quoted
        else:
            out.append((ch, quoted))
        i += 1
    if quoted:
        raise ConfigError(f'unclosed double quote in {text!r}; a quote inside quotes is ""')
    return out


def split_unquoted(text: str, sep: str, maxsplit: int = -1) -> list[str]:
    """``text`` split at each ``sep`` outside double quotes; the parts keep their quotes
    (:func:`unquote` reads them)."""
    parts: list[str] = []
    quoted, start, i = False, 0, 0
    while i < len(text):
        if text[i] == '"':
            quoted = not quoted  # "" inside quotes toggles twice: still quoted
        elif not quoted and text.startswith(sep, i) and maxsplit != len(parts):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    if quoted:
        raise ConfigError(f'unclosed double quote in {text!r}; a quote inside quotes is ""')
    parts.append(text[start:])
    return parts


def unquote(text: str) -> str:
    """The value ``text`` stands for: quoted parts as they are, unquoted spaces at both ends
    stripped (``' "a|b" '`` → ``a|b``, ``'" pad "'`` → `` pad ``)."""
    chars = _scan(text)
    while chars and not chars[0][1] and chars[0][0].isspace():
        chars.pop(0)
    while chars and not chars[-1][1] and chars[-1][0].isspace():
        chars.pop()
    return "".join(ch for ch, _ in chars)


def is_quoted(text: str) -> bool:
    """Whether ``text`` holds a double quote (so an empty value was written on purpose)."""
    return '"' in text


def alternatives(value: str) -> set[str]:
    """The values a condition's ``V1|V2`` accepts, each unquoted (:func:`unquote`)."""
    return {unquote(part) for part in split_unquoted(value, "|")}


class Selection:
    """Keeps the rows whose columns hold one of the wanted values; counts the rest.

    ``keys``: the columns the input names first (its header, or its first row); ``fixed``:
    every row has exactly those (a header), so a column missing from them is an error at
    once; otherwise a column is missing only when no row carries it, said once every row
    was seen (``partial``: the rows are a part of the input, whose columns were checked
    beforehand with :func:`where_columns`). ``option``: how errors name the option
    (``--where``, or ``where`` for Python)."""

    def __init__(
        self,
        where: Mapping[str, str],
        keys: Iterable[str],
        path: str,
        option: str = "--where",
        *,
        fixed: bool = False,
        partial: bool = False,
    ) -> None:
        self.where = dict(where)
        self.wanted = {col: alternatives(v) for col, v in self.where.items()}
        self.path, self.option = path, option
        #: the columns the rows carry, in the order first seen
        self.keys: dict[str, None] = dict.fromkeys(keys)
        #: the wanted columns no row has carried yet (a header: checked at once)
        self.pending = [] if partial else [col for col in self.wanted if col not in self.keys]
        if fixed:
            self.check_columns()
        #: per column, the values seen in rows (the first few distinct ones), with counts
        self.seen: dict[str, Counter[str]] = {col: Counter() for col in self.wanted}

    def check_columns(self) -> None:
        """Fail when a wanted column is one no row carried, naming the columns they did."""
        if self.pending:
            raise ConfigError(
                f"{self.path}: {self.option} {where_text(self.where)}: no column "
                f"{self.pending[0]!r}; the columns are {', '.join(map(str, self.keys))}"
            )

    def rows(
        self, rows: Iterable[tuple[int, Any]], report: ReadReport
    ) -> Iterator[tuple[int, Any]]:
        """The ``(line, row)`` pairs selected, the rows left out counted in ``report`` as
        they go (a bad row, not a dict, passes on as it is); when none was selected,
        ``report.where_none`` says what the rows hold. A wanted column that no row carried
        is an error once the rows are done."""
        wanted, seen, keys, pending = self.wanted, self.seen, self.keys, self.pending
        report.where = dict(self.where)
        selected = False
        for line, row in rows:
            if isinstance(row, Mapping):
                if pending:  # a wanted column not seen yet: the columns of each row count
                    keys.update(dict.fromkeys(row))
                    pending[:] = [col for col in pending if col not in row]
                keep = True
                for col, values in wanted.items():
                    text = raw_text(row.get(col))
                    counts = seen[col]
                    if text in counts or len(counts) < _SEEN:
                        counts[text] += 1
                    if text not in values:
                        keep = False
                if not keep:
                    report.n_skipped_by_where += 1
                    continue
            selected = True
            yield line, row
        self.check_columns()
        if not selected:
            report.where_none = self.none_matched()

    def none_matched(self) -> str:
        """Why no row was selected, for the error of an input left without records."""
        parts = []
        for col, counts in self.seen.items():
            held = ", ".join(f"{v!r} ({n})" for v, n in counts.most_common(5)) or "nothing"
            parts.append(f"{col!r} holds {held}")
        return f"no row matches {where_text(self.where)}: {'; '.join(parts)}"


def where_columns(
    where: Mapping[str, str],
    keys: Iterable[str],
    rows: Iterable[tuple[int, Any]],
    path: str,
    option: str = "--where",
) -> None:
    """Fail as a whole read would when no row of ``rows`` (an input's, from the start)
    carries a column ``where`` names; ``keys``: its first row's columns. Reads rows only
    while a column is still to be found (none when the first row has them all)."""
    selection = Selection(where, keys, path, option)
    if not selection.pending:
        return
    for _, row in rows:
        if isinstance(row, Mapping):
            selection.keys.update(dict.fromkeys(row))
            selection.pending[:] = [col for col in selection.pending if col not in row]
            if not selection.pending:
                return
    selection.check_columns()


__all__ = [
    "Selection",
    "alternatives",
    "is_quoted",
    "raw_text",
    "split_unquoted",
    "unquote",
    "where_columns",
    "where_text",
]
