"""Records from data held in memory: a pandas DataFrame, a ``datasets.Dataset`` (or one split
of a ``DatasetDict``), a list of dicts or a list of :class:`Record`.

Rows go through the same column and label mapping as files (:class:`ReadOptions`: ``task``,
``columns``, ``label_map``, ``on_error``), so ``zdebias.z_filter(df)`` and ``zdebias filter``
read the same records. Each record remembers its row's position, so results can be aligned
back to the input; the input object is never changed.

pandas and datasets are never imported here: objects are recognised by their type's module.

>>> rows = read_rows(pd.read_json("train.jsonl", lines=True))   # doctest: +SKIP
>>> rows.records[0].id, rows.positions[:3]                       # doctest: +SKIP
('row:0', [0, 1, 2])
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Literal

from zdebias.data.hf import label_names as label_names_of
from zdebias.data.mapping import ReadReport, RowMapper
from zdebias.data.process import gc_paused
from zdebias.data.schema import Record
from zdebias.data.where import Selection
from zdebias.errors import ConfigError

Kind = Literal["dataframe", "dataset", "dicts", "records"]
#: How the positions of rows are named in error messages and default ids.
_WHERE = {"dataframe": "DataFrame", "dataset": "Dataset", "dicts": "rows", "records": "records"}


def data_kind(data: Any) -> Kind:
    """What kind of in-memory data ``data`` is; a :class:`ConfigError` for anything else."""
    module = type(data).__module__.split(".", 1)[0]
    name = type(data).__name__
    if module == "pandas" and name == "DataFrame":
        return "dataframe"
    if module == "datasets" and name in ("Dataset", "DatasetDict"):
        return "dataset"
    if isinstance(data, Sequence) and not isinstance(data, str | bytes):
        if all(isinstance(x, Record) for x in data):
            return "records"
        if all(isinstance(x, Mapping) for x in data):
            return "dicts"
        bad = next(x for x in data if not isinstance(x, Record | Mapping))
        raise ConfigError(
            f"a list of data must hold dicts or Records only, found a {type(bad).__name__}"
        )
    raise ConfigError(
        f"cannot read a {type(data).__name__}; pass a pandas DataFrame, a datasets.Dataset, "
        "a list of dicts or a list of Records (or a file path to the CLI)"
    )


def select_split(data: Any, split: str | None) -> Any:
    """A ``DatasetDict``'s split ``split`` (the only one when ``split`` is None); other
    data unchanged."""
    if type(data).__name__ != "DatasetDict":
        return data
    names = list(data)
    if split is None:
        if len(names) != 1:
            raise ConfigError(f"the DatasetDict has splits {', '.join(names)}; pass split=NAME")
        split = names[0]
    if split not in data:
        raise ConfigError(f"no split {split!r} in the DatasetDict; it has {', '.join(names)}")
    return data[split]


def _frame_rows(df: Any) -> tuple[list[str], Iterator[dict[str, Any]]]:
    """Column names and rows of a DataFrame, missing values (NaN, NA, NaT) as None."""
    columns = [str(c) for c in df.columns]
    clean = df.astype(object).where(df.notna(), None)
    clean.columns = columns
    return columns, iter(clean.to_dict("records"))


@dataclass
class MemoryRows:
    """The records read from in-memory data and where each came from.

    ``positions[i]``: the row (0-based position in the input) of ``records[i]``; rows without
    a gold label, and bad rows under ``on_error="skip"``, have no record and are counted in
    ``report``. ``n_rows``: the input's length.
    """

    kind: Kind
    records: list[Record]
    positions: list[int]
    n_rows: int
    report: ReadReport
    source: Any = field(default=None, repr=False)


def read_rows(
    data: Any,
    *,
    task: str | None = None,
    columns: Mapping[str, str] | None = None,
    label_map: Mapping[str, str] | None = None,
    split: str | None = None,
    on_error: Literal["raise", "skip"] = "raise",
    limit: int | None = None,
    where: Mapping[str, str] | None = None,
) -> MemoryRows:
    """Records of in-memory ``data`` with the file readers' column and label mapping.

    A list of Records is taken as it is (``columns``/``label_map`` do not apply); a
    ``DatasetDict`` needs ``split`` unless it has one split. Bad rows raise a
    :class:`DataError` naming the row position and field (``on_error="skip"``: counted).
    ``where``: only the rows whose columns hold these values (:mod:`zdebias.data.where`;
    the others get no record and are counted in the report). Errors name the Python
    arguments (``columns=``, ``label_map=``, ``where=``).
    """
    data = select_split(data, split)
    kind = data_kind(data)
    shown = _WHERE[kind]
    if kind == "records":
        records: list[Record] = list(data[:limit] if limit is not None else data)
        report = ReadReport(shown, "records", task or "?", n_records=len(records))
        if task is None and records:
            from zdebias.data.labels import infer_task

            report.task = infer_task(records).name
        return MemoryRows(kind, records, list(range(len(records))), len(data), report, data)
    label_names = None
    if kind == "dataframe":
        keys, rows = _frame_rows(data)
    elif kind == "dataset":
        keys, rows = list(data.column_names), iter(data)
        label_names = label_names_of(data.features)
    else:
        keys, rows = (list(data[0]) if data else []), iter(data)
    n_rows = len(data)
    from zdebias.data.labels import get_task

    report = ReadReport(shown, kind, task or "?")
    records = []
    positions: list[int] = []
    if n_rows == 0:
        return MemoryRows(kind, records, positions, 0, report, data)
    mapper = RowMapper(
        path=shown,
        keys=keys,
        task=get_task(task) if task is not None else None,
        columns=columns,
        label_map=label_map,
        default_task="nli",
        id_prefix="row",
        label_names=label_names,
        flag="label_map",
    )
    report.task = mapper.task.name
    numbered: Iterator[tuple[int, Any]] = enumerate(rows)
    if where:
        fixed = kind != "dicts"  # a frame's or a Dataset's columns are every row's
        numbered = Selection(where, keys, shown, option="where", fixed=fixed).rows(numbered, report)
    mapped = mapper.records(numbered, report, skip=on_error == "skip", lines=positions)
    with gc_paused():  # the first ``limit`` records; no row after the last is looked at
        records.extend(islice(mapped, None if limit is None else max(limit, 0)))
    return MemoryRows(kind, records, positions, n_rows, report, data)


__all__ = ["MemoryRows", "data_kind", "read_rows", "select_split"]
