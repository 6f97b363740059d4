"""Process-wide settings: for holding millions of records, the cyclic garbage collector
paused while they are made and large allocations given back to the system when freed; for a
worker process, ending with its parent (:func:`end_with_parent`).

Not about reading: the readers, the feature extractors, the sharded z-filter and every worker
process zdebias starts use them.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

#: objects a :func:`gc_paused` block must leave behind to be frozen at its end
GC_FREEZE_AFTER = 200_000


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while creating many records.

    With millions of live objects, each automatic collection walks them all; a loop creating
    a million records would spend most of its time there. When the block leaves more than
    :data:`GC_FREEZE_AFTER` new objects, re-enabling would walk them all at once (seconds
    for a million records), so they are frozen first (``gc.freeze``: reference counting still
    frees them; only reference cycles among them are never collected, and records hold none).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_count()[0] > GC_FREEZE_AFTER:
                gc.freeze()
            gc.enable()


#: glibc's ``mallopt`` parameter for the size from which blocks get their own memory map.
_M_MMAP_THRESHOLD = -3


def mmap_large_allocations(threshold: int = 1 << 20) -> None:
    """Give every allocation of ``threshold`` bytes or more (arrays) its own memory map, which
    goes back to the system as soon as it is freed.

    glibc raises that threshold each time a mapped block is freed (up to 32 MB), so after a
    while arrays of tens of MB come from the heap, and the memory they leave stays with the
    process: holding millions of rows' features, that was gigabytes (docs/scaling.md). The
    setting is process-wide and kept by forked children; elsewhere than glibc it does nothing.
    """
    import ctypes

    try:
        ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, int(threshold))
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


#: Linux's ``prctl`` option that asks for a signal when the parent dies
_PR_SET_PDEATHSIG = 1
#: how often the fallback watch of :func:`end_with_parent` looks at the parent, in seconds
PARENT_POLL_SECONDS = 0.5


def end_with_parent(parent: int | None = None, *, close: Iterable[Any] = ()) -> None:
    """In a worker process just started: end it as soon as its parent ``parent`` (default:
    the process that started it) is gone, even killed by SIGKILL, so no worker outlives a
    killed run (holding memory, blocked on a pipe nobody writes to).

    ``close``: connections inherited from the parent that this worker does not use (its
    parent's ends of the pipes, its siblings'): closed, so the pipes see their end when the
    parent dies. Then, on Linux, the kernel sends SIGKILL at the parent's death
    (``PR_SET_PDEATHSIG``); everywhere, a daemon thread ends the process once the parent's
    pid is no longer its parent's (the portable way, and the one that also covers a parent
    that died before this call).
    """
    for conn in close:
        with contextlib.suppress(OSError):
            conn.close()
    if parent is None:
        parent = os.getppid()
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # died already, before the signal was asked for
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def forked_pool(num_proc: int) -> Any:
    """A ``ProcessPoolExecutor`` of ``num_proc`` forked workers (they see what this process
    holds, nothing is pickled on the way in) that end with this process
    (:func:`end_with_parent`)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(
        num_proc,
        mp_context=multiprocessing.get_context("fork"),
        initializer=end_with_parent,
        initargs=(os.getpid(),),
    )


def _watch_parent(parent: int) -> None:
    """End this process (at once, as SIGKILL would) once ``parent`` is no longer its parent."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(1)


__all__ = [
    "GC_FREEZE_AFTER",
    "PARENT_POLL_SECONDS",
    "end_with_parent",
    "forked_pool",
    "gc_paused",
    "mmap_large_allocations",
]
