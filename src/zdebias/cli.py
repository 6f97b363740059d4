"""The ``zdebias`` command line. Each area registers its commands from ``zdebias.commands``.

Command modules import only light packages at module level (typer, rich, stdlib): torch and
transformers are imported inside the commands that need them, so ``zdebias stats``, ``filter``
and ``inspect`` start fast.
"""

from __future__ import annotations

import sys

import typer

from zdebias.errors import ZdebiasError

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


@app.callback()
def _root() -> None:
    """zdebias: measure, filter, generate, counterfactuals, train and evaluate."""


_register()


def fail(message: str, code: int = 2) -> None:
    """Print one clear error line to stderr and exit (no traceback)."""
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(code)


def main() -> None:
    """Entry point: run the app, turning user-facing errors into one line and exit code 2."""
    try:
        app()
    except ZdebiasError as err:
        fail(str(err))


if __name__ == "__main__":
    main()
