"""The ``zdebias`` command line. Each area registers its commands from ``zdebias.commands``.

Command modules import only light packages at module level (typer, rich, stdlib): torch and
transformers are imported inside the commands that need them, so ``zdebias stats``, ``filter``
and ``inspect`` start fast.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from zdebias.errors import ZdebiasError
from zdebias.settings_cli import Verbosity, command

app = typer.Typer(
    name="zdebias",
    help="Find, remove and prove the removal of dataset shortcuts (spurious correlations).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _register() -> None:
    from zdebias.commands import (
        classify,
        counterfactual,
        data,
        generate,
        pipeline,
        stats,
    )

    for module in (data, stats, classify, generate, counterfactual, pipeline):
        module.register(app)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"zdebias {version('zdebias')}")
        raise typer.Exit()


@app.callback()
@command
def _root(
    verbosity: Verbosity,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """zdebias: measure, filter, generate, counterfactuals, train and evaluate."""


_register()


def fail(message: str, code: int = 2) -> None:
    """Print one clear error line to stderr and exit (no traceback)."""
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(code)


def main() -> None:
    """Entry point: run the app, turning user-facing errors into one line and exit code 2."""
    from zdebias.commands._cli import legacy_argv

    try:
        app(args=legacy_argv(sys.argv[1:]))
    except ZdebiasError as err:
        fail(str(err))


if __name__ == "__main__":
    main()
