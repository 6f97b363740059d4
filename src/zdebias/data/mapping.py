"""Raw rows → Records: columns found or mapped, labels mapped and checked, and what a read
skipped counted in its :class:`ReadReport`.

Files (:mod:`zdebias.data.readers`) and data in memory (:mod:`zdebias.data.memory`) go
through the same :class:`RowMapper`, so both read the same records from the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from zdebias.data.labels import Task, get_task
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError

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


class RowMapper:
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

    def records(
        self,
        rows: Iterable[tuple[int, Any]],
        report: ReadReport,
        *,
        skip: bool,
        lines: list[int] | None = None,
    ) -> Iterator[Record]:
        """The Records of ``(line, row)`` pairs, counted in ``report``: unlabelled rows are
        skipped, bad rows raise their :class:`DataError` (``skip``: counted and skipped).
        ``lines``: the line of each record given is appended to it."""
        for line, row in rows:
            try:
                record = self(row, line)
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
            if lines is not None:
                lines.append(line)
            yield record

    def __call__(self, row: Mapping[str, Any] | DataError, line: int) -> Record | None:
        """A Record, or None for an unlabelled row. Raises DataError on bad rows (and raises
        ``row`` itself when a source gave a DataError for it)."""
        if type(row) is not dict and not isinstance(row, Mapping):
            if isinstance(row, DataError):
                raise row
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


__all__ = ["COLUMN_CANDIDATES", "ReadReport", "RowMapper"]
