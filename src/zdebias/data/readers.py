"""Streaming readers for every supported input format (docs/design.md §1): the front door.

Formats: ``jsonl``, ``json`` (a list of objects), ``csv``, ``tsv``, ``parquet``, ``triplets``
(robust-nli ``s1.X s2.X labels.X``), ``hans`` (``heuristics_evaluation_set.txt``), ``hf``
(``hf:NAME[@CONFIG][:SPLIT[@REVISION]]`` through HF ``datasets``, cached), ``hf-disk`` (a
``save_to_disk`` folder; ``DIR::SPLIT`` for a DatasetDict), ``arrow`` (an Arrow IPC file), and
``.gz`` of any file format (:mod:`zdebias.data.hf` reads the HF ones). The format is detected
from the file and can be forced with ``format=``; ``where=`` selects rows by column values
(:mod:`zdebias.data.where`).

A :class:`Dataset` ties together the format (:mod:`zdebias.data.files`), the raw rows
(:mod:`zdebias.data.sources`) and their mapping to records (:mod:`zdebias.data.mapping`).

>>> ds = open_dataset("train.jsonl")            # doctest: +SKIP
>>> for record in ds: ...                       # doctest: +SKIP
>>> ds.report.n_records, ds.report.n_unlabelled # doctest: +SKIP
"""

from __future__ import annotations

import itertools
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from zdebias.data.files import FORMATS, detect_format, split_path_and_split
from zdebias.data.labels import UNLABELLED, Task, get_task, raw_key
from zdebias.data.mapping import ReadReport, RowMapper
from zdebias.data.schema import Record
from zdebias.data.sources import Rows, format_rows, jsonl_rows
from zdebias.data.where import Selection, where_columns
from zdebias.errors import ConfigError, DataError

OnError = Literal["raise", "skip"]
#: the formats zdebias writes rows in, whose task may be recorded beside them
_RECORDED_FORMATS = frozenset({"jsonl", "json", "csv", "tsv", "parquet"})


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
        where: Mapping[str, str] | None = None,
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
        #: the custom task recorded beside a zdebias output and the file recording it, taken
        #: when neither a task nor a label map is given (:mod:`zdebias.data.recorded`)
        self.recorded: tuple[Task, str] | None = None
        if self.task is None and not self.label_map and self.format in _RECORDED_FORMATS:
            from zdebias.data.recorded import recorded_task

            found = recorded_task(self.path)
            if found is not None:
                self.recorded = get_task(found[0]), found[1]
        self.on_error = on_error
        #: the row selection (:mod:`zdebias.data.where`): column → wanted value(s)
        self.where = dict(where or {})
        #: the columns the last pass's source named first (its header or first object)
        self.keys: list[str] = []
        #: whether those came from a header (every row has them) rather than a first row
        self.header = False
        self.report = ReadReport(self.spec, self.format, self.task.name if self.task else "?")
        #: how the last pass maps rows to records (None before one began)
        self.mapper: RowMapper | None = None

    def __iter__(self) -> Iterator[Record]:
        rows, label_names, id_prefix = format_rows(self.format, self.spec, self.path, self.split)
        return self._records(rows, label_names, id_prefix)

    def with_rows(self) -> Generator[tuple[Record, Mapping[str, Any]], None, None]:
        """Each record with the raw row it was read from (the file's own columns and
        values), in file order; :attr:`mapper` holds the column mapping once reading began."""
        rows, label_names, id_prefix = format_rows(self.format, self.spec, self.path, self.split)
        last: list[Any] = [None]

        def remembered() -> Rows:
            for item in rows:
                last[0] = item
                yield item

        for record in self._records(remembered(), label_names, id_prefix):
            yield record, last[0][1]

    def iter_range(self, start: int, end: int) -> Iterator[Record]:
        """The records of the JSONL lines that start in bytes ``[start, end)`` of a plain
        file (``start`` at a line start), read exactly as a whole pass reads them: line
        numbers, ids and columns as in the whole file (the text and label columns come from
        its first JSON object; each row's id and other fields from its own keys). ``report``
        counts this range only."""
        if self.format != "jsonl":
            raise ConfigError(f"reading a byte range needs a jsonl file, not {self.format}")
        mapper = None
        if start > 0:
            first = next(
                (row for _, row in jsonl_rows(self.path) if isinstance(row, Mapping)), None
            )
            if first is not None:
                mapper = self._mapper(
                    list(first), _default_task_for(first, "nli"), self.path.name, None
                )
        if self.where:  # a range may lack a column later rows carry: the whole file decides
            where_columns(self.where, self.keys, jsonl_rows(self.path), self.spec)
        return self._records(
            jsonl_rows(self.path, start, end), None, self.path.name, mapper, partial=True
        )

    def _records(
        self,
        rows: Rows,
        label_names: list[str] | None,
        id_prefix: str,
        mapper: RowMapper | None = None,
        *,
        partial: bool = False,
    ) -> Iterator[Record]:
        report = ReadReport(self.spec, self.format, self.task.name if self.task else "?")
        self.report = report
        skip = self.on_error == "skip"
        if mapper is None:
            mapper, rows = self._first_mapper(rows, label_names, id_prefix, report, skip)
            if mapper is None:
                return
        report.task = mapper.task.name
        if self.recorded is not None and mapper.task.labels == self.recorded[0].labels:
            report.task_from = self.recorded[1]
        self.mapper = mapper
        if self.where:  # before any mapping: rows left out are never checked
            selection = Selection(
                self.where, self.keys, self.spec, fixed=self.header, partial=partial
            )
            rows = selection.rows(rows, report)
        yield from mapper.records(rows, report, skip=skip)

    def _first_mapper(
        self,
        rows: Rows,
        label_names: list[str] | None,
        id_prefix: str,
        report: ReadReport,
        skip: bool,
    ) -> tuple[RowMapper | None, Rows]:
        """The mapper of the columns a source names first (its header, line 0, or the first
        JSON object), and the rows left to map (that first object among them)."""
        default_task = "nli-binary" if self.format == "hans" else "nli"
        self.header = False
        for line, row in rows:
            if line == 0:  # a header (sources number data rows from 1)
                self.header = True
                return self._mapper(row, default_task, id_prefix, label_names), rows
            try:
                if isinstance(row, DataError):
                    raise row
                if not isinstance(row, Mapping):
                    raise DataError(
                        f"expected a JSON object, got {type(row).__name__}",
                        path=str(self.path),
                        line=line,
                    )
                mapper = self._mapper(
                    list(row), _default_task_for(row, default_task), id_prefix, label_names
                )
            except DataError as err:
                if not skip:
                    raise
                report.errors.append(err)
                continue
            return mapper, itertools.chain(((line, row),), rows)
        return None, rows

    def label_values(self, column: str, limit: int = 100) -> list[str] | None:
        """The distinct raw labels (keys) of ``column`` in a new pass over the rows, for the
        hint of a raw label no task or map names: all numbers (in their order) or all words
        (sorted); None for a mix, or when more than ``limit`` differ or one is long (not a
        label column)."""
        seen: set[str] = set()
        try:
            rows, _, _ = format_rows(self.format, self.spec, self.path, self.split)
            for _, row in rows:
                if not isinstance(row, Mapping) or row.get(column) is None:
                    continue
                try:
                    key = raw_key(row[column])
                except ValueError:
                    return None
                if key in UNLABELLED or key in seen:
                    continue
                if len(key) > 40 or "," in key or len(seen) == limit:
                    return None
                seen.add(key)
        except DataError:  # the rows fail further on: no hint rather than another error
            return None
        numbers = [key.lstrip("-").isdigit() and len(key) <= 9 for key in seen]
        if all(numbers):
            return sorted(seen, key=int) or None
        return sorted(seen) if not any(numbers) else None

    def _mapper(
        self, keys: list[str], default_task: str, id_prefix: str, label_names: list[str] | None
    ) -> RowMapper:
        self.keys = list(keys)
        mapper = self._new_mapper(keys, default_task, id_prefix, label_names)
        if label_names is None:
            mapper.label_values = self.label_values
        return mapper

    def _new_mapper(
        self, keys: list[str], default_task: str, id_prefix: str, label_names: list[str] | None
    ) -> RowMapper:
        return RowMapper(
            path=self.spec,
            keys=keys,
            task=self.task or (self.recorded[0] if self.recorded else None),
            columns=self.columns,
            label_map=self.label_map,
            default_task=default_task,
            id_prefix=id_prefix,
            label_names=label_names,
            fmt=self.format,
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


__all__ = ["Dataset", "OnError", "iter_records", "open_dataset", "read_records"]
