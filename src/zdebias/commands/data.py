"""``zdebias inspect`` and ``convert``: what a dataset holds; its records in another format."""

from __future__ import annotations

from typing import Annotated

import typer

from zdebias.commands._cli import check_output, emit, log, require
from zdebias.data.options import ReadOptions, counted, read_logged, warn_repeated_ids
from zdebias.features.settings import TokenSettings
from zdebias.settings_cli import CliOptions, InputArg, command


@command
def inspect(input: InputArg, read: ReadOptions, tokens: TokenSettings, cli: CliOptions) -> None:
    """Show a dataset's format, size, label counts, skipped rows and text lengths."""
    from zdebias.data.inspect import inspect_dataset
    from zdebias.data.options import no_records_error
    from zdebias.features.short_fields import short_fields_line
    from zdebias.features.tokenize import Tokenizer
    from zdebias.report.text import inspect_text

    path, read = read.for_input(require(input, "INPUT"))
    ds = read.open(path)
    tokenizer = Tokenizer.from_settings(tokens.token_kwargs())
    info = inspect_dataset(
        ds,
        limit=read.limit,
        tokenizer=tokenizer,
        short_line=lambda medians: short_fields_line(medians, tokenizer),
    )
    if ds.report.task_line() is not None:
        log.info("%s", ds.report.task_line())
    for line in info["warnings"]:
        log.warning("%s", line)
    if not info["n_examples"]:  # described, but every other command refuses it
        log.warning("warning: %s", no_records_error(ds.report, "input"))
    emit(info, cli, lambda: inspect_text(info))


@command
def convert(
    input: InputArg,
    out: Annotated[
        str,
        typer.Argument(
            help="Output: a .jsonl, .json (JSON Lines), .csv, .tsv or .parquet file, written in "
            "the format its suffix names, or a folder (--to datasets)."
        ),
    ],
    read: ReadOptions,
    cli: CliOptions,
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="Output format: jsonl, csv, tsv, parquet, or datasets (a save_to_disk folder, "
            "for datasets.load_from_disk). Default: from OUT's suffix.",
        ),
    ] = None,
) -> None:
    """Convert any supported input into zdebias records as JSONL, CSV, TSV or parquet (by
    OUT's suffix), or a Hugging Face datasets folder (written atomically)."""
    from zdebias.data.convert import Conversion

    conversion = Conversion(out, to)
    path = require(input, "INPUT")
    check_output(out, cli, published=conversion.folder, file=not conversion.folder)
    records, report = read_logged(path, read, what="input")
    warn_repeated_ids(records, path)
    n = conversion.write(records, report.labels, overwrite=cli.overwrite)
    result = {"input": path, "out": out, "n_records": n, "read": report.summary()}
    emit(result, cli, f"wrote {counted(n, 'record')} to {out}")


def register(app: typer.Typer) -> None:
    """Add the data commands."""
    app.command("inspect")(inspect)
    app.command("convert")(convert)
