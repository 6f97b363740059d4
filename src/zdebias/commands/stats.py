"""``zdebias stats``, ``filter``, ``combine``: measure and remove shortcuts.

Only typer, rich, pydantic and the standard library load at start-up; numpy, scipy,
scikit-learn and the plotting libraries are imported inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from zdebias.commands._cli import CliOptions, InputArg, command, emit, report_skips, require
from zdebias.data.options import ReadOptions
from zdebias.stats.settings import CombineSettings, StatsSettings, ZFilterSettings

OutDir = Annotated[Path, typer.Option("--out", help="Output folder.")]


def _read(path: str, read: ReadOptions, *, task: Any = None) -> tuple[list[Any], Any]:
    records, report = read.read(path, task=task)
    report_skips(report)
    return records, report


def _check_features(settings: Any) -> None:
    """Fail on a typo in ``--features`` before any data is read."""
    from zdebias.features.registry import get_feature

    for name in settings.features or []:
        get_feature(name)


def _stats_text(report: dict[str, Any], top: int) -> str:
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    buf = StringIO()
    console = Console(file=buf, width=100, soft_wrap=True)
    console.print(
        f"examples: {report['n_examples']:,}   features: {report['n_features']:,}   "
        f"z_critical (α={report['alpha']}, Bonferroni): {report['z_critical']:.2f}   "
        f"significant features: {report['n_significant']:,}"
    )
    for label, rows in report["top"].items():
        table = Table("feature", "z", "n", "p̂", title=f"{label} (top {top})", title_justify="left")
        for row in rows:
            table.add_row(row["feature"], f"{row['z']:.1f}", f"{row['n']:,}", f"{row['p']:.3f}")
        console.print(table)
    if "plot" in report:
        p = report["plot"]
        console.print(
            f"Gardner plot: {p['png']}, {p['html']} ({p['n_above_curve']:,} of "
            f"{p['n_points']:,} plotted features above the curve)",
            markup=False,
            highlight=False,
        )
    return buf.getvalue().rstrip("\n")


@command
def stats(
    input: InputArg,
    settings: StatsSettings,
    read: ReadOptions,
    cli: CliOptions,
    out: Annotated[
        str | None, typer.Option("--out", help="Also write the report as JSON here.")
    ] = None,
    plot: Annotated[
        str | None,
        typer.Option("--plot", help="Write the Gardner plot as OUT.png and OUT.html."),
    ] = None,
) -> None:
    """z-statistics of every feature and label; the top features per label (GD-NLI Table 12)."""
    from zdebias.data.writers import write_json
    from zdebias.stats.measure import measure

    path = require(input, "INPUT")
    _check_features(settings)
    records, read_report = _read(path, read)
    if not records:
        from zdebias.errors import DataError

        raise DataError("no labelled records to measure", path=path)
    m = measure(records, settings, labels=read_report.labels, progress=cli.progress)
    report = {
        "path": path,
        **m.report,
        "features": settings.features or "default",
        "read": read_report.summary(),
    }
    if plot:
        from zdebias.report.plots import gardner_plot, plot_paths

        png, html = plot_paths(plot)
        report["plot"] = gardner_plot(
            m.names,
            m.labels,
            m.z,
            m.n,
            m.p_hat,
            z_c=report["z_critical"],
            png=png,
            html=html,
            min_n=settings.min_n,
            title=Path(path).name,
        )
    if out:
        write_json(report, out)
    emit(report, cli, lambda: _stats_text(report, settings.top))


def _filter_text(summary: dict[str, Any], out: Path) -> str:
    lines = [
        f"input {summary['n_input']:,}"
        + (f" + seed {summary['n_seed']:,}" if summary["n_seed"] else "")
        + f": kept {summary['n_kept']:,}, rejected {summary['n_rejected']:,} "
        f"({summary['n_batches']} batches of {summary['batch_size']})",
    ]
    for label in summary["labels"]:
        before = summary["top_z_before"].get(label)
        after = summary["top_z_after"].get(label)
        fmt = lambda r: f"{r['feature']} z={r['z']:.1f}" if r else "-"  # noqa: E731
        lines.append(f"  {label}: top z {fmt(before)}  →  {fmt(after)}")
    lines.append(f"wrote {out / 'kept.jsonl'}, {out / 'rejected.jsonl'}, {out / 'summary.json'}")
    return "\n".join(lines)


@command
def filter_command(
    input: InputArg,
    out: OutDir,
    settings: ZFilterSettings,
    read: ReadOptions,
    cli: CliOptions,
    seed_data: Annotated[
        str | None,
        typer.Option("--seed-data", help="Seed dataset: conditional z-filtering Z(D | seed)."),
    ] = None,
) -> None:
    """z-filter a dataset (GD-NLI Algorithm 1): DIR/kept.jsonl, rejected.jsonl, summary.json."""
    from zdebias.data.writers import publish_files
    from zdebias.stats.zfilter import z_filter

    path = require(input, "INPUT")
    _check_features(settings)
    records, report = _read(path, read)
    seed_records: list[Any] = []
    seed_report = None
    if seed_data:
        seed_read = ReadOptions(task=read.task, on_error=read.on_error)
        seed_records, seed = _read(seed_data, seed_read, task=report.task)
        seed_report = seed.summary()
    labels = report.labels if report.task != "?" else None
    result = z_filter(
        records, settings, seed_records=seed_records, labels=labels, progress=cli.progress
    )
    summary = {
        "path": path,
        "seed_data": seed_data,
        **result.summary,
        "read": report.summary(),
        "read_seed": seed_report,
    }
    publish_files(
        out,
        {"kept.jsonl": result.kept, "rejected.jsonl": result.rejected, "summary.json": summary},
        overwrite=cli.overwrite,
    )
    emit(summary, cli, lambda: _filter_text(summary, out))


def _combine_text(s: dict[str, Any], out: Path) -> str:
    lines = [
        f"{s['recipe']}: original {s['n_original']:,} → {s['n_output_original']:,}, generated "
        f"{s['n_generated']:,} → {s['n_output_generated']:,}; output {s['n_output']:,}, "
        f"rejected {s['n_rejected']:,}"
    ]
    for label, row in s["top_z_output"].items():
        if row:
            lines.append(f"  {label}: top z {row['feature']} z={row['z']:.1f}")
    files = ", ".join(
        str(out / name) for name in ("combined.jsonl", "rejected.jsonl", "summary.json")
    )
    lines.append(f"wrote {files}")
    return "\n".join(lines)


@command
def combine_command(
    original: Annotated[str, typer.Option("--original", help="Original dataset D0.")],
    generated: Annotated[str, typer.Option("--generated", help="Generated dataset D_G.")],
    out: OutDir,
    settings: CombineSettings,
    read: ReadOptions,
    cli: CliOptions,
) -> None:
    """Build a debiased dataset from original + generated data: DIR/combined.jsonl,
    rejected.jsonl, summary.json (every record tagged meta.type = original | generated)."""
    from zdebias.data.writers import publish_files
    from zdebias.stats.recipes import combine

    _check_features(settings)
    orig, orig_report = _read(original, read)
    gen, gen_report = _read(generated, read, task=orig_report.task)
    labels = orig_report.labels if orig_report.task != "?" else None
    result = combine(
        settings.recipe,
        orig,
        gen,
        ZFilterSettings.take(settings),
        labels=labels,
        progress=cli.progress,
    )
    summary = {
        **result.summary,
        "original": original,
        "generated": generated,
        "read_original": orig_report.summary(),
        "read_generated": gen_report.summary(),
    }
    files = {"combined.jsonl": result.records, "rejected.jsonl": result.rejected}
    publish_files(out, {**files, "summary.json": summary}, overwrite=cli.overwrite)
    emit(summary, cli, lambda: _combine_text(summary, out))


def register(app: typer.Typer) -> None:
    """Add the stats commands."""
    app.command("stats")(stats)
    app.command("filter")(filter_command)
    app.command("combine")(combine_command)
