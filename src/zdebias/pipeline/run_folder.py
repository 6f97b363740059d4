"""The run folder: its layout, the lock a run holds on it, and publishing a finished stage.

Layout of a run folder::

    RUN_DIR/
      .zdebias-output.json   the ownership marker: kind "run", the recipe's name
      manifest.json          versions, seeds, resolved config, per-stage status, timings, rows
      config.yaml            the resolved recipe
      STAGE/                 one folder per finished stage, with its outputs and
        .zdebias-done.json   the done-marker: hash of settings + inputs, output digests, rows
      STAGE.partial/         the work folder of a stage that is running or was interrupted
        .zdebias-attempt.json  the hash of the attempt (a resumed one must have the same)
      report.html            written by ``zdebias report`` (and at the end of ``zdebias run``)

Only one run uses a folder at a time (:func:`locked`), and a run never mixes its files into a
folder that is not a run of the same recipe (:func:`check_run_dir`; the folder's ownership
marker, :mod:`zdebias.data.ownership`, names the recipe).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from zdebias.data.ownership import MARKER as OWNER
from zdebias.data.ownership import check_ours, foreign, owner_of
from zdebias.data.writers import claim
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


def check_run_dir(folder: Path, recipe: str, extends: Sequence[str] = ()) -> None:
    """The run folder is new, empty, or a run of the recipe named ``recipe`` or of one it
    ``extends`` (its ownership marker says so): a run never mixes its files into a foreign
    folder, another zdebias output or a run of an unrelated recipe. A folder without the
    marker is refused, even one whose manifest names the recipe (a run folder of zdebias 0.2,
    or a user's folder: its files cannot tell); the refusal says how to mark it to continue."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder} is a file; choose a folder for the run (--out)")
    owner = owner_of(folder)
    if owner is None:
        manifest = read_json(folder / MANIFEST)
        named = manifest.get("name") if isinstance(manifest, dict) else None
        if isinstance(named, str) and named in (recipe, *extends) and foreign(folder):
            raise ConfigError(
                f"{folder} holds files zdebias did not write; choose a new --out or empty it "
                f"(if zdebias 0.2 wrote this run of {named!r} and it holds only the run's "
                f'files, continue it by writing {{"kind": "run", "recipe": "{named}"}} '
                f"into {folder / OWNER})"
            )
        check_ours(folder)
        return
    kind = owner.get("kind", "output")
    if kind != "run":
        raise ConfigError(
            f"{folder} holds a zdebias {kind} folder, not a run; choose a new --out for the run"
        )
    if owner.get("recipe") != recipe and owner.get("recipe") not in extends:
        also = f" (nor of {', '.join(map(repr, extends))}, which it extends)" if extends else ""
        raise ConfigError(
            f"{folder} holds a run of recipe {owner.get('recipe')!r}, not {recipe!r}{also}; "
            "choose a new --out, or list that recipe under the recipe's `extends`"
        )


def claim_run_dir(folder: Path, recipe: str) -> None:
    """Create the run folder (checked by :func:`check_run_dir`) and mark it as this recipe's."""
    claim(folder, "run", recipe=recipe)


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
