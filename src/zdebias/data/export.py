"""Records written back in the schema of the input they were read from (``--output-schema
input``): its own columns, raw label values and file format, so a filtered or combined
dataset goes back into the user's pipeline.

A record read from the input is written as the raw row it came from: the input is read again,
in step with the records (each output file's records from that input are in input order), so
memory holds one row at a time. Any other record (a seed's, a generated one) is mapped back:
its text and label into the input's text and label columns, the label as the input spells it
(the inverse of ``--label-map`` or of a ``ClassLabel``), an id into its id column, and the
input's other columns from ``meta``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from zdebias.data.options import ReadOptions
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError

#: input format → the format its schema is written in
SCHEMA_FORMATS = {
    "jsonl": "jsonl",
    "json": "jsonl",
    "csv": "csv",
    "tsv": "tsv",
    "parquet": "parquet",
}
#: what ``output_schema`` may be
OUTPUT_SCHEMAS = ("zdebias", "input")


def _key(record: Record) -> tuple[Any, ...]:
    """What a record read again must match: its input id, label and texts."""
    return (
        record.meta.get("input_id", record.id),
        record.label,
        record.premise,
        record.hypothesis,
        record.text,
    )


class InputSchema:
    """The schema of the input ``path`` (read with ``read``), to write records back in it.

    ``format``: the format written (:data:`SCHEMA_FORMATS`; another input format is refused
    at once); ``columns``: the input's columns (a table's header; the first JSON object's keys).
    """

    def __init__(self, path: str, read: ReadOptions) -> None:
        self.path = path
        self.read = read.model_copy(update={"limit": None})
        first = self.read.open(path)
        if first.format not in SCHEMA_FORMATS:
            raise ConfigError(
                f"--output-schema input: {path} is a {first.format} input; its schema can be "
                f"written for {', '.join(SCHEMA_FORMATS)} inputs only"
            )
        self.format = SCHEMA_FORMATS[first.format]
        self.arrow_schema = None
        if first.format == "parquet":
            import pyarrow.parquet as pq

            self.arrow_schema = pq.ParquetFile(first.path).schema_arrow
        pass_ = first.with_rows()
        found = next(pass_, None)
        pass_.close()
        if first.mapper is None:
            raise DataError("no labelled records to take the schema from", path=path)
        self.mapper = first.mapper
        self.columns = list(found[1]) if found is not None else []
        if self.arrow_schema is not None:
            self.columns = list(self.arrow_schema.names)
        self.label_col = self.mapper.mapping["label"]
        #: label name → the raw value the input gives it, as seen while reading
        self.seen_labels: dict[str, Any] = {}
        #: label name → raw value from the label map or the ClassLabel, until one is seen
        self.mapped_labels: dict[str | None, Any] = {}
        for raw, name in self.read.label_map.items():
            try:
                self.mapped_labels.setdefault(self.mapper.task.normalize(name), raw)
            except ValueError:
                continue
        for i, name in enumerate(self.mapper.label_names or ()):
            self.mapped_labels.setdefault(name, i)
        for raw, name in (self.mapper.used_map() or {}).items():  # a format's convention
            self.mapped_labels.setdefault(name, int(raw) if raw.isdigit() else raw)
        if found is not None:
            self.seen_labels[found[0].label] = found[1].get(self.label_col)

    def raw_label(self, name: str) -> Any:
        """The raw value the input writes label ``name`` as."""
        if name in self.seen_labels:
            return self.seen_labels[name]
        return self.mapped_labels.get(name, name)

    def row_of(self, record: Record) -> dict[str, Any]:
        """A record that is not from the input, in the input's columns."""
        mapping = self.mapper.mapping
        row: dict[str, Any] = dict.fromkeys(self.columns)
        for col in self.mapper.extra:
            if col in record.meta:
                row[col] = record.meta[col]
        for fld in ("premise", "hypothesis", "text"):
            value = getattr(record, fld)
            if fld in mapping and value is not None:
                row[mapping[fld]] = value
        row[self.label_col] = self.raw_label(record.label)
        if "id" in mapping:
            row[mapping["id"]] = record.meta.get("input_id", record.id)
        return row

    def rows(
        self, records: Iterable[Record], from_input: Callable[[Record], bool]
    ) -> Iterator[Mapping[str, Any]]:
        """``records`` in the input's schema: each one ``from_input`` says was read from the
        input as its raw row (found by reading the input again, in order), any other by
        :meth:`row_of`."""
        again = self.read.open(self.path).with_rows()
        label_col = self.label_col
        for record in records:
            if not from_input(record):
                yield self.row_of(record)
                continue
            key = _key(record)
            for candidate, raw in again:
                if _key(candidate) == key:
                    self.seen_labels.setdefault(candidate.label, raw.get(label_col))
                    yield raw
                    break
            else:
                raise DataError(
                    f"record {record.meta.get('input_id', record.id)!r} is no longer in the "
                    "input (did the file change while it was read?)",
                    path=self.path,
                )

    def write(
        self,
        records: Iterable[Record],
        out: str | Path,
        from_input: Callable[[Record], bool],
    ) -> int:
        """Write ``records`` in the input's schema to ``out`` atomically; returns how many."""
        from zdebias.data.writers import write_rows

        rows = self.rows(records, from_input)
        return write_rows(
            rows, out, self.format, columns=self.columns, schema=self.arrow_schema, whole=True
        )


def rewrite_in_schema(
    folder: Path,
    schema: InputSchema,
    task: str,
    from_input: Mapping[str, Callable[[Record], bool]],
) -> dict[str, str]:
    """Replace zdebias JSONL files of ``folder`` by the same records in ``schema``, read back
    with label set ``task``: ``from_input`` maps each file's stem (``kept`` for
    ``kept.jsonl``) to what tells its records read from the input; returns stem → the new
    file's name (``kept.csv``)."""
    out = {}
    for stem in from_input:
        source = folder / f"{stem}.jsonl"
        target = folder / f"{stem}.{schema.format}"
        records = ReadOptions(format="jsonl", task=task).open(source)
        schema.write(records, target, from_input[stem])
        if target != source:
            source.unlink()
        out[stem] = target.name
    return out


__all__ = ["OUTPUT_SCHEMAS", "SCHEMA_FORMATS", "InputSchema", "rewrite_in_schema"]
