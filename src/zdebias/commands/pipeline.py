"""``zdebias run`` (recipes), ``zdebias report``, ``zdebias demo-data`` and ``zdebias stages``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from zdebias.commands._cli import check_output, emit, stdout_to_stderr
from zdebias.data.demo import DemoDataSettings
from zdebias.errors import ConfigError
from zdebias.pipeline.settings import RunSettings
from zdebias.report.text import interrupted_text, plan_text, stages_text
from zdebias.settings_cli import CliOptions, command


@command
def run(
    recipe: Annotated[str, typer.Argument(help="Recipe YAML file, e.g. configs/demo.yaml.")],
    settings: RunSettings,
    cli: CliOptions,
    overrides: Annotated[
        list[str] | None,
        typer.Argument(
            help="Settings to override, KEY=VALUE with dotted keys, e.g. seed=3 "
            "stages.samples.n=5000 data.train=snli_train.jsonl"
        ),
    ] = None,
) -> None:
    """Run a recipe: skip finished stages, redo changed ones, resume an interrupted run."""
    from rich.console import Console

    from zdebias.pipeline.runner import open_run

    # with --json, stdout carries only the final JSON; the progress text goes to stderr; the
    # libraries' output goes to stderr always (stdout_to_stderr below)
    out = sys.stderr if cli.json_out else sys.stdout
    console = Console(file=out, highlight=False, soft_wrap=True)
    runner = open_run(recipe, overrides or [], settings, progress=cli.progress, console=console)
    if settings.dry_run:
        plan = runner.plan()
        typer.echo(plan_text(recipe, runner.run_dir, runner.recipe.to_dict(), plan))
        if problems := runner.problems(plan):  # printed as one line, exit 2
            raise ConfigError("; ".join(problems))
        return
    console.print(f"[bold]zdebias run[/bold] {recipe} → {runner.run_dir}")
    try:
        with stdout_to_stderr():
            manifest = runner.run()  # SIGTERM interrupts it as Ctrl-C does
    except KeyboardInterrupt:
        sys.stderr.write(interrupted_text(runner.run_dir))
        raise SystemExit(130) from None
    console.print(f"[green]done[/green] in {manifest['seconds']:.1f} s")
    if settings.report:
        from zdebias.report.summary import finish_run_report

        console.print(f"report: {finish_run_report(console, runner.run_dir)}")
    if cli.json_out:
        emit(runner.manifest.brief(), cli)


@command
def report(
    run_dir: Annotated[
        str,
        typer.Argument(
            help="A run folder (manifest.json), a filter or combine output folder, a stats "
            "JSON file (zdebias stats --out FILE) or an evaluate results file (zdebias "
            "evaluate --out FILE)."
        ),
    ],
    cli: CliOptions,
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            "-o",
            help="HTML file (default DIR/report.html; beside a stats or results file "
            "NAME.html). An existing one is replaced only with --overwrite.",
        ),
    ] = None,
) -> None:
    """Write one self-contained HTML report of a run, a filter / combine result, a stats file
    or an evaluate results file, from its saved files."""
    from zdebias.report.results import default_out, result_kind, write_result_report

    # the usual overwrite rules, for the default file too: an earlier report (one `zdebias
    # run` wrote included) is replaced only with --overwrite
    target = Path(out) if out is not None else default_out(run_dir, result_kind(run_dir))
    check_output(target, cli, file=True)
    path = write_result_report(run_dir, target)
    emit({"report": str(path)}, cli, str(path))


@command
def demo_data(
    out_dir: Annotated[str, typer.Argument(help="Folder for train/dev/test.jsonl.")],
    settings: DemoDataSettings,
    cli: CliOptions,
) -> None:
    """Write the built-in synthetic NLI corpus (planted artifacts; artifact-free test split)."""
    from zdebias.data.demo import write_demo_corpus
    from zdebias.data.writers import publish_folder

    check_output(out_dir, cli, published=True)
    info = publish_folder(
        out_dir, lambda work: write_demo_corpus(work, settings), overwrite=cli.overwrite
    )
    sizes = ", ".join(f"{k} {v:,}" for k, v in info["sizes"].items())
    emit({"out": out_dir, **info}, cli, f"wrote {out_dir}: {sizes}")


@command
def stages(cli: CliOptions) -> None:
    """List the stage kinds a recipe can use, with their outputs and settings."""
    from zdebias.pipeline.catalogue import describe_stages

    kinds = describe_stages()
    emit(kinds, cli, lambda: stages_text(kinds))


def register(app: typer.Typer) -> None:
    """Add this area's commands to the app."""
    app.command("run")(run)
    app.command("report")(report)
    app.command("demo-data")(demo_data)
    app.command("stages")(stages)


__all__ = ["register"]
