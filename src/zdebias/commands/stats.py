"""``zdebias stats``, ``filter``, ``combine``, ``shortcut-split``: measure, remove and split
by shortcuts.

Each maps its options onto one operation of :mod:`zdebias.stats.execution.operations`, which decides
how to run. Only typer, rich, pydantic and the standard library load at start-up; numpy,
scipy, scikit-learn and the plotting libraries are imported inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from zdebias.commands._cli import check_output, emit, require
from zdebias.data.options import OutputOptions, ReadOptions, counted
from zdebias.errors import ConfigError
from zdebias.report.text import (
    cells_text,
    combine_text,
    filter_text,
    shortcut_split_text,
    stats_text,
)
from zdebias.settings_cli import CliOptions, InputArg, command
from zdebias.stats.settings import (
    CombineSettings,
    FilterSettings,
    ShortcutSplitSettings,
    StatsSettings,
)

OutDir = Annotated[Path, typer.Option("--out", help="Output folder.")]


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
    cells: Annotated[
        str | None,
        typer.Option(
            "--cells",
            help="Write the shortcut-breaking cells here (JSON: each significant feature × "
            "each label it does not favour, with the rows Z-Aug needs there) and print them.",
        ),
    ] = None,
) -> None:
    """z-statistics of every feature and label; the top features per label (GD-NLI Table 12)."""
    from zdebias.classify.hypo_only import apply_hypo_only_model
    from zdebias.data.writers import write_json
    from zdebias.report.plots import gardner_files, plot_paths
    from zdebias.stats.execution.operations import measure_file
    from zdebias.stats.execution.source import FileInput

    path = require(input, "INPUT")
    targets: list[str | Path] = [out] if out else []
    targets += (list(plot_paths(plot)) if plot else []) + ([cells] if cells else [])
    for target in targets:
        check_output(target, cli, file=True)
    m, report = measure_file(
        FileInput(path, read), settings, hypo_only=apply_hypo_only_model, progress=cli.progress
    )
    unknown = [name for name, cells in report["tracked"].items() if cells is None]
    if unknown:  # a typo would print nothing and store null
        example = next((rows[0]["feature"] for rows in report["top"].values() if rows), None)
        raise ConfigError(
            f"{path}: --track {unknown[0]!r}: no such feature in these rows"
            + (
                f" ({len(unknown)} of {len(report['tracked'])} tracked names are not)"
                if len(unknown) > 1
                else ""
            )
            + (f"; features are named as in the top table, e.g. {example!r}" if example else "")
        )
    if plot:
        z_c, title = report["z_critical"], Path(path).name
        report["plot"] = gardner_files(m, plot, z_c=z_c, min_n=settings.min_n, title=title)
    if out:
        # the file also holds the Gardner points, so `zdebias report FILE` can draw the plot
        write_json({**report, "gardner": m.gardner_points(settings.min_n)}, out)
    shown = ""
    if cells:
        from zdebias.stats.cells import cells_of, cells_report

        found = cells_report(cells_of(m), threshold=report["z_critical"], labels=m.labels)
        write_json(found, cells)
        found["path"] = cells
        report["cells"] = {k: v for k, v in found.items() if k != "cells"}
        shown = "\n" + cells_text(found, settings.top)
    emit(report, cli, lambda: stats_text(report, settings.top) + shown)


@command
def filter_command(
    input: InputArg,
    out: OutDir,
    settings: FilterSettings,
    read: ReadOptions,
    output: OutputOptions,
    cli: CliOptions,
    seed_data: Annotated[
        str | None,
        typer.Option("--seed-data", help="Seed dataset: conditional z-filtering Z(D | seed)."),
    ] = None,
) -> None:
    """Filter a dataset: z-filtering (GD-NLI Algorithm 1), a cartography region (--method
    cartography --dynamics MODEL_DIR) or AFLite (--method aflite): DIR/kept.jsonl,
    rejected.jsonl, summary.json."""
    from zdebias.classify.embed import embed_records
    from zdebias.classify.hypo_only import apply_hypo_only_model
    from zdebias.stats.execution.operations import filter_file
    from zdebias.stats.execution.source import FileInput

    path = require(input, "INPUT")
    check_output(out, cli, published=True)
    summary = filter_file(
        FileInput(path, read),
        out,
        settings,
        seed=FileInput.seed_of(seed_data, read) if seed_data else None,
        hypo_only=apply_hypo_only_model,
        embed=embed_records,
        overwrite=cli.overwrite,
        progress=cli.progress,
        output=output,
    )
    emit(summary, cli, lambda: filter_text(summary, out))


@command
def combine_command(
    original: Annotated[str, typer.Option("--original", help="Original dataset D0.")],
    generated: Annotated[str, typer.Option("--generated", help="Generated dataset D_G.")],
    out: OutDir,
    settings: CombineSettings,
    read: ReadOptions,
    output: OutputOptions,
    cli: CliOptions,
) -> None:
    """Build a debiased dataset from original + generated data: DIR/combined.jsonl,
    rejected.jsonl, summary.json (every record tagged meta.type = original | generated)."""
    from zdebias.classify.hypo_only import apply_hypo_only_model
    from zdebias.stats.execution.operations import combine_files
    from zdebias.stats.execution.source import FileInput

    check_output(out, cli, published=True)
    summary = combine_files(
        FileInput(original, read, what="original", min_records=1),
        FileInput(generated, read, what="generated", min_records=1),
        out,
        settings,
        hypo_only=apply_hypo_only_model,
        overwrite=cli.overwrite,
        progress=cli.progress,
        output=output,
    )
    emit(summary, cli, lambda: combine_text(summary, out))


@command
def shortcut_split_command(
    train: Annotated[
        str, typer.Option("--train", help="Training set: its significant features decide.")
    ],
    test: Annotated[str, typer.Option("--test", help="Labelled test set to split.")],
    out: OutDir,
    settings: ShortcutSplitSettings,
    compare_with: Annotated[
        str | None,
        typer.Option(
            "--compare-with",
            help="Another split's folder of the same test set: summary.json's agreement "
            "gives the share of rows in the same slice and Cohen's kappa.",
        ),
    ] = None,
    *,
    read: ReadOptions,
    cli: CliOptions,
) -> None:
    """Split a test set by the training set's shortcuts (its significant features):
    DIR/aligned.jsonl (they point to the gold label), conflicting.jsonl (to another label),
    free.jsonl (none), summary.json."""
    from zdebias.classify.hypo_only import apply_hypo_only_model
    from zdebias.stats.execution.operations import shortcut_split_file
    from zdebias.stats.execution.source import FileInput

    check_output(out, cli, published=True)
    summary = shortcut_split_file(
        FileInput(train, read, what="training"),
        FileInput(test, read, what="test", min_records=1),
        out,
        settings,
        hypo_only=apply_hypo_only_model,
        overwrite=cli.overwrite,
        progress=cli.progress,
        compare_with=compare_with,
    )
    emit(summary, cli, lambda: shortcut_split_text(summary, out))


@command
def data_map(
    dynamics: Annotated[
        str, typer.Argument(help="A classifier folder (its training_dynamics.jsonl) or that file.")
    ],
    out: Annotated[str, typer.Option("--out", help="Write the data map as OUT.png and OUT.html.")],
    cli: CliOptions,
) -> None:
    """The data map of a classifier's training (dataset cartography): variability × confidence,
    coloured by correctness."""
    from zdebias.report.plots import data_map_files, plot_paths

    for target in plot_paths(out):
        check_output(target, cli, file=True)
    done = data_map_files(dynamics, out)
    emit(
        done,
        cli,
        lambda: (
            f"data map of {counted(done['n_plotted'], 'example')}: {done['png']}, {done['html']}"
        ),
    )


def register(app: typer.Typer) -> None:
    """Add the stats commands."""
    app.command("stats")(stats)
    app.command("filter")(filter_command)
    app.command("combine")(combine_command)
    app.command("data-map")(data_map)
    app.command("shortcut-split")(shortcut_split_command)
