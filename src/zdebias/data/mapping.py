"""Raw rows → Records: columns found or mapped, labels mapped and checked, and what a read
skipped counted in its :class:`ReadReport`.

Files (:mod:`zdebias.data.readers`) and data in memory (:mod:`zdebias.data.memory`) go
through the same :class:`RowMapper`, so both read the same records from the same rows.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from zdebias.data.labels import (
    TASKS,
    UNLABELLED,
    Task,
    check_raw_labels,
    convention_for,
    get_task,
    implied_task,
    map_text,
    raw_key,
    unmapped_hint,
)
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
#: How many of the ids made from lines a :class:`ReadReport` keeps to show.
SHOWN_IDS = 10


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
    #: raw label → label name, as read (None: the raw labels were the task's names)
    label_map: dict[str, str] | None = None
    #: where ``label_map`` came from: ``names`` (none used), ``label_map`` (the user's),
    #: ``ClassLabel`` (the dataset's label names), ``ClassLabel+label_map``, or a
    #: convention's name (:data:`~zdebias.data.labels.CONVENTIONS`, e.g. ``glue-sst2``)
    label_map_from: str = "names"
    #: records whose row gives no id, named ``FILE:LINE`` instead (the first
    #: :data:`SHOWN_IDS` of those names in ``derived_ids``)
    n_derived_ids: int = 0
    derived_ids: list[str] = field(default_factory=list)
    #: the row selection of the read (``--where``; None: every row), and the rows it left out
    where: dict[str, str] | None = None
    n_skipped_by_where: int = 0
    #: why no row was selected, when none was (the values the rows hold)
    where_none: str | None = None
    #: where the task came from when none was given and it is not the default: ``label_map``
    #: (the values of the label map, in its order), or the file that records the task of a
    #: zdebias output (:mod:`zdebias.data.recorded`); None otherwise
    task_from: str | None = None

    @property
    def n_errors(self) -> int:
        return len(self.errors)

    @property
    def labels(self) -> tuple[str, ...] | None:
        """The label set of the task read (None when it could not be told)."""
        return get_task(self.task).labels if self.task and self.task != "?" else None

    @property
    def n_rows(self) -> int:
        """All data rows seen: records + unlabelled + bad (+ left out by ``where``)."""
        return self.n_records + self.n_unlabelled + self.n_errors + self.n_skipped_by_where

    def mapping_line(self) -> str | None:
        """How raw labels were read, for the user: None when they were the task's names."""
        if not self.label_map:
            return None
        mapped = ", ".join(f"{k}={v}" for k, v in self.label_map.items())
        return f"{self.path}: raw labels read as {mapped} ({self.label_map_from})"

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary (first 20 error lines only; ``where`` and
        ``n_skipped_by_where`` when rows were selected)."""
        out: dict[str, Any] = {
            "path": self.path,
            "format": self.format,
            "task": self.task,
            "n_records": self.n_records,
            "n_unlabelled": self.n_unlabelled,
            "n_errors": self.n_errors,
            "errors": [str(e) for e in self.errors[:20]],
            "label_map": self.label_map,
            "label_map_from": self.label_map_from,
            "n_derived_ids": self.n_derived_ids,
        }
        if self.where:
            out.update(where=self.where, n_skipped_by_where=self.n_skipped_by_where)
        if self.task_from:
            out["task_from"] = self.task_from
        return out

    def task_line(self) -> str | None:
        """Which task the read took without being told, for the user (None: the task given,
        or the default one)."""
        if not self.task_from:
            return None
        if self.task_from == "label_map":
            order = ", in its order" if self.task.startswith("labels:") else ""
            how = f"the values of the label map{order}; --task names another"
        elif self.task_from == "ClassLabel":
            how = "the names of the dataset's ClassLabel, in their order"
        else:
            how = f"as recorded in {self.task_from}"
        return f"{self.path}: task {self.task} ({how})"

    def derived_ids_line(self) -> str | None:
        """The warning for records named ``FILE:LINE`` where others have an id of their own
        (None when none is, or when no record has an id of its own: the usual naming)."""
        n = self.n_derived_ids
        if not n or n >= self.n_records:
            return None
        shown = ", ".join(self.derived_ids) + (" ..." if n > len(self.derived_ids) else "")
        return (
            f"{self.path}: {n:,} of {self.n_records:,} records give no id (the others do); "
            f"they are named FILE:LINE: {shown}"
        )


class RowMapper:
    """Turns raw dict rows into Records: column mapping, label mapping, validation.

    A raw label is read as the user's map says (``label_map``), else as a ``ClassLabel``'s
    name (``label_names``), else as a convention of the format (``fmt`` and the columns),
    then as a name or alias of the task; anything else is a located :class:`DataError` whose
    message says how to map it (``flag``: ``--label-map``, or ``label_map`` for Python; the
    column mapping is then named ``--columns`` or ``columns`` alike). A mapped column the
    input lacks is a :class:`ConfigError` naming the columns it has."""

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
        fmt: str | None = None,
        flag: str = "--label-map",
    ) -> None:
        self.path = path
        keys = list(keys)
        columns_flag = "--columns" if flag.startswith("--") else "columns"
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
                if col not in keys:
                    raise ConfigError(
                        f"{path}: {map_text({fld: col}, columns_flag)}: no column {col!r}; "
                        f"the columns are {', '.join(map(str, keys))}"
                    )
                mapping[fld] = col
        self.pair = "premise" in mapping and "hypothesis" in mapping
        #: whether the user named the task (else a hint may propose another one)
        self.task_given = task is not None
        #: the distinct raw labels of a column, for the hint of an unmapped number (set by
        #: the reader that can read its rows again; None: the hint goes without)
        self.label_values: Callable[[str], list[str] | None] | None = None
        #: where the task came from when none was given and the default was not used
        #: (``label_map``: the values of the user's map, :func:`implied_task`)
        self.task_from: str | None = None
        default = get_task(default_task if self.pair else "sentiment")
        if task is None and label_map:
            task = implied_task(label_map, default)
            self.task_from = "label_map" if task is not None else None
        elif task is None and label_names:  # a ClassLabel's names, in their order
            task = implied_task(dict(enumerate(label_names)), default)
            self.task_from = "ClassLabel" if task is not None else None
        if task is None:
            task = default
        if task.pair is None:  # a custom label set: pair or single text, as the columns say
            paired = "text" not in mapping and ("premise" in mapping or "hypothesis" in mapping)
            task = task.of_kind(self.pair or paired)
        self.task = task
        needed = ("premise", "hypothesis", "label") if task.pair else ("text", "label")
        if task.pair and not self.pair:
            missing = [f for f in ("premise", "hypothesis") if f not in mapping]
        else:
            missing = [f for f in needed if f not in mapping]
        if missing:
            raise DataError(
                f"no column for {', '.join(missing)}; found columns {keys}; map them with "
                f"{map_text({missing[0]: 'COLUMN'}, columns_flag)}",
                path=path,
                line=1,
            )
        self.mapping = mapping
        self.text_fields = ("premise", "hypothesis") if task.pair else ("text",)
        used = {mapping[f] for f in (*needed, "id") if f in mapping}
        self.extra = [
            k for k in keys if k not in used and k != "meta" and not k.endswith(_DROPPED_SUFFIXES)
        ]
        #: the id column of a row with the keys ``keys`` (a row with other keys: its own,
        #: :meth:`_layout`), and the columns every row's fields are read from
        self.id_col = mapping.get("id")
        self._keys = frozenset(keys)
        self._needed = {mapping[f] for f in needed if f in mapping}
        self._user_id = columns.get("id") if columns else None
        self._layouts: dict[tuple[str, ...], tuple[str | None, list[str]]] = {}
        #: where records named ``FILE:LINE`` are counted (set by :meth:`records`)
        self.report: ReadReport | None = None
        self.flag = flag
        check_raw_labels(label_map or {}, flag)
        self.given = {str(k): str(v) for k, v in (label_map or {}).items()}
        self.label_names = label_names
        self.label_map_from = "label_map" if self.given else "names"
        convention = None if self.given else convention_for(fmt, keys, task)
        if convention is not None:
            self.given, self.label_map_from = dict(convention.label_map), convention.name
        #: raw label key → label name (None: unlabelled), the user's map checked once here
        self.label_map = {raw_key(k): self._target(k, v) for k, v in self.given.items()}
        if label_names is not None:
            self.label_map_from = "ClassLabel+label_map" if self.given else "ClassLabel"
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
        report.label_map, report.label_map_from = self.used_map(), self.label_map_from
        if self.task_from is not None:
            report.task_from = self.task_from
        self.report = report
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
        if row.keys() == self._keys:
            id_col, extra = self.id_col, self.extra
        else:  # a row's own keys count: its id, its other fields into meta
            id_col, extra = self._layout(row)
        rid = row.get(id_col) if id_col else None
        if rid is None or rid == "":
            # a JSON list's record: by its place in the list (several may share a line)
            rid = f"{self.id_prefix}:{getattr(line, 'record', line)}"
            report = self.report
            if report is not None:
                report.n_derived_ids += 1
                if report.n_derived_ids <= SHOWN_IDS:
                    report.derived_ids.append(rid)
        else:
            rid = str(rid)
        meta: dict[str, Any] = {}
        raw_meta = row.get("meta")
        if isinstance(raw_meta, str) and raw_meta.startswith("{"):
            try:
                raw_meta = json.loads(raw_meta)
            except (ValueError, RecursionError):
                raw_meta = None
        if isinstance(raw_meta, dict):
            meta.update(raw_meta)
        for key in extra:
            value = row.get(key)
            if value is not None and value != "":
                meta[key] = value
        if self.task.pair:
            return Record(rid, label, values["premise"], values["hypothesis"], None, meta)
        return Record(rid, label, None, None, values["text"], meta)

    def _layout(self, row: Mapping[str, Any]) -> tuple[str | None, list[str]]:
        """The id column (None: none) and the columns copied into ``meta`` of a row whose
        keys differ from the ones this mapper was made from: found among its own keys, as
        for the first row (the user's id column, else the first :data:`COLUMN_CANDIDATES`
        id); remembered per set of keys."""
        keys = tuple(row)
        found = self._layouts.get(keys)
        if found is None:
            id_col = self._user_id
            if id_col is None:
                lower = {str(k).lower(): k for k in keys}
                id_col = next((lower[c] for c in COLUMN_CANDIDATES["id"] if c in lower), None)
            used = {*self._needed, id_col}
            extra = [
                k
                for k in keys
                if k not in used and k != "meta" and not str(k).endswith(_DROPPED_SUFFIXES)
            ]
            found = (id_col, extra)
            if len(self._layouts) < 4096:
                self._layouts[keys] = found
        return found

    def _target(self, key: str, value: str) -> str | None:
        """The label name ``value`` (a map's value) stands for; ConfigError if none."""
        try:
            return self.task.normalize(value)
        except ValueError:
            own = ""
            if not self.task_given:
                names = dict.fromkeys(v for v in self.given.values() if v not in UNLABELLED)
                own = f"; --task labels:{','.join(names)} names a label set of your own"
            raise ConfigError(
                f"{self.flag}: {key}={value}: {value!r} is not a label of task {self.task.name} "
                f"({', '.join(self.task.labels)}){own}"
            ) from None

    def used_map(self) -> dict[str, str] | None:
        """Raw label → label name as this mapper reads them (None: names only), for the
        summaries: a ``ClassLabel``'s numbers, then the given or conventional map."""
        used: dict[str, str] = {}
        for i, name in enumerate(self.label_names or ()):
            key = raw_key(name)
            label = self.label_map[key] if key in self.label_map else self._name(name)
            used[str(i)] = label if label is not None else name
        for key, value in self.given.items():
            used[key] = self.label_map[raw_key(key)] or value
        return used or None

    def _name(self, raw: Any) -> str | None:
        try:
            return self.task.normalize(raw)
        except ValueError:
            return None

    def _label(self, raw: Any, line: int, label_col: str) -> str | None:
        """The label name of a raw label (None: unlabelled); DataError if unknown."""
        if raw is None:
            return None
        try:
            key = raw_key(raw)
        except ValueError as err:
            raise DataError(str(err), path=self.path, line=line, field=label_col) from None
        if key in self.label_map:
            return self.label_map[key]
        names = self.label_names
        if names is not None and isinstance(raw, numbers.Integral) and 0 <= int(raw) < len(names):
            raw = names[int(raw)]
            key = raw_key(raw)
            if key in self.label_map:
                return self.label_map[key]
        try:
            return self.task.normalize(raw)
        except ValueError as err:
            values: list[str] | None = None
            others: tuple[Task, ...] = ()
            number = key.lstrip("-").isdigit()
            if self.label_values is not None and not self.given and (number or not self.task_given):
                values = self.label_values(label_col)
                if not self.task_given:
                    others = tuple(t for t in TASKS.values() if t.pair == self.task.pair)
            words = values if values and not number else None
            if words and len(words) > 1 and set(words).isdisjoint(self.task.aliases):
                hint = _label_set_hint(words, self.flag)  # none of them the task's: a set
            else:
                hint = unmapped_hint(
                    self.task, key, self.given, self.flag, values=None if words else values,
                    others=others,
                )  # fmt: skip
            raise DataError(f"{err}; {hint}", path=self.path, line=line, field=label_col) from None


def _label_set_hint(words: list[str], flag: str) -> str:
    """The hint for a column of word labels none of which is the default task's (a file of
    a custom label set without its record): the label set they make, to name (``flag``:
    ``--label-map`` for the command line, else Python's ``task=``)."""
    held = ", ".join(words[:10]) + (", ..." if len(words) > 10 else "")
    task = f"labels:{','.join(words)}"
    named = f"--task {task}" if flag.startswith("--") else f"task={task!r}"
    return (
        f"the column holds {len(words)} labels ({held}), none of them the task's; name the "
        f"label set with {named} (in the order of the label ids you want)"
    )


__all__ = ["COLUMN_CANDIDATES", "SHOWN_IDS", "ReadReport", "RowMapper"]
