"""Which folders are zdebias's own: the marker it writes into every folder it creates.

One rule for ``--overwrite``, ``zdebias run`` and every library call that replaces a folder:
a folder is zdebias's own only if it holds :data:`MARKER`, a small JSON object (which zdebias
wrote it, what kind of folder it is). An empty folder may be used; any other non-empty folder
is never replaced, deleted or written into.

The marker is written into a published output folder last (it also lists the files), into a
model folder before it is renamed into place, and into a sampling or run folder when the run
starts. Folders of zdebias 0.2 and older: a published output folder already carried this
marker and stays replaceable; a model, sampling or run folder did not, and is refused like a
user's folder (the message says so; remove it yourself), since its files alone cannot tell it
from a user's folder that happens to hold a ``manifest.json``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from zdebias.errors import ConfigError

#: the ownership marker (the name of 0.2's published-output marker, so those stay ours)
MARKER = ".zdebias-output.json"

#: files that older zdebias folders held without a marker: named in the refusal, never trusted
LEGACY_FILES = (
    "manifest.json",
    "state.json",
    "metrics.json",
    "zdebias_generator.json",
    "zdebias_infiller.json",
)


@functools.cache
def zdebias_version() -> str:
    """The installed zdebias version (``unknown`` when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("zdebias")
    except PackageNotFoundError:
        return "unknown"


def marker_doc(kind: str, **extra: Any) -> dict[str, Any]:
    """The marker's JSON: the writer's version, the folder's ``kind`` (``output``, ``model``,
    ``samples``, ``run``) and ``extra`` (an output's file list, a run's recipe). No time stamp,
    so that outputs stay byte-identical between runs."""
    return {"zdebias": zdebias_version(), "kind": kind, **extra}


def owner_of(folder: str | Path) -> dict[str, Any] | None:
    """The marker of ``folder`` (a JSON object in a regular file), or None where it has none."""
    path = Path(folder) / MARKER
    if path.is_symlink() or not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def is_empty(folder: str | Path) -> bool:
    """Whether ``folder`` is a folder (not a link to one) with nothing in it."""
    path = Path(folder)
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


def foreign(folder: str | Path) -> bool:
    """Whether ``folder`` is a non-empty folder without the marker: zdebias may not touch it."""
    path = Path(folder)
    return path.is_dir() and not is_empty(path) and owner_of(path) is None


def refusal(out: str | Path) -> str:
    """The one line that refuses a foreign folder ``out``."""
    line = f"{out} holds files zdebias did not write; choose a new --out or empty it"
    old = [name for name in LEGACY_FILES if (Path(out) / name).is_file()]
    if old:
        line += (
            f" (if an older zdebias wrote it: its folders carry no {MARKER}, so remove it yourself)"
        )
    return line


def check_ours(out: str | Path) -> None:
    """Raise :class:`ConfigError` (:func:`refusal`) when ``out`` is a foreign folder."""
    if foreign(out):
        raise ConfigError(refusal(out))


__all__ = [
    "LEGACY_FILES",
    "MARKER",
    "check_ours",
    "foreign",
    "is_empty",
    "marker_doc",
    "owner_of",
    "refusal",
    "zdebias_version",
]
