"""What a model runs on: the device an ``auto`` setting picks (:func:`model_device`), and
what summaries and run manifests record (:func:`compute_record`): the device, the dtype, the
setting that chose it, whether ``auto`` chose bfloat16, and torch's version. The numbers of a
training or sampling run depend on these; another machine gives the same numbers only with
the same ones.

Imports torch when called: call it where torch is already loaded.
"""

from __future__ import annotations

from typing import Any


def model_device(asked: str | None = None) -> str:
    """The device to load a model on for inference: ``asked`` as given, or for ``None`` /
    ``auto`` the GPU (``cuda``) when torch sees one, else ``cpu``. (Training decides with
    :func:`~zdebias.models.distributed.train_on_cpu`: one GPU per process.)"""
    import torch

    if asked not in (None, "auto"):
        return str(asked)
    return "cuda" if torch.cuda.is_available() else "cpu"


def compute_record(device: Any, dtype: str, *, setting: str | None = None) -> dict[str, Any]:
    """``{"device", "dtype", "setting", "bf16_by_auto", "torch"}`` of a run on ``device``
    (a name or a ``torch.device``) in ``dtype`` (``float32``, ``bfloat16``, ``float16``),
    chosen by ``setting`` (the user's precision or dtype setting, e.g. ``auto``)."""
    import torch

    return {
        "device": str(device),
        "dtype": dtype,
        "setting": setting,
        "bf16_by_auto": setting == "auto" and dtype == "bfloat16",
        "torch": torch.__version__,
    }


__all__ = ["compute_record", "model_device"]
