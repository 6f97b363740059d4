"""``zdebias inspect``: what a dataset holds."""

from __future__ import annotations

from typing import Annotated

import typer

from zdebias.commands._cli import check_output, emit, read_input, require
from zdebias.data.options import ReadOptions
from zdebias.settings_cli import CliOptions, InputArg, command


@command
def inspect(input: InputArg, read: ReadOptions, cli: CliOptions) -> None:
    """Show a dataset's format, size, label counts, skipped rows and text lengths."""
    from zdebias.data.inspect import inspect_dataset
    from zdebias.report.text import inspect_text

    info = inspect_dataset(read.open(require(input, "INPUT")), limit=read.limit)
    emit(info, cli, lambda: inspect_text(info))


@command
def convert(
    input: InputArg,
    out: Annotated[str, typer.Argument(help="Output file: .jsonl (default) or .parquet.")],
    read: ReadOptions,
    cli: CliOptions,
) -> None:
    """Convert any supported input into zdebias JSONL or parquet (written atomically)."""
    from zdebias.data.writers import write_records

    path = require(input, "INPUT")
    check_output(out, cli)
    records, report = read_input(path, read)
    n = write_records(records, out)
    result = {"input": path, "out": out, "n_records": n, "read": report.summary()}
    emit(result, cli, f"wrote {n:,} records to {out}")


def register(app: typer.Typer) -> None:
    """Add the data commands."""
    app.command("inspect")(inspect)
    app.command("convert")(convert)
