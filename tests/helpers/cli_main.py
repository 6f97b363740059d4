"""Run the ``zdebias`` entry point in-process, as the shell would."""

from __future__ import annotations

from collections.abc import Iterable


def run_main(args: Iterable[object]) -> int:
    """``zdebias ARGS`` through :func:`zdebias.cli.main`: its exit code."""
    from zdebias.cli import main

    try:
        main([str(a) for a in args])
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 1
    return 0
