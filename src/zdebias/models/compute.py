"""What a model runs on: the device an ``auto`` setting picks (:func:`model_device`), and
what summaries and run manifests record (:func:`compute_record`): the device, the dtype, the
setting that chose it, whether ``auto`` chose bfloat16, and torch's version. The numbers of a
training or sampling run depend on these; another machine gives the same numbers only with
the same ones.

Imports torch when called: call it where torch is already loaded.
"""

from __future__ import annotations

from typing import Any

from zdebias.errors import ConfigError

#: the refusal of ``--device cuda`` where torch sees no CUDA GPU (training and sampling)
NO_CUDA = "--device cuda asked for, but no CUDA GPU is visible"


def check_device(asked: str | None) -> None:
    """Refuse a CUDA ``asked`` device (``cuda``, ``cuda:1``) where torch sees no CUDA GPU,
    with :data:`NO_CUDA`; call it before anything is removed or loaded."""
    if asked is None or not str(asked).startswith("cuda"):
        return
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(NO_CUDA)


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


__all__ = ["NO_CUDA", "check_device", "compute_record", "model_device"]
