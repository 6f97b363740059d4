"""``zdebias stats``, ``filter``, ``combine``: measure and remove shortcuts.

Only typer, rich, pydantic and the standard library load at start-up; numpy, scipy,
scikit-learn and the plotting libraries are imported inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from zdebias.commands._cli import check_output, emit, log, read_input, require
from zdebias.data.options import ReadOptions
from zdebias.report.text import combine_text, filter_text, stats_text
from zdebias.settings_cli import CliOptions, InputArg, command
from zdebias.stats.settings import CombineSettings, StatsSettings, ZFilterSettings

OutDir = Annotated[Path, typer.Option("--out", help="Output folder.")]


def _read(
    path: str,
    read: ReadOptions,
    settings: Any,
    *,
    task: Any = None,
    progress: bool = True,
    what: str | None = None,
) -> tuple[list[Any], Any]:
    """Records of ``path`` (skips reported), with a trained hypothesis-only model's
    predictions in ``meta`` when ``--hypo-only-model`` is given. Warns about a single label
    and duplicate ids; the main input (``what="input"``) needs at least 2 records."""
    from zdebias.classify.hypo_only import apply_hypo_only_model
    from zdebias.data.options import dataset_warnings

    records, report = read_input(path, read, task=task, what=what)
    for line in dataset_warnings(records, path, min_records=2 if what == "input" else 1):
        log.warning("%s", line)
    records = apply_hypo_only_model(records, settings, report.labels, progress=progress)
    return records, report


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
    from zdebias.report.plots import plot_paths
    from zdebias.stats.measure import measure

    path = require(input, "INPUT")
    for target in ([out] if out else []) + (list(plot_paths(plot)) if plot else []):
        check_output(target, cli)
    records, read_report = _read(path, read, settings, progress=cli.progress, what="input")
    m = measure(records, settings, labels=read_report.labels, progress=cli.progress)
    report = {
        "path": path,
        **m.report,
        "features": settings.features or "default",
        "read": read_report.summary(),
    }
    if plot:
        from zdebias.report.plots import gardner_plot, gardner_summary

        png, html = plot_paths(plot)
        arrays = (m.names, m.labels, m.z, m.n, m.p_hat)
        z_c = report["z_critical"]
        gardner_plot(
            *arrays, z_c=z_c, png=png, html=html, min_n=settings.min_n, title=Path(path).name
        )
        summary = gardner_summary(*arrays[1:], z_c=z_c, min_n=settings.min_n)
        report["plot"] = {**summary, "png": str(png), "html": str(html)}
    if out:
        # the file also holds the Gardner points, so `zdebias report FILE` can draw the plot
        write_json({**report, "gardner": m.gardner_points(settings.min_n)}, out)
    emit(report, cli, lambda: stats_text(report, settings.top))


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
    from zdebias.features.parallel import resolve_num_proc
    from zdebias.stats.measure import stats_of_kept
    from zdebias.stats.sharded import (
        filter_records,
        filter_sharded,
        kept_summary_of,
        matrix_describes_kept,
        plan_shards,
        writer_size,
    )
    from zdebias.stats.zfilter import z_filter

    path = require(input, "INPUT")
    check_output(out, cli, published=True)
    ranges = plan_shards(path, read, settings, seed_data=seed_data)
    if ranges is not None:  # one large JSONL file: several processes, each reading a part
        summary = filter_sharded(
            path, out, ranges, read, settings, overwrite=cli.overwrite, progress=cli.progress
        )
        emit(summary, cli, lambda: filter_text(summary, out))
        return
    size = writer_size(path, read, settings, seed_data=seed_data)
    if size is not None:  # one process reads and filters, a second one writes
        summary = filter_records(
            path,
            out,
            size,
            read,
            settings,
            lambda: _read(path, read, settings, progress=cli.progress, what="input"),
            overwrite=cli.overwrite,
            progress=cli.progress,
        )
        emit(summary, cli, lambda: filter_text(summary, out))
        return
    records, report = _read(path, read, settings, progress=cli.progress, what="input")
    seed_records: list[Any] = []
    seed_report = None
    if seed_data:
        seed_read = ReadOptions(task=read.task, on_error=read.on_error)
        seed_records, seed = _read(
            seed_data, seed_read, settings, task=report.task, progress=cli.progress, what="seed"
        )
        seed_report = seed.summary()
    labels = report.labels if report.task != "?" else None
    result = z_filter(
        records, settings, seed_records=seed_records, labels=labels, progress=cli.progress
    )
    if not seed_records and matrix_describes_kept(settings):  # from the matrix it has
        of_kept = kept_summary_of(result, records, settings)
    else:  # features extracted again on the kept records
        of_kept = stats_of_kept(result.kept, settings, labels=labels)
    summary = {
        "path": path,
        "seed_data": seed_data,
        **result.summary,
        "stats_of_kept": of_kept,
        "read": report.summary(),
        "read_seed": seed_report,
    }
    publish_files(
        out,
        {"kept.jsonl": result.kept, "rejected.jsonl": result.rejected, "summary.json": summary},
        overwrite=cli.overwrite,
        num_proc=resolve_num_proc(settings.num_proc, len(records)),
    )
    emit(summary, cli, lambda: filter_text(summary, out))


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
    from zdebias.features.parallel import resolve_num_proc
    from zdebias.stats.recipes import combine

    check_output(out, cli, published=True)
    orig, orig_report = _read(original, read, settings, progress=cli.progress, what="original")
    gen, gen_report = _read(
        generated, read, settings, task=orig_report.task, progress=cli.progress, what="generated"
    )
    shared = len({r.id for r in orig}.intersection(r.id for r in gen))
    if shared:
        log.warning(
            "%s and %s share %d ids; the output may repeat them", original, generated, shared
        )
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
    publish_files(
        out,
        {**files, "summary.json": summary},
        overwrite=cli.overwrite,
        num_proc=resolve_num_proc(settings.num_proc, len(result.records)),
    )
    emit(summary, cli, lambda: combine_text(summary, out))


def register(app: typer.Typer) -> None:
    """Add the stats commands."""
    app.command("stats")(stats)
    app.command("filter")(filter_command)
    app.command("combine")(combine_command)
