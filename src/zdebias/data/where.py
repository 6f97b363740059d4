"""Row selection by column values (``--where split=TRAIN``): which raw rows a read keeps.

A condition is ``COLUMN=VALUE``; ``VALUE`` may list alternatives as ``V1|V2``, and several
conditions must all hold. A row's value is compared as a string, exactly as the file holds
it (a number as its digits, ``true``/``false`` for a JSON boolean, a missing or null value
as the empty string), before any column or label mapping, so rows left out are never
mapped or checked (a TEST split with labels of its own does not fail the read). A column
the input lacks is an error naming the columns it has; the rows left out are counted in
the read's report (``n_skipped_by_where``).
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


class Selection:
    """Keeps the rows whose columns hold one of the wanted values; counts the rest.

    ``option``: how errors name the option (``--where``, or ``where`` for Python)."""

    def __init__(
        self, where: Mapping[str, str], keys: Iterable[str], path: str, option: str = "--where"
    ) -> None:
        self.where = dict(where)
        self.wanted = {col: {x.strip() for x in v.split("|")} for col, v in self.where.items()}
        keys = list(keys)
        missing = [col for col in self.wanted if col not in keys]
        if missing:
            raise ConfigError(
                f"{path}: {option} {where_text(self.where)}: no column {missing[0]!r}; "
                f"the columns are {', '.join(keys)}"
            )
        #: per column, the values seen in rows (the first few distinct ones), with counts
        self.seen: dict[str, Counter[str]] = {col: Counter() for col in self.wanted}

    def rows(
        self, rows: Iterable[tuple[int, Any]], report: ReadReport
    ) -> Iterator[tuple[int, Any]]:
        """The ``(line, row)`` pairs selected, the rows left out counted in ``report`` as
        they go (a bad row, not a dict, passes on as it is); when none was selected,
        ``report.where_none`` says what the rows hold."""
        wanted, seen = self.wanted, self.seen
        report.where = dict(self.where)
        selected = False
        for line, row in rows:
            if isinstance(row, Mapping):
                keep = True
                for col, values in wanted.items():
                    text = raw_text(row.get(col)).strip()
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
        if not selected:
            report.where_none = self.none_matched()

    def none_matched(self) -> str:
        """Why no row was selected, for the error of an input left without records."""
        parts = []
        for col, counts in self.seen.items():
            held = ", ".join(f"{v!r} ({n})" for v, n in counts.most_common(5)) or "nothing"
            parts.append(f"{col!r} holds {held}")
        return f"no row matches {where_text(self.where)}: {'; '.join(parts)}"


__all__ = ["Selection", "raw_text", "where_text"]
