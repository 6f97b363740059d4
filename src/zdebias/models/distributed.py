"""Training on several processes (``torchrun``, ``accelerate launch``): who writes, who waits.

A launcher starts one process per device and tells each its place through the environment
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``); HF ``Trainer`` then trains data parallel (DDP).
zdebias's rule on top: every process trains, only the main one (rank 0) writes checkpoints,
publishes the model and prints the result; the others wait at a :func:`barrier` until it has
published, so no process returns (or reads ``OUT``) before the output is whole.

Which device a training run takes (:func:`train_on_cpu`): the GPUs when there is one for each
process the launcher started on this machine, else CPU processes (DDP over gloo), said in one
line on stderr; ``--device cuda`` with too few GPUs is an error. DDP needs a GPU of its own per
process: two processes on one GPU would fail in NCCL ("Duplicate GPU detected") or ask for a
device that does not exist.

Only the standard library loads here; torch only inside the functions that talk to the other
processes or ask for GPUs, and only once the process group exists (HF ``Trainer`` creates it).
"""

from __future__ import annotations

import os
import sys
from typing import Any, TypeVar

from zdebias.errors import ConfigError
from zdebias.models.compute import NO_CUDA

T = TypeVar("T")


def rank() -> int:
    """This process's global rank (0 without a launcher)."""
    return int(os.environ.get("RANK", "0") or 0)


def world_size() -> int:
    """How many processes train together (1 without a launcher)."""
    return max(1, int(os.environ.get("WORLD_SIZE", "1") or 1))


def local_processes() -> int:
    """How many processes the launcher started on this machine (``LOCAL_WORLD_SIZE``, set by
    ``torchrun`` and ``accelerate launch``; 1 without a launcher)."""
    return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))


def train_on_cpu(device: str | None = None) -> bool:
    """Whether a training run uses the CPU rather than CUDA GPUs.

    ``device``: ``cpu``, ``cuda`` or ``None`` / ``auto``. ``auto`` takes the GPUs when CUDA
    sees at least one per process on this machine; with fewer it trains on CPU processes
    (gloo) and says so on stderr (main process only). ``cuda`` with no GPU or too few is a
    :class:`~zdebias.errors.ConfigError`.
    """
    import torch

    if device == "cpu":
        return True
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    procs = local_processes()
    if gpus >= procs and gpus > 0:
        return False
    if device == "cuda":
        if gpus == 0:
            raise ConfigError(NO_CUDA)
        raise ConfigError(
            f"--device cuda with {procs} processes on this machine but {gpus} CUDA GPU(s): "
            f"DDP needs one GPU per process; launch --nproc_per_node {gpus} or use --device cpu"
        )
    if gpus and is_main_process():
        print(
            f"note: {procs} processes on this machine but {gpus} CUDA GPU(s) visible: training "
            f"on the CPU (gloo); launch --nproc_per_node {gpus} to train on the GPU(s)",
            file=sys.stderr,
        )
    return True


#: on a GPU, batches are padded to a multiple of this: a few distinct shapes instead of one per
#: batch (each new shape costs kernel selection), tensor-core tiles aligned
GPU_PAD_MULTIPLE = 8


def gpu_arguments() -> dict[str, Any]:
    """HF ``TrainingArguments`` for a GPU run: pinned batches copied without waiting."""
    return {"accelerator_config": {"non_blocking": True}}


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
    return box[0]


def sum_over_processes(value: float) -> float:
    """``value`` summed over the processes (itself in a single process)."""
    dist = _group()
    if dist is None:
        return value
    values: list[Any] = [None] * world_size()
    dist.all_gather_object(values, value)
    return sum(values)


__all__ = [
    "GPU_PAD_MULTIPLE",
    "barrier",
    "broadcast",
    "gpu_arguments",
    "is_main_process",
    "local_processes",
    "rank",
    "sum_over_processes",
    "train_on_cpu",
    "world_size",
]
