"""Publish a model folder atomically: build it in a hidden sibling, then rename it into place.

Classifier, generator and infiller training all write their output this way, so an
interrupted run never leaves a half-written ``OUT``::

    work = work_dir_for(out)            # .OUT.tmp-XXXX next to OUT, checked first
    ...                                 # train, save everything into work
    publish_dir(work, out, overwrite=overwrite)

An existing non-empty ``OUT`` is refused unless ``overwrite``; a symlink, the current directory
or one of its parents is always refused (replacing it would follow the link or remove the
folder the user stands in).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from zdebias.errors import ConfigError


def _absolute(out: str | Path) -> Path:
    """``out`` made absolute and normalised (``..`` folded) without following symlinks."""
    return Path(os.path.abspath(out))


def check_out_dir(out: str | Path, *, overwrite: bool) -> None:
    """Fail with :class:`ConfigError` when :func:`publish_dir` would refuse ``out``."""
    path = _absolute(out)
    if path.is_symlink():
        raise ConfigError(f"{out} is a symbolic link; choose a real folder for --out")
    cwd = Path.cwd().resolve()
    if path.exists() and (path.resolve() == cwd or path.resolve() in cwd.parents):
        raise ConfigError(f"{out} is the current directory or a parent of it; choose another --out")
    if path.exists() and (not path.is_dir() or any(path.iterdir())) and not overwrite:
        raise ConfigError(f"{out} exists and is not empty; pass --overwrite to replace it")


def work_dir_for(out: str | Path) -> Path:
    """A new empty hidden folder next to ``out`` (same filesystem, so the final rename is atomic).

    Creates ``out``'s parent if needed. The caller removes the folder if the work fails.
    """
    path = _absolute(out)
    if not path.name:
        raise ConfigError(f"{out} is not a folder name; choose another --out")
    path.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))


def publish_dir(tmp: str | Path, out: str | Path, *, overwrite: bool) -> Path:
    """Rename the finished folder ``tmp`` to ``out``; returns ``out``.

    ``tmp`` must be on ``out``'s filesystem (see :func:`work_dir_for`). An existing ``out``
    (refused unless ``overwrite``) is first moved aside and removed only once ``tmp`` is in
    place; if that rename fails the old ``out`` is put back, so ``out`` is always either the
    old or the new folder, never a mix.
    """
    check_out_dir(out, overwrite=overwrite)
    path, tmp = _absolute(out), Path(tmp)
    if not tmp.is_dir():
        raise ValueError(f"{tmp} is not a folder")
    if not path.exists():
        os.replace(tmp, path)
        return Path(out)
    old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent)) / "old"
    try:
        os.replace(path, old)
        try:
            os.replace(tmp, path)
        except BaseException:
            os.replace(old, path)
            raise
    finally:
        with contextlib.suppress(OSError):
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old.parent)
            else:
                old.unlink(missing_ok=True)
                old.parent.rmdir()
    return Path(out)
