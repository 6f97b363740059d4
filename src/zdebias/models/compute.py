"""What a model ran on, as summaries and run manifests record it (:func:`compute_record`): the
device, the dtype, the setting that chose it, whether ``auto`` chose bfloat16, and torch's
version. The numbers of a training or sampling run depend on these; another machine gives
the same numbers only with the same ones.

Imports torch when called: call it where torch is already loaded.
"""

from __future__ import annotations

from typing import Any


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


__all__ = ["compute_record"]
