"""The ``zdebias`` command line. Each area registers its commands from ``zdebias.commands``.

Command modules import only light packages at module level (typer, rich, stdlib): torch and
transformers are imported inside the commands that need them, and :func:`main` imports only
the module of the command it runs, so ``zdebias stats``, ``filter`` and ``inspect`` start fast.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from zdebias.errors import ZdebiasError
from zdebias.settings_cli import Verbosity, command, given_once

#: the module of ``zdebias.commands`` that adds each command: :func:`main` imports only the
#: one it runs (start-up time); ``zdebias -h`` and an unknown command get them all
COMMAND_MODULES = {
    **dict.fromkeys(("inspect", "convert"), "data"),
    **dict.fromkeys(("stats", "filter", "combine", "data-map", "shortcut-split"), "stats"),
    **dict.fromkeys(
        ("train-classifier", "predict", "confidence-filter", "evaluate", "compare"), "classify"
    ),
    **dict.fromkeys(
        ("train-generator", "debias-generator", "sample", "sample-merge", "transform"),
        "generate",
    ),
    "counterfactual": "counterfactual",
    **dict.fromkeys(("run", "report", "demo-data", "stages"), "pipeline"),
}
#: the modules in the order their commands are listed by ``zdebias -h``
MODULES = ("data", "stats", "classify", "generate", "counterfactual", "pipeline")
#: exit status of a command stopped by Ctrl-C (128 + SIGINT)
INTERRUPTED = 130
_RESUME = "run the same command again to resume from its last checkpoint"
#: what a command stopped by Ctrl-C says after ``interrupted; `` (``zdebias run`` says its own)
INTERRUPTED_HINTS = {
    **dict.fromkeys(
        ("train-classifier", "train-generator", "debias-generator", "counterfactual train"),
        _RESUME,
    ),
    "sample": "run the same command again to resume from its last shard",
    **dict.fromkeys(
        ("filter", "combine"),
        "nothing was written (the output folder is published whole at the end); run the "
        "same command again to start over",
    ),
    "convert": "nothing was written (the output is written whole at the end); run the same "
    "command again to start over",
    "evaluate": "nothing was written (the results are written at the end, each file whole); "
    "run the same command again to start over",
}
#: how a hint of :data:`INTERRUPTED_HINTS` that holds only when nothing was written starts
_NOTHING = "nothing was written"


def _version(value: bool) -> None:
    if value:
        from zdebias import __version__

        typer.echo(f"zdebias {__version__}")
        raise typer.Exit()


@command
def _root(
    verbosity: Verbosity,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """zdebias: measure, filter, generate, counterfactuals, train and evaluate."""


def build_app(modules: Sequence[str] = MODULES) -> typer.Typer:
    """The ``zdebias`` app with the commands of these ``zdebias.commands`` modules."""
    from importlib import import_module

    app = typer.Typer(
        name="zdebias",
        help="Find, remove and prove the removal of dataset shortcuts (spurious correlations).",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_root)
    for name in modules:
        import_module(f"zdebias.commands.{name}").register(app)
    return given_once(app)  # an option given twice is an error, never last-wins


def __getattr__(name: str) -> Any:
    """``zdebias.cli.app``: the app with every command, built on first use."""
    if name == "app":
        globals()["app"] = built = build_app()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _app_for(argv: list[str]) -> typer.Typer:
    """The app with only the command ``argv`` runs, when it names one (the options before
    the command are flags: ``-q``, ``-v``), else with every command."""
    word = next((a for a in argv if not a.startswith("-")), None)
    module = COMMAND_MODULES.get(word or "")
    if module is None or "app" in globals():
        return __getattr__("app")
    return build_app([module])


def fail(message: str, code: int = 2) -> None:
    """Print one clear error line to stderr and exit (no traceback)."""
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(code)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app on ``argv`` (default ``sys.argv[1:]``), turning user-facing
    errors into one line and exit code 2.

    Usage errors (a missing option, a value outside a choice, an unknown option or command)
    are one line too, naming the command whose ``-h`` lists the options.
    """
    from zdebias.commands._cli import legacy_argv

    writers = sys.modules.get("zdebias.data.writers")
    if writers is not None:  # what an earlier command of this process published
        writers.PUBLISHED.clear()
    try:
        args = legacy_argv(sys.argv[1:] if argv is None else argv)
        code = _app_for(args)(
            args=args,
            prog_name="zdebias",
            standalone_mode=False,
        )
    except ZdebiasError as err:
        fail(str(err))
    except Exception as err:
        if type(err).__name__ == "Abort":  # end of input at a prompt
            fail("aborted", code=1)
        if not _is_usage_error(err):
            raise
        ctx = getattr(err, "ctx", None)
        if type(err).__name__ == "NoArgsIsHelpError":  # `zdebias` alone: help, shown already
            raise SystemExit(2) from None
        where = f" (see {ctx.command_path} -h)" if ctx is not None else ""
        fail(" ".join(err.format_message().split()) + where, code=err.exit_code)  # type: ignore[attr-defined]
    if isinstance(code, int) and code:
        if code == INTERRUPTED:  # typer turns Ctrl-C into exit 130, silently
            sys.stderr.write(interrupted_line(args) + "\n")
        raise SystemExit(code)


def interrupted_line(args: Sequence[str]) -> str:
    """What a command stopped by Ctrl-C says: how to resume it, where it can be resumed, or
    that nothing was written, unless it was stopped after putting an output in place (the
    writers list what they renamed into place, :data:`~zdebias.data.writers.PUBLISHED`)."""
    words = [a for a in args if not a.startswith("-")][:2]
    hint = INTERRUPTED_HINTS.get(" ".join(words)) or INTERRUPTED_HINTS.get("".join(words[:1]))
    writers = sys.modules.get("zdebias.data.writers")
    done = [
        p
        for p in (writers.PUBLISHED if writers is not None else ())
        # not the work files (hidden names) nor zdebias's caches
        if not p.name.startswith(".") and not any(q.startswith(".zdebias") for q in p.parts)
    ]
    if hint and hint.startswith(_NOTHING) and done:
        shown = ", ".join(map(str, done[:3])) + (" ..." if len(done) > 3 else "")
        hint = f"{shown} {'was' if len(done) == 1 else 'were'} written (whole) before it stopped"
    return f"interrupted; {hint}" if hint else "interrupted"


def _is_usage_error(err: BaseException) -> bool:
    """Whether ``err`` is the command-line parser's complaint (click's ``ClickException``,
    which typer vendors): it has a message to format and an exit code."""
    return any(c.__name__ == "ClickException" for c in type(err).__mro__) and hasattr(
        err, "format_message"
    )


if __name__ == "__main__":
    main()
