"""How an input is read: the reader settings every command and recipe dataset share."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import field_validator

from zdebias.data.labels import check_raw_labels
from zdebias.data.mapping import ReadReport
from zdebias.data.process import gc_paused
from zdebias.data.readers import Dataset
from zdebias.data.schema import Record
from zdebias.data.where import is_quoted, raw_text, split_unquoted, unquote, where_text
from zdebias.errors import ConfigError, DataError
from zdebias.settings import Settings, setting

log = logging.getLogger("zdebias")


class ReadOptions(Settings):
    """Reader settings: format, label set, column / label mapping, row selection, bad-row
    policy, first N. One input may override them with a ``PATH::KEY=VALUE;...`` suffix
    (:meth:`for_input`)."""

    help_panel: ClassVar[str] = "Input"

    format: str | None = setting(
        None,
        "Input format (jsonl, json, csv, tsv, parquet, triplets, hans, hf, hf-disk, arrow); "
        "detected from the file when omitted.",
    )
    task: str | None = setting(
        None,
        "Label set: nli, nli-binary, sentiment, or your own labels:a,b,c (pair or single-text "
        "data, as the columns say). Detected from the columns when omitted.",
    )
    columns: dict[str, str] = setting(
        default_factory=dict,
        help="Column mapping, e.g. premise=sentence1,hypothesis=sentence2,label=y",
    )
    label_map: dict[str, str] = setting(
        default_factory=dict,
        help="What each raw label means: raw label → label name, e.g. "
        "0=entailment,1=neutral,2=contradiction. Needed for numbers and any raw label that "
        "is not a name of the task (a ClassLabel's names are used as they are).",
    )
    split: str | None = setting(None, "Split of a triplet folder (s1.SPLIT ...).")
    on_error: Literal["raise", "skip"] = setting(
        "raise",
        "raise: stop at the first bad row (exit 2); skip: skip bad rows and report how many "
        "and where.",
    )
    limit: int | None = setting(None, "Read only the first N records.", ge=1)
    where: dict[str, str] = setting(
        default_factory=dict,
        help="Read only the rows whose column holds a value, e.g. split=TRAIN (several: "
        "split=TRAIN,lang=en or the option repeated, all must hold; alternatives: "
        'split=TRAIN|TRIAL; a value with , | = ; or spaces in double quotes: text="a|b"). '
        "Compared with the raw value exactly, before any mapping; the rows left out are "
        "counted.",
        repeat=True,  # each --where adds conditions (AND); a column given twice is an error
        exclude_if=lambda value: not value,  # unset: recipe stage hashes as before it
    )

    @field_validator("columns", "label_map", "where", mode="before")
    @classmethod
    def _mapping(cls, value: Any, info: Any) -> Any:
        what = {"columns": "column mapping", "label_map": "label mapping"}
        if info.field_name == "where" and isinstance(value, list | tuple):
            if not all(isinstance(v, str) for v in value):
                return value
            # --where repeated: every condition holds (a column given twice is an error)
            return parse_mapping(",".join(v for v in value if v.strip()), "row selection")
        if isinstance(value, str) or value is None:
            return parse_mapping(value, what.get(info.field_name, "row selection"))
        if isinstance(value, dict):  # label_map={0: "contradiction"}: keys as the file has them
            if info.field_name == "label_map":
                check_raw_labels(value, "label_map")
            keys = [str(k) for k in value]
            twice = next((k for k in keys if keys.count(k) > 1), None)
            if twice is not None:  # {1: ..., "1": ...}: one key, never last-wins
                raise ConfigError(f"{info.field_name}: key {twice!r} is given twice; give it once")
            if info.field_name == "where":  # where={"year": 2020}: compared as text
                return {str(k): raw_text(v) for k, v in value.items()}
            return {str(k): v for k, v in value.items()}
        return value

    def for_input(self, spec: str | Path) -> tuple[str, ReadOptions]:
        """The path of one input and its reader settings: these, with the ones its
        ``PATH::KEY=VALUE;KEY=VALUE`` suffix gives (each replaces the setting of that name for
        this input; see :func:`split_input`)."""
        path, overrides = split_input(spec)
        if not overrides:
            return path, self
        return path, self.with_input_options(overrides, path)

    def with_input_options(self, overrides: dict[str, str], path: str) -> ReadOptions:
        """These settings with one input's own (``overrides``: field → text as written)."""
        values = {k: getattr(self, k) for k in type(self).model_fields}
        try:
            return type(self).checked({**values, **overrides})
        except ConfigError as err:
            raise ConfigError(f"{path}: {err}") from None

    def open(self, path: str | Path, *, task: Any = None) -> Dataset:
        """A streaming :class:`Dataset` of ``path`` (``task``: default when none is set;
        ``PATH::KEY=VALUE`` options: :meth:`for_input`)."""
        path, read = self.for_input(path)
        return Dataset(
            path,
            format=read.format,
            task=read.task or task,
            columns=read.columns or None,
            label_map=read.label_map or None,
            split=read.split,
            on_error=read.on_error,
            where=read.where or None,
        )

    def read(
        self, path: str | Path, *, task: Any = None, what: str | None = None
    ) -> tuple[list[Record], ReadReport]:
        """All records (the first ``limit``), and the reader's report of what it skipped.

        ``what`` (e.g. "training"): fail when no labelled record is left.
        """
        path, read = self.for_input(path)
        ds = read.open(path, task=task)
        records: list[Record] = []
        with gc_paused():
            for record in ds:
                records.append(record)
                if read.limit is not None and len(records) >= read.limit:
                    break
        if what is not None and not records:
            raise no_records_error(ds.report, what)
        return records, ds.report


class OutputOptions(Settings):
    """How an operation on files writes its records."""

    help_panel: ClassVar[str] = "Output"

    output_schema: Literal["zdebias", "input"] = setting(
        "zdebias",
        "zdebias: records (id, premise/hypothesis or text, label, meta) as JSONL; input: the "
        "input's own columns, raw label values and format (kept.csv for a CSV input: the "
        "inverse of --columns and --label-map).",
    )


#: the reader settings one input may set for itself (``PATH::KEY=VALUE``), by the names
#: they may be written with (a field's name, or its flag without the dashes)
INPUT_OPTIONS = {
    **{name: name for name in ("format", "task", "columns", "split", "limit", "where")},
    **{"label_map": "label_map", "label-map": "label_map"},
    **{"on_error": "on_error", "on-error": "on_error"},
}


def split_input(spec: str | Path) -> tuple[str, dict[str, str]]:
    """``PATH[::SPLIT][::KEY=VALUE;KEY=VALUE...]`` → the path (with its split, as the
    readers take it) and the input's own reader settings, by field name.

    A part after ``::`` that holds ``=`` gives settings (``;`` or another ``::`` between
    them); one without is a split, as in ``DIR::dev``. The value of a setting is written as
    its CLI option's (``columns=premise=s1,hypothesis=s2``, ``where=split=TRAIN|TRIAL``,
    double quotes around a value that holds ``;`` or ``::``); an empty one resets it
    (``columns=``: detect the columns). A key given twice (in either spelling) is an error,
    except ``where``, whose conditions add up as ``--where`` repeated does. A path that
    exists as written is read as it is, ``::`` in its name included; a path in double
    quotes (``"a::b.jsonl"::where=split=TRAIN``) is taken as it is, options after it."""
    text = str(spec)
    if "::" not in text or Path(text).exists():
        return text, {}
    head, parts = _path_and_parts(text)
    if not any("=" in p for p in parts):  # DIR::SPLIT, "PATH" or "PATH"::SPLIT
        if not text.startswith('"'):
            return text, {}
        if len(parts) > 1:
            raise ConfigError(f'bad input {text!r}: expected "PATH"[::SPLIT][::KEY=VALUE...]')
        return _shown_path(head, parts[0] if parts else None), {}
    split = [p for p in parts if "=" not in p]
    if len(split) > 1 or (split and parts[0] != split[0]):
        raise ConfigError(f"bad input {text!r}: expected PATH[::SPLIT][::KEY=VALUE;KEY=VALUE...]")
    options: dict[str, str] = {}
    given: dict[str, str] = {}  # field → the item that set it, as written
    for part in (p for p in parts if "=" in p):
        for item in split_unquoted(part, ";"):
            key, sep, value = item.partition("=")
            key = key.strip()
            if not item.strip():
                continue
            if not sep or key not in INPUT_OPTIONS:
                keys = ", ".join(k for k in INPUT_OPTIONS if "-" not in k)
                raise ConfigError(
                    f"bad input option {item.strip()!r} in {text!r}: expected KEY=VALUE, "
                    f"KEY one of {keys}"
                )
            name, value = INPUT_OPTIONS[key], value.strip()
            if name in given and name != "where":
                raise ConfigError(
                    f"bad input {text!r}: {name} is given twice ({given[name]} and "
                    f"{item.strip()}); give each key once"
                )
            if name == "where" and options.get(name) and value:  # conditions add up
                value = f"{options[name]},{value}"
            given[name] = item.strip()
            options[name] = value
    return _shown_path(head, split[0] if split else None), options


def _path_and_parts(text: str) -> tuple[str, list[str]]:
    """The path of ``PATH::...`` (unquoted when written ``"PATH"::...``) and the parts after
    it (split at each ``::`` outside double quotes)."""
    if text.startswith('"'):
        end = text.find('"', 1)
        rest = text[end + 1 :] if end > 0 else ""
        if end < 0 or (rest and not rest.startswith("::")):
            raise ConfigError(
                f'bad input {text!r}: expected "PATH" or "PATH"::... (the path in double '
                "quotes, then its options)"
            )
        return text[1:end], split_unquoted(rest[2:], "::") if rest else []
    head, _, rest = text.partition("::")
    return head, split_unquoted(rest, "::")


def _shown_path(path: str, split: str | None) -> str:
    """The path (and split) as the readers take it: a path holding ``::`` quoted unless it
    exists and has no split (:func:`~zdebias.data.files.split_path_and_split`)."""
    if "::" in path and (split is not None or not Path(path).exists()):
        path = f'"{path}"'
    return path if split is None else f"{path}::{split}"


def parse_mapping(text: str | None, what: str) -> dict[str, str]:
    """Parse ``a=b,c=d`` (a CLI option) into a dict, failing clearly.

    Double quotes keep ``,`` ``=`` ``|`` ``;`` and spaces in a key or value
    (:mod:`zdebias.data.where`). A row selection's values keep their quotes (its ``|``
    separates alternatives, read by :func:`~zdebias.data.where.alternatives`); the others'
    are unquoted here. A key given twice is an error, never last-wins."""
    if not text:
        return {}
    out: dict[str, str] = {}
    selection = what == "row selection"
    for part in split_unquoted(text, ","):
        key_text, *rest = split_unquoted(part, "=", maxsplit=1)
        key = unquote(key_text)
        raw = rest[0].strip() if rest else ""
        value = raw if selection else unquote(raw)
        empty = not unquote(raw) and not (selection and is_quoted(raw))
        if not rest or not key or empty:
            raise ConfigError(
                f"bad {what} {part.strip()!r}: expected KEY=VALUE[,KEY=VALUE...] (a value "
                'with , = | ; or spaces in double quotes: KEY="a,b")'
            )
        if key in out:
            hint = "give each key once"
            if selection:  # every condition must hold: one value of a column at a time
                hint = f"every condition must hold; either value: {key}={out[key]}|{value}"
            raise ConfigError(
                f"bad {what} {text!r}: {key!r} is given twice ({key}={out[key]} and "
                f"{key}={value}); {hint}"
            )
        out[key] = value
    return out


def no_records_error(report: ReadReport, what: str) -> DataError:
    """The one-line error for an input without a single labelled record, saying why: an empty
    file, a header only, every row unlabelled, or every row bad (``--on-error skip``)."""
    path = report.path
    if report.where_none is not None:
        return DataError(f"no labelled records in the {what} set: {report.where_none}", path=path)
    if report.n_errors and report.n_errors >= report.n_unlabelled:
        first = report.errors[0]
        why = f"all {report.n_rows} rows were bad and skipped (first: {first.message})"
        return DataError(
            f"no labelled records in the {what} set: {why}", path=path, line=first.line
        )
    if report.n_unlabelled:
        why = f"all {report.n_unlabelled} rows are without a gold label"
        if report.n_errors:
            why += f" or bad ({report.n_errors})"
        line = report.unlabelled_lines[0] if report.unlabelled_lines else None
        return DataError(f"no labelled records in the {what} set: {why}", path=path, line=line)
    file = Path(path)
    if file.is_file() and file.stat().st_size == 0:
        why = "the file is empty"
    elif report.format in ("csv", "tsv", "hans"):
        why = "only a header, no data rows"
    else:
        why = "no data rows"
    return DataError(f"no labelled records in the {what} set: {why}", path=path, line=1)


def dataset_warnings(records: Sequence[Record], path: str, *, min_records: int = 1) -> list[str]:
    """Warnings about records that read fine but would mislead a statistic, with counts:
    a single label (every z then measures only the label imbalance) and duplicate ids
    (a record and its copy can land on both sides of a filter). Fewer than ``min_records``
    records is an error (:class:`DataError`)."""
    return label_and_id_warnings(
        Counter(r.label for r in records),
        len(records),
        (r.id for r in records),
        path,
        min_records=min_records,
    )


def label_and_id_warnings(
    labels: Counter[str], n: int, ids_of: Iterable[str], path: str, *, min_records: int = 1
) -> list[str]:
    """:func:`dataset_warnings` from the label counts, the record count and every record's
    id in input order (an iterable read once, only when there are enough records)."""
    if n < min_records:
        raise DataError(
            f"only {n} labelled record(s); z-statistics need at least {min_records}",
            path=path,
        )
    lines = []
    if len(labels) == 1:
        ((label, count),) = labels.items()
        lines.append(
            f"{path}: all {count:,} records have the label {label!r}: z-statistics and filtering "
            "measure only the label imbalance"
        )
    repeated = repeated_ids_line(ids_of, path)
    if repeated is not None:
        lines.append(repeated)
    return lines


def repeated_ids_line(ids_of: Iterable[str], path: str) -> str | None:
    """The warning for records that repeat an id, with counts (None when every id is
    unique): a record and its copy can land on both sides of a filter or a split."""
    ids = Counter(ids_of)
    repeated = {i: n for i, n in ids.items() if n > 1}
    if not repeated:
        return None
    top, n_top = max(repeated.items(), key=lambda kv: kv[1])
    extra = sum(repeated.values()) - len(repeated)
    verb = "repeats" if extra == 1 else "repeat"
    return (
        f"{path}: {counted(extra, 'record')} {verb} an id ({counted(len(repeated), 'id')} "
        f"used more than once, e.g. {top!r} {n_top} times)"
    )


def warn_repeated_ids(records: Iterable[Record], path: str) -> None:
    """Tell the user (stderr, via logging) when ``records`` repeat an id
    (:func:`repeated_ids_line`): the commands that read records without z-statistics."""
    line = repeated_ids_line((r.id for r in records), path)
    if line is not None:
        log.warning("%s", line)


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless n is 1: ``1 bad row``, ``2 bad rows``, ``1,000 rows``."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def skip_message(report: ReadReport) -> list[str]:
    """What a read skipped, and the records it named ``FILE:LINE`` where others have an id
    of their own, as lines for the user (empty when there is nothing to tell)."""
    lines = []
    if report.n_skipped_by_where:
        lines.append(
            f"{report.path}: left out {counted(report.n_skipped_by_where, 'row')} not selected by "
            f"--where {where_text(report.where or {})}"
        )
    if report.n_unlabelled:
        lines.append(
            f"{report.path}: skipped {counted(report.n_unlabelled, 'row')} without a gold label"
        )
    if report.n_errors:
        at = [str(e.line) for e in report.errors[:10] if e.line is not None]
        more = " ..." if report.n_errors > 10 else ""
        where = ""
        if at:
            word = "line" if len(at) == 1 and not more else "lines"
            where = f" ({word} {', '.join(at)}{more})"
        lines.append(f"{report.path}: skipped {counted(report.n_errors, 'bad row')}{where}")
        lines.extend(f"  {err}" for err in report.errors[:3])
    derived = report.derived_ids_line()
    if derived is not None:
        lines.append(derived)
    return lines


def log_skips(report: ReadReport) -> None:
    """Tell the user (stderr, via logging) what a read skipped: nothing is dropped silently;
    and which task it took without being told (:meth:`ReadReport.task_line`)."""
    task_line = report.task_line()
    if task_line is not None:
        log.info("%s", task_line)
    for line in skip_message(report):
        log.warning("%s", line)


def read_logged(
    path: str | Path, read: ReadOptions | None = None, *, task: Any = None, what: str | None = None
) -> tuple[list[Record], ReadReport]:
    """The records of ``path`` read with ``read`` (:meth:`ReadOptions.read`; ``what``, e.g.
    "training": fail when no labelled record is left) and the reader's report; what it
    skipped is logged (:func:`log_skips`)."""
    records, report = (read or ReadOptions()).read(path, task=task, what=what)
    log_skips(report)
    return records, report


__all__ = [
    "INPUT_OPTIONS",
    "OutputOptions",
    "ReadOptions",
    "counted",
    "dataset_warnings",
    "label_and_id_warnings",
    "log_skips",
    "no_records_error",
    "parse_mapping",
    "read_logged",
    "repeated_ids_line",
    "skip_message",
    "split_input",
    "warn_repeated_ids",
]
