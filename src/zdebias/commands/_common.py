"""Options and helpers shared by every command that reads a dataset."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from zdebias.data.readers import Dataset, parse_mapping

FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        help="Input format (jsonl, json, csv, tsv, parquet, triplets, hans, hf); "
        "detected from the file when omitted.",
    ),
]
TaskOpt = Annotated[
    str | None,
    typer.Option(
        "--task",
        help="Label set: nli, nli-binary, sentiment, or labels:a,b,c. "
        "Detected from the columns when omitted.",
    ),
]
ColumnsOpt = Annotated[
    str | None,
    typer.Option(
        "--columns", help="Column mapping, e.g. premise=sentence1,hypothesis=sentence2,label=y"
    ),
]
LabelMapOpt = Annotated[
    str | None,
    typer.Option("--label-map", help="Raw label → label name, e.g. 0=negative,1=positive"),
]
SplitOpt = Annotated[
    str | None, typer.Option("--split", help="Split of a triplet folder (s1.SPLIT ...).")
]
OnErrorOpt = Annotated[
    str,
    typer.Option(
        "--on-error",
        help="raise: stop at the first bad row (exit 2); skip: skip bad rows "
        "and report how many and where.",
    ),
]


def open_input(
    path: str,
    *,
    format: str | None = None,
    task: str | None = None,
    columns: str | None = None,
    label_map: str | None = None,
    split: str | None = None,
    on_error: str = "raise",
) -> Dataset:
    """Open a dataset from CLI option strings."""
    return Dataset(
        path,
        format=format,
        task=task,
        columns=parse_mapping(columns, "column mapping"),
        label_map=parse_mapping(label_map, "label mapping"),
        split=split,
        on_error=on_error,  # type: ignore[arg-type]
    )


def report_skips(ds: Dataset) -> None:
    """Tell the user (on stderr) what a read skipped, so nothing is dropped silently."""
    rep = ds.report
    if rep.n_unlabelled:
        sys.stderr.write(f"{rep.path}: skipped {rep.n_unlabelled} rows without a gold label\n")
    if rep.n_errors:
        lines = ", ".join(str(e.line) for e in rep.errors[:10] if e.line is not None)
        more = " ..." if rep.n_errors > 10 else ""
        sys.stderr.write(f"{rep.path}: skipped {rep.n_errors} bad rows (lines {lines}{more})\n")
        for err in rep.errors[:3]:
            sys.stderr.write(f"  {err}\n")


def echo_json(obj: Any) -> None:
    """Print one JSON object on stdout."""
    import json

    typer.echo(json.dumps(obj, indent=2, ensure_ascii=False))
