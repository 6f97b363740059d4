"""Process-wide settings for holding millions of records: the cyclic garbage collector
paused while they are made, and large allocations given back to the system when freed.

Not about reading: the readers, the feature extractors and the sharded z-filter use them.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

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


__all__ = ["GC_FREEZE_AFTER", "gc_paused", "mmap_large_allocations"]
