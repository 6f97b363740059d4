"""``zdebias inspect``: what a dataset holds."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any

import typer

from zdebias.commands._cli import (
    CliOptions,
    InputArg,
    check_output,
    command,
    emit,
    report_skips,
    require,
)
from zdebias.data.options import ReadOptions


def _length_stats(lengths: list[int]) -> dict[str, float]:
    if not lengths:
        return {"min": 0, "mean": 0.0, "median": 0.0, "max": 0}
    ordered = sorted(lengths)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    return {
        "min": ordered[0],
        "mean": round(sum(ordered) / n, 2),
        "median": median,
        "max": ordered[-1],
    }


def inspect_dataset(ds: Any, *, limit: int | None = None) -> dict[str, Any]:
    """Summarise a dataset: format, sizes, label counts, skipped rows, text lengths (words)."""
    labels: Counter[str] = Counter()
    lengths: dict[str, list[int]] = {}
    for i, record in enumerate(ds):
        if limit is not None and i >= limit:
            break
        labels[record.label] += 1
        fields = ("premise", "hypothesis") if record.is_pair else ("text",)
        for fld in fields:
            lengths.setdefault(fld, []).append(len(getattr(record, fld).split()))
    rep = ds.report
    task = ds.task or None
    from zdebias.data.labels import get_task

    names = list(get_task(rep.task).labels) if rep.task != "?" else sorted(labels)
    return {
        "path": rep.path,
        "format": rep.format,
        "task": rep.task,
        "n_examples": rep.n_records,
        "label_counts": {name: labels.get(name, 0) for name in names},
        "n_skipped_unlabelled": rep.n_unlabelled,
        "n_skipped_errors": rep.n_errors,
        "skipped_errors": [str(e) for e in rep.errors[:20]],
        "length_words": {fld: _length_stats(v) for fld, v in lengths.items()},
        **({"task_forced": task.name} if task else {}),
    }


def _inspect_text(info: dict[str, Any]) -> str:
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    buf = StringIO()
    console = Console(file=buf, width=100, soft_wrap=True)
    console.print(f"[bold]{info['path']}[/bold]  format={info['format']}  task={info['task']}")
    console.print(f"examples: {info['n_examples']:,}")
    table = Table("label", "count", "share")
    total = max(info["n_examples"], 1)
    for name, count in info["label_counts"].items():
        table.add_row(name, f"{count:,}", f"{count / total:.1%}")
    console.print(table)
    console.print(
        f"skipped: {info['n_skipped_unlabelled']:,} without gold label, "
        f"{info['n_skipped_errors']:,} bad rows"
    )
    for line in info["skipped_errors"][:5]:
        console.print(f"  {line}", markup=False)
    lengths = Table("field", "min", "mean", "median", "max", title="length (words)")
    for fld, st in info["length_words"].items():
        lengths.add_row(fld, *(str(st[k]) for k in ("min", "mean", "median", "max")))
    console.print(lengths)
    return buf.getvalue().rstrip("\n")


@command
def inspect(input: InputArg, read: ReadOptions, cli: CliOptions) -> None:
    """Show a dataset's format, size, label counts, skipped rows and text lengths."""
    info = inspect_dataset(read.open(require(input, "INPUT")), limit=read.limit)
    emit(info, cli, lambda: _inspect_text(info))


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
    records, report = read.read(path)
    n = write_records(records, out)
    report_skips(report)
    result = {"input": path, "out": out, "n_records": n, "read": report.summary()}
    emit(result, cli, f"wrote {n:,} records to {out}")


def register(app: typer.Typer) -> None:
    """Add the data commands."""
    app.command("inspect")(inspect)
    app.command("convert")(convert)
