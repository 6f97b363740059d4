"""One writer at a time per final output: a lock on a hidden sibling ``.NAME.lock``.

:func:`output_lock` is taken by every publish of an output folder
(:func:`~zdebias.data.writers.publish_folder`, :func:`~zdebias.data.writers.publish_dir`).
The publisher checks its output again once it holds the lock, so two processes with the same
``--out`` never both publish: the second fails with one line, whether it comes while the
first is writing (the lock is held) or after (the output exists).

The lock is ``fcntl.flock`` on the sibling file, which holds the holder's pid. The holder
removes the file before letting go; a process that locked a file removed meanwhile opens the
new one and tries again. The system drops the lock of a killed process; the file it leaves is
harmless and reused by the next writer. Not POSIX (no ``fcntl``): no lock.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from zdebias.errors import ConfigError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

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
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _holder(fd)
            os.close(fd)
            raise ConfigError(
                f"{out} is being written by another zdebias process (pid {pid})"
            ) from None
        try:  # the file we locked may have been removed by the holder before us
            now = os.stat(lock)
            mine = os.fstat(fd)
            if (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
                break
        except FileNotFoundError:
            pass
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


__all__ = ["lock_path", "output_lock"]
