"""``zdebias run`` (recipes), ``zdebias report``, ``zdebias demo-data`` and ``zdebias stages``."""

from __future__ import annotations

import signal
import sys
from typing import Annotated, Any

import typer

from zdebias.commands._cli import check_output, emit
from zdebias.pipeline.demo_data import DemoDataSettings
from zdebias.pipeline.runner import RunSettings
from zdebias.settings_cli import CliOptions, command


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


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

    from zdebias.pipeline.config import dump_yaml
    from zdebias.pipeline.loader import load_recipe
    from zdebias.pipeline.run_folder import run_dir_for
    from zdebias.pipeline.runner import Runner

    # with --json, stdout carries only the final JSON; the progress text goes to stderr
    console = Console(stderr=cli.json_out, highlight=False, soft_wrap=True)
    recipe_obj = load_recipe(recipe, overrides or [])
    run_dir = run_dir_for(recipe_obj, settings.out)
    runner = Runner(
        recipe_obj,
        run_dir,
        force=settings.forced,
        progress=cli.progress,
        console=console,
        recipe_path=recipe,
        overrides=overrides or [],
    )
    if settings.dry_run:
        typer.echo(f"# recipe {recipe} → run folder {run_dir}")
        typer.echo(dump_yaml(recipe_obj.to_dict()).rstrip())
        typer.echo("# plan")
        for row in runner.plan():
            typer.echo(f"#   {row['name']:<24} {row['stage']:<26} {row['action']}")
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        console.print(f"[bold]zdebias run[/bold] {recipe} → {run_dir}")
        manifest = runner.run()
    except KeyboardInterrupt:
        sys.stderr.write(
            f"interrupted; finished stages are kept in {run_dir}. Run the same command again "
            "to resume.\n"
        )
        raise SystemExit(130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    console.print(f"[green]done[/green] in {manifest['seconds']:.1f} s")
    if settings.report:
        from zdebias.report.html import write_report
        from zdebias.report.summary import print_run_summary

        path = write_report(run_dir)
        print_run_summary(console, run_dir)
        console.print(f"report: {path}")
    if cli.json_out:
        stages = [{k: v for k, v in e.items() if k != "settings"} for e in manifest["stages"]]
        emit({"run_dir": str(run_dir), "seconds": manifest["seconds"], "stages": stages}, cli)


@command
def report(
    run_dir: Annotated[
        str,
        typer.Argument(
            help="A run folder (manifest.json), a filter or combine output folder, or a stats "
            "JSON file (zdebias stats --out FILE)."
        ),
    ],
    cli: CliOptions,
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            "-o",
            help="HTML file (default DIR/report.html; beside a stats file NAME.html).",
        ),
    ] = None,
) -> None:
    """Write one self-contained HTML report of a run, a filter / combine result or a stats
    file, from its saved files."""
    from zdebias.report.results import write_result_report

    if out is not None:  # an explicit file: the usual overwrite rules (the default is derived)
        check_output(out, cli)
    path = write_result_report(run_dir, out)
    emit({"report": str(path)}, cli, str(path))


@command
def demo_data(
    out_dir: Annotated[str, typer.Argument(help="Folder for train/dev/test.jsonl.")],
    settings: DemoDataSettings,
    cli: CliOptions,
) -> None:
    """Write the built-in synthetic NLI corpus (planted artifacts; artifact-free test split)."""
    from zdebias.data.writers import publish_folder
    from zdebias.pipeline.demo_data import write_demo_corpus

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
    from zdebias.report.text import stages_text

    kinds = describe_stages()
    emit(kinds, cli, lambda: stages_text(kinds))


def register(app: typer.Typer) -> None:
    """Add this area's commands to the app."""
    app.command("run")(run)
    app.command("report")(report)
    app.command("demo-data")(demo_data)
    app.command("stages")(stages)


__all__ = ["register"]
