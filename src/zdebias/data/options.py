"""How an input is read: the reader settings every command and recipe dataset share."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import field_validator

from zdebias.data.readers import Dataset, ReadReport, gc_paused, parse_mapping
from zdebias.data.schema import Record
from zdebias.errors import DataError
from zdebias.settings import Settings, setting


class ReadOptions(Settings):
    """Reader settings: format, label set, column / label mapping, bad-row policy, first N."""

    help_panel: ClassVar[str] = "Input"

    format: str | None = setting(
        None,
        "Input format (jsonl, json, csv, tsv, parquet, triplets, hans, hf); detected from the "
        "file when omitted.",
    )
    task: str | None = setting(
        None,
        "Label set: nli, nli-binary, sentiment, or labels:a,b,c. Detected from the columns when "
        "omitted.",
    )
    columns: dict[str, str] = setting(
        default_factory=dict,
        help="Column mapping, e.g. premise=sentence1,hypothesis=sentence2,label=y",
    )
    label_map: dict[str, str] = setting(
        default_factory=dict, help="Raw label → label name, e.g. 0=negative,1=positive"
    )
    split: str | None = setting(None, "Split of a triplet folder (s1.SPLIT ...).")
    on_error: Literal["raise", "skip"] = setting(
        "raise",
        "raise: stop at the first bad row (exit 2); skip: skip bad rows and report how many "
        "and where.",
    )
    limit: int | None = setting(None, "Read only the first N records.", ge=1)

    @field_validator("columns", "label_map", mode="before")
    @classmethod
    def _mapping(cls, value: Any, info: Any) -> Any:
        if isinstance(value, str) or value is None:
            what = "column mapping" if info.field_name == "columns" else "label mapping"
            return parse_mapping(value, what)
        return value

    def open(self, path: str | Path, *, task: Any = None) -> Dataset:
        """A streaming :class:`Dataset` of ``path`` (``task``: default when none is set)."""
        return Dataset(
            path,
            format=self.format,
            task=self.task or task,
            columns=self.columns or None,
            label_map=self.label_map or None,
            split=self.split,
            on_error=self.on_error,
        )

    def read(
        self, path: str | Path, *, task: Any = None, what: str | None = None
    ) -> tuple[list[Record], ReadReport]:
        """All records (the first ``limit``), and the reader's report of what it skipped.

        ``what`` (e.g. "training"): fail when no labelled record is left.
        """
        ds = self.open(path, task=task)
        records: list[Record] = []
        with gc_paused():
            for record in ds:
                records.append(record)
                if self.limit is not None and len(records) >= self.limit:
                    break
        if what is not None and not records:
            raise DataError(f"no labelled records in the {what} set", path=str(path))
        return records, ds.report


def skip_message(report: ReadReport) -> list[str]:
    """What a read skipped, as lines for the user (empty when nothing was skipped)."""
    lines = []
    if report.n_unlabelled:
        lines.append(f"{report.path}: skipped {report.n_unlabelled} rows without a gold label")
    if report.n_errors:
        at = ", ".join(str(e.line) for e in report.errors[:10] if e.line is not None)
        more = " ..." if report.n_errors > 10 else ""
        lines.append(f"{report.path}: skipped {report.n_errors} bad rows (lines {at}{more})")
        lines.extend(f"  {err}" for err in report.errors[:3])
    return lines


__all__ = ["ReadOptions", "skip_message"]
