"""One writer at a time per final output: a lock on a hidden sibling ``.NAME.lock``.

:func:`output_lock` is taken by every publish of an output folder
(:func:`~zdebias.data.writers.publish_folder`, :func:`~zdebias.data.writers.publish_dir`).
The publisher checks its output again once it holds the lock, so two processes with the same
``--out`` never both publish: the second fails with one line, whether it comes while the
first is writing (the lock is held) or after (the output exists).

The lock is ``fcntl.flock`` on the sibling file, which holds zdebias's marker line
(:func:`lock_text`: ``zdebias-lock pid=PID host=HOST``). The holder removes the file before
letting go; a process that locked a file removed meanwhile opens the new one and tries again
(it compares the inode it locked with the one at the path). The system drops the lock of a
killed process; the file it leaves (its dead pid) is reused by the next writer of that
output, or removed by :func:`remove_stale_lock` when the next command writes into its folder:
only a ``.NAME.lock`` that holds the marker line of this host, only while holding its lock,
only when the pid it names is gone, and only when the path still is the file locked. Another
program's lock file is never touched: where it is in the way of an output's lock (or the lock
path is a folder, a link, anything but a file), the command stops with one line naming it. A
locker that finds the lock held by such a sweep (the pid in the file is gone) waits for it
instead of failing. Not POSIX (no ``fcntl``): no lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import stat
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
_MARKED = re.compile(rb"^zdebias-lock pid=([0-9]+) host=([0-9a-f]{8})\n$")
#: what an earlier zdebias wrote into a lock file: the pid alone (reused, never swept)
_LEGACY = re.compile(rb"^[0-9]+\n$")
#: how long a locker waits for a sweep (:func:`remove_stale_lock`) that holds the lock
_SWEEP_WAIT_S = 2.0

#: lock files this process holds → how many times (a publish inside a publish takes it again)
_HELD: dict[Path, int] = {}


def lock_path(out: str | Path) -> Path:
    """The lock file of ``out``: ``.NAME.lock`` beside it."""
    path = Path(os.path.abspath(out))
    return path.with_name(f".{path.name}.lock")


def _host() -> str:
    """A short tag of this machine: a lock of another host (a shared folder) is never swept."""
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def lock_text(pid: int | None = None) -> str:
    """What a zdebias lock file holds: its marker line, with the holder's pid and host."""
    return f"zdebias-lock pid={os.getpid() if pid is None else pid} host={_host()}\n"


def _marked_pid(text: bytes) -> str | None:
    """The pid of a lock file's ``text`` when it is zdebias's marker line of this host."""
    found = _MARKED.match(text)
    if found is None or found[2].decode("ascii") != _host():
        return None
    return found[1].decode("ascii")


def _holder(fd: int) -> str | None:
    """The pid the holder wrote into the lock file (``unknown``: it may not have written it
    yet, or it is of another host); None when the file holds something else than a zdebias
    lock's marker line (another program's lock)."""
    for _ in range(20):
        text = os.pread(fd, 128, 0)
        if text:
            found = _MARKED.match(text) or _LEGACY.match(text)
            if found is None:
                return None
            return found[1].decode("ascii") if found.re is _MARKED else text.decode().strip()
        time.sleep(0.005)
    return "unknown"


def _not_ours(lock: Path, out: str | Path) -> ConfigError:
    """The one line for a lock path that zdebias may not use."""
    return ConfigError(
        f"{lock} is in the way of {out}'s lock: zdebias did not write it; move it away "
        "(or choose another --out)"
    )


def open_lock_file(lock: Path, what: str) -> int:
    """Open (create) the lock file ``lock``, ``what`` it is for the messages (``OUT's lock
    file``): a regular file, never followed as a link; anything else at that path (a folder,
    a link, a pipe) is one :class:`ConfigError` naming it, and is left as it is."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    except IsADirectoryError:
        raise ConfigError(f"{lock} is a folder, where {what} goes; move it away") from None
    except OSError as err:
        if os.path.islink(lock):
            raise ConfigError(f"{lock} is a symbolic link, where {what} goes; remove it") from None
        raise ConfigError(f"{lock}: cannot open {what} ({err.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError(f"{lock} is not a file, where {what} goes; move it away")
    return fd


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
    file that holds only zdebias's marker line (:func:`lock_text`) of this host, naming a
    process that is gone, and that no one holds; any other file is left alone. Removed
    only while holding its lock and only when the path still is that file, so a process
    locking it meanwhile locks the next one instead (:func:`output_lock` re-checks the
    inode). Returns whether it was removed."""
    path = Path(path)
    if fcntl is None or path in _HELD or not _LOCK_NAME.match(path.name):
        return False
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        text = os.pread(fd, 128, 0)
        pid = _marked_pid(text)
        if pid is None or _alive(pid):
            return False  # another program's file, a live holder, or another host's
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # held: in use
        if not _same_file(path, fd) or os.pread(fd, 128, 0) != text:
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
        fd = open_lock_file(lock, f"{out}'s lock file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _holder(fd)
            os.close(fd)
            if pid is None:
                raise _not_ours(lock, out) from None
            if not _alive(pid) and time.monotonic() < sweep_ends:
                time.sleep(0.005)  # a sweep holds a dead holder's file: it is removing it
                continue
            raise ConfigError(
                f"{out} is being written by another zdebias process (pid {pid})"
            ) from None
        if _same_file(lock, fd):  # the holder or a sweep may have removed it before us
            break
        os.close(fd)
    text = os.pread(fd, 128, 0)
    # empty: new (or a locker's that has not written yet); marked, or an older zdebias's pid
    # of a process that is gone: a killed zdebias's (it is free); anything else (a live pid:
    # another program's pid file) is not ours, and left as it is
    legacy = _LEGACY.match(text) is not None and not _alive(text.decode().strip())
    if text and not (_MARKED.match(text) or legacy):
        os.close(fd)
        raise _not_ours(lock, out)
    os.ftruncate(fd, 0)
    os.pwrite(fd, lock_text().encode("ascii"), 0)
    _HELD[lock] = 1
    try:
        yield
    finally:
        del _HELD[lock]
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)


__all__ = ["lock_path", "lock_text", "open_lock_file", "output_lock", "remove_stale_lock"]
