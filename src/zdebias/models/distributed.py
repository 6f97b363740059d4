"""Training on several processes (``torchrun``, ``accelerate launch``): who writes, who waits.

A launcher starts one process per device and tells each its place through the environment
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``); HF ``Trainer`` then trains data parallel (DDP).
zdebias's rule on top: every process trains, only the main one (rank 0) writes checkpoints,
publishes the model and prints the result; the others wait at a :func:`barrier` until it has
published, so no process returns (or reads ``OUT``) before the output is whole.

Only the standard library loads here; torch only inside the functions that talk to the other
processes, and only once the process group exists (HF ``Trainer`` creates it).
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

T = TypeVar("T")


def rank() -> int:
    """This process's global rank (0 without a launcher)."""
    return int(os.environ.get("RANK", "0") or 0)


def world_size() -> int:
    """How many processes train together (1 without a launcher)."""
    return max(1, int(os.environ.get("WORLD_SIZE", "1") or 1))


def is_main_process() -> bool:
    """Whether this process writes and prints: rank 0, or the only process."""
    return rank() == 0


def _group() -> Any:
    """``torch.distributed`` when several processes are joined in a group, else ``None``."""
    if world_size() < 2:
        return None
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def barrier() -> None:
    """Wait until every process gets here (nothing to wait for in a single process)."""
    dist = _group()
    if dist is not None:
        dist.barrier()


def broadcast(value: T) -> T:
    """The main process's ``value``, on every process (a picklable object)."""
    dist = _group()
    if dist is None:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]  # type: ignore[no-any-return]


def sum_over_processes(value: float) -> float:
    """``value`` summed over the processes (itself in a single process)."""
    dist = _group()
    if dist is None:
        return value
    values: list[Any] = [None] * world_size()
    dist.all_gather_object(values, value)
    return sum(values)


__all__ = ["barrier", "broadcast", "is_main_process", "rank", "sum_over_processes", "world_size"]
