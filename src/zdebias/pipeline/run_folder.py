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

A stage's folder is the run's, but not every file in it: a stage that is redone replaces
``STAGE/`` only when it holds nothing but what the stage wrote (the done-marker lists those
files, ``written``), as ``--out`` of a command is never a folder holding a user's files. A
user's file there (``RUN/zf/my_analysis.txt``) stops the run before the stage runs, with one
line naming it (:func:`check_stage_folder`); ``STAGE.partial/`` is removed only when it is a
work folder of the run (its markers).
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

    from zdebias.data.locks import open_lock_file

    folder.mkdir(parents=True, exist_ok=True)
    fd = open_lock_file(folder / _LOCK, "the run folder's lock file")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ConfigError(f"{folder}: another zdebias run is using this folder") from None
        yield
    finally:
        os.close(fd)


#: the run's own files in a stage folder, whatever the stage wrote
_RUN_FILES = (MARKER, ATTEMPT, OWNER)
#: how many of a stage folder's foreign files a refusal names
_NAMED = 3


def stage_files(folder: Path) -> list[str]:
    """Every file (and link) under the stage folder ``folder``, relative (``/``-separated),
    sorted; the run's markers left out. What a done-marker lists as ``written``."""
    found = []
    for root, dirs, files in os.walk(folder):
        links = [d for d in dirs if os.path.islink(os.path.join(root, d))]
        for name in (*files, *links):
            rel = Path(os.path.relpath(os.path.join(root, name), folder)).as_posix()
            if rel not in _RUN_FILES:
                found.append(rel)
    return sorted(found)


def foreign_files(folder: Path) -> list[str]:
    """The files in the stage folder ``folder`` that the run did not write: those its
    done-marker does not list (all of them without a marker). A marker of an earlier zdebias
    lists none: there, a file is the stage's when it is one of the stage's declared
    outputs or older than the marker (a stage writes its marker last)."""
    if not folder.is_dir() or folder.is_symlink():
        return []
    present = stage_files(folder)
    marker = read_json(folder / MARKER)
    if not isinstance(marker, dict):
        return present
    written = marker.get("written")
    if isinstance(written, list):
        own = set(written)
        return [rel for rel in present if rel not in own]
    stamp = (folder / MARKER).stat().st_mtime_ns
    outputs = [
        str(info.get("path", "")).rstrip("/")
        for info in (marker.get("outputs") or {}).values()
        if isinstance(info, dict) and info.get("path")
    ]

    def theirs(rel: str) -> bool:
        if any(rel == out or rel.startswith(f"{out}/") for out in outputs):
            return False
        return os.lstat(folder / rel).st_mtime_ns > stamp

    return [rel for rel in present if theirs(rel)]


def check_stage_folder(name: str, final: Path, partial: Path | None = None) -> None:
    """Raise :class:`ConfigError` when redoing stage ``name`` would delete what zdebias did
    not write: a file in its folder ``final`` (:func:`foreign_files`), a file (not a folder)
    at ``final``, or a ``partial`` folder to be removed that is not a work folder of the run."""
    if final.is_symlink() or (final.exists() and not final.is_dir()):
        raise ConfigError(
            f"{final} is not a stage folder of this run (a file or link where stage {name!r} "
            "writes); move it away and run again"
        )
    theirs = foreign_files(final)
    if theirs:
        shown = ", ".join(theirs[:_NAMED]) + (" ..." if len(theirs) > _NAMED else "")
        n = len(theirs)
        raise ConfigError(
            f"{final / theirs[0]}: stage {name!r} is redone, which replaces {final}, but it "
            f"holds {n} file{'s' if n != 1 else ''} zdebias did not write ({shown}); move "
            f"{'it' if n == 1 else 'them'} out of {final} and run again"
        )
    if partial is None or not os.path.lexists(partial):
        return
    ours = partial.is_dir() and not partial.is_symlink()
    ours = ours and (
        owner_of(partial) is not None or (partial / ATTEMPT).is_file() or not any(partial.iterdir())
    )
    if not ours:
        raise ConfigError(
            f"{partial} is not a work folder of this run (it holds files zdebias did not "
            f"write), where stage {name!r} works; move it away and run again"
        )


def promote(partial: Path, final: Path, name: str | None = None) -> None:
    """Rename a finished stage's work folder into place, replacing an older result of the
    stage ``name`` (refused when that holds files zdebias did not write,
    :func:`check_stage_folder`)."""
    check_stage_folder(name or final.name, final)
    if final.exists():
        shutil.rmtree(final)
    os.replace(partial, final)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON file a run wrote (manifest, marker, attempt), or None if missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
