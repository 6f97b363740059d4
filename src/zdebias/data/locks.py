"""One writer at a time per final output: a lock on a hidden sibling ``.NAME.lock``.

:func:`output_lock` is taken by every publish of an output folder
(:func:`~zdebias.data.writers.publish_folder`, :func:`~zdebias.data.writers.publish_dir`).
The publisher checks its output again once it holds the lock, so two processes with the same
``--out`` never both publish: the second fails with one line, whether it comes while the
first is writing (the lock is held) or after (the output exists).

The lock is ``fcntl.flock`` on the sibling file, which holds the holder's pid. The holder
removes the file before letting go; a process that locked a file removed meanwhile opens the
new one and tries again (it compares the inode it locked with the one at the path). The
system drops the lock of a killed process; the file it leaves (its dead pid) is reused by the
next writer of that output, or removed by :func:`remove_stale_lock` when the next command
writes into its folder: only while holding its lock, only when the pid it names is gone, and
only when the path still is the file locked. A locker that finds the lock held by such a
sweep (the pid in the file is gone) waits for it instead of failing. Not POSIX (no
``fcntl``): no lock.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

from zdebias.errors import ConfigError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

#: the name of a lock file (:func:`lock_path`) and what its holder writes into it
_LOCK_NAME = re.compile(r"^\..+\.lock$")
_PID = re.compile(rb"^[0-9]+\n$")
#: how long a locker waits for a sweep (:func:`remove_stale_lock`) that holds the lock
_SWEEP_WAIT_S = 2.0

#: lock files this process holds → how many times (a publish inside a publish takes it again)
_HELD: dict[Path, int] = {}


def lock_path(out: str | Path) -> Path:
    """The lock file of ``out``: ``.NAME.lock`` beside it."""
    path = Path(os.path.abspath(out))
    return path.with_name(f".{path.name}.lock")


def _holder(fd: int) -> str:
    """The pid the holder wrote into the lock file (it may not have written it yet)."""
    for _ in range(20):
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text:
            return text
        time.sleep(0.005)
    return "unknown"


def _alive(pid: str) -> bool:
    """Whether the process ``pid`` (a lock file's text) may still run: unknown ones may."""
    if not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _same_file(path: Path, fd: int) -> bool:
    """Whether ``path`` still is the file open as ``fd`` (not removed, not replaced)."""
    try:
        now, mine = os.stat(path, follow_symlinks=False), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)


def remove_stale_lock(path: str | Path) -> bool:
    """Remove the lock file ``path`` (a ``.NAME.lock``) that a killed holder left: a regular
    file that holds only a pid, of a process that is gone, and that no one holds. Removed
    only while holding its lock and only when the path still is that file, so a process
    locking it meanwhile locks the next one instead (:func:`output_lock` re-checks the
    inode). Returns whether it was removed."""
    path = Path(path)
    if fcntl is None or path in _HELD or not _LOCK_NAME.match(path.name):
        return False
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        text = os.pread(fd, 33, 0)
        if not _PID.match(text) or _alive(text.decode("ascii").strip()):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # held: in use
        if not _same_file(path, fd) or os.pread(fd, 33, 0) != text:
            return False  # replaced, or taken and written by a new holder before us
        os.unlink(path)
        return True
    finally:
        os.close(fd)


@contextlib.contextmanager
def output_lock(out: str | Path) -> Iterator[None]:
    """Hold the lock of the output ``out``; raises :class:`ConfigError` at once when another
    process holds it. Re-entrant within a process."""
    lock = lock_path(out)
    if lock in _HELD or fcntl is None:
        _HELD[lock] = _HELD.get(lock, 0) + 1
        try:
            yield
        finally:
            _HELD[lock] -= 1
            if not _HELD[lock]:
                del _HELD[lock]
        return
    lock.parent.mkdir(parents=True, exist_ok=True)
    sweep_ends = time.monotonic() + _SWEEP_WAIT_S
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _holder(fd)
            os.close(fd)
            if not _alive(pid) and time.monotonic() < sweep_ends:
                time.sleep(0.005)  # a sweep holds a dead holder's file: it is removing it
                continue
            raise ConfigError(
                f"{out} is being written by another zdebias process (pid {pid})"
            ) from None
        if _same_file(lock, fd):  # the holder or a sweep may have removed it before us
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    _HELD[lock] = 1
    try:
        yield
    finally:
        del _HELD[lock]
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)


__all__ = ["lock_path", "output_lock", "remove_stale_lock"]
