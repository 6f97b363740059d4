"""What the commands share: output policy, printing, legacy spellings.

The options themselves are generated from settings objects by :mod:`zdebias.settings_cli`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from zdebias.errors import ConfigError, ZdebiasError
from zdebias.settings_cli import CliOptions

log = logging.getLogger("zdebias")


def legacy_argv(argv: list[str]) -> list[str]:
    """Rewrite 0.1 spellings that a flag cannot express (kept one release, with a warning).

    ``stats --json FILE`` wrote the report to FILE; ``--json`` is now a flag (JSON on
    stdout) and the file is ``--out FILE``; ``--json -`` is plain ``--json``.
    Also ``sample merge FOLDER`` is the command ``sample-merge FOLDER``.
    """
    first = next((i for i, a in enumerate(argv) if not a.startswith("-")), len(argv))
    if argv[first : first + 2] == ["sample", "merge"]:  # -q/-v before it take no value
        return [*argv[:first], "sample-merge", *argv[first + 2 :]]
    words = [a for a in argv if not a.startswith("-")]
    if not words or words[0] != "stats" or "--json" not in argv:
        return argv
    out = list(argv)
    i = out.index("--json")
    value = out[i + 1] if i + 1 < len(out) else None
    others = [w for w in words[1:] if w != value]  # the input, when given elsewhere
    if value is not None and value.endswith(".json") and not others and Path(value).is_file():
        return argv  # `stats --json data.json`: the JSON file is the input
    if value == "-":
        del out[i + 1]
        log.warning("--json - is deprecated; --json alone prints the JSON on stdout")
    elif value is not None and value.endswith(".json"):
        if any(a == "--out" or a.startswith("--out=") for a in argv):
            raise ConfigError(
                f"--json {value} (the old spelling of --out {value}) and --out are both given; "
                "give only --out"
            )
        out[i] = "--out"
        log.warning("--json FILE is deprecated; use --out FILE (--json prints JSON on stdout)")
    return out


def stdout_to_stderr() -> Any:
    """Library chatter (HF Trainer logs, progress) goes to stderr: stdout is the result."""
    import contextlib
    import sys

    return contextlib.redirect_stdout(sys.stderr)


def require(value: str | None, what: str, old: str | None = None) -> str:
    """A required positional input, or a clear error naming it."""
    if value:
        return value
    raise ConfigError(f"missing {what}" + (f" (or the deprecated {old})" if old else ""))


def check_output(
    out: str | Path, cli: CliOptions, *, published: bool = False, file: bool = False
) -> Path:
    """The one overwrite policy, checked before any work: a non-empty output is refused
    unless ``--overwrite``, a folder zdebias did not write (``data.ownership``) always; a
    symlink, the current folder, an input or a folder holding an input never
    (``data.writers``). ``published``: a folder :func:`publish_files` will write. ``file``:
    a single output file, locked (:func:`~zdebias.data.locks.output_lock`) from this check
    until the command ends, so a second command writing it fails at once."""
    from zdebias.data.locks import output_lock
    from zdebias.data.writers import check_out_dir, check_output_folder
    from zdebias.settings_cli import hold_for_command

    if file:
        hold_for_command(output_lock(out))
    check_out_dir(out, overwrite=cli.overwrite, inputs=_given_paths(out))
    if published:
        check_output_folder(out, overwrite=cli.overwrite)
    return Path(out)


def _given_paths(out: str | Path) -> list[str]:
    """The existing paths given to the running command (its inputs, models, seed data), the
    output itself once: ``--out`` may not replace one of them or a folder holding one."""
    from zdebias.data.files import split_path_and_split
    from zdebias.data.options import split_input
    from zdebias.settings_cli import given_values

    values = [v for v in given_values() if isinstance(v, str | Path)]
    paths: list[str] = []
    skipped_out = False
    for value in values:
        try:  # PATH[::SPLIT][::KEY=VALUE...]; a file named a::b.jsonl as it is
            text = str(split_path_and_split(split_input(value)[0])[0])
        except ZdebiasError:
            text = str(value).split("::")[0]
        if not text or text.startswith("hf:") or not Path(text).exists():
            continue
        if not skipped_out and os.path.abspath(text) == os.path.abspath(out):
            skipped_out = True  # the --out option itself
            continue
        paths.append(text)
    return paths


def emit(result: Any, cli: CliOptions, text: Callable[[], str] | str | None = None) -> None:
    """Print the result: JSON on stdout with ``--json``, else the human-readable text.
    Under a launcher (``torchrun``, ``accelerate launch``) only the main process prints."""
    import json

    from zdebias.models.distributed import is_main_process

    if not is_main_process():
        return

    if cli.json_out or text is None:
        typer.echo(json.dumps(result, indent=2, ensure_ascii=False, default=str))
        return
    typer.echo(text() if callable(text) else text)


__all__ = [
    "check_output",
    "emit",
    "require",
    "stdout_to_stderr",
]
