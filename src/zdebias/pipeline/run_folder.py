"""The run folder: its layout, the lock a run holds on it, and publishing a finished stage.

Layout of a run folder::

    RUN_DIR/
      manifest.json          versions, seeds, resolved config, per-stage status, timings, rows
      config.yaml            the resolved recipe
      STAGE/                 one folder per finished stage, with its outputs and
        .zdebias-done.json   the done-marker: hash of settings + inputs, output digests, rows
      STAGE.partial/         the work folder of a stage that is running or was interrupted
        .zdebias-attempt.json  the hash of the attempt (a resumed one must have the same)
      report.html            written by ``zdebias report`` (and at the end of ``zdebias run``)

Only one run uses a folder at a time (:func:`locked`), and a run never mixes its files into a
folder that is not a run folder (:func:`check_run_dir`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from zdebias.errors import ConfigError
from zdebias.pipeline.config import Recipe

MANIFEST = "manifest.json"
CONFIG = "config.yaml"
MARKER = ".zdebias-done.json"
ATTEMPT = ".zdebias-attempt.json"
#: the content digests of files the run has read, by path, size and mtime
DIGEST_CACHE = ".zdebias-digests.json"
_LOCK = ".zdebias-lock"


def run_dir_for(recipe: Recipe, out: str | None) -> Path:
    """The run folder: ``--out``, else the recipe's ``out``, else ``runs/NAME``."""
    return Path(out or recipe.out or f"runs/{recipe.name}")


def check_run_dir(folder: Path) -> None:
    """The run folder is new, empty, or one a run made (manifest or lock): a run never
    mixes its files into a foreign folder."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder} is a file; choose a folder for the run (--out)")
    own = (folder / MANIFEST).is_file() or (folder / _LOCK).is_file()
    if folder.is_dir() and not own and any(folder.iterdir()):
        raise ConfigError(
            f"{folder}: not a run folder (no {MANIFEST}) and not empty; choose a new --out"
        )


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold the run folder's lock (created with the folder); another run fails at once."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    fh = (folder / _LOCK).open("w")
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ConfigError(f"{folder}: another zdebias run is using this folder") from None
        yield
    finally:
        fh.close()


def promote(partial: Path, final: Path) -> None:
    """Rename a finished stage's work folder into place, replacing an older result."""
    if final.exists():
        shutil.rmtree(final)
    os.replace(partial, final)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON file a run wrote (manifest, marker, attempt), or None if missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
