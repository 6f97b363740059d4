"""Training throughput as runs report it: tokens/s, achieved FLOP/s and model-FLOPs utilisation.

MFU = 6·N·(tokens/s) / peak (Kaplan et al. 2020; PaLM's definition): N the parameters that
do arithmetic per token (the input embedding only where it is tied to the output projection,
whose matmul it then is), tokens the non-padding tokens the model ran forward and backward,
attention's own FLOPs left out (short sequences: a few per cent). The peak is dense bf16
tensor-core FLOP/s: ``ZDEBIAS_PEAK_TFLOPS`` when set, else :data:`PEAK_BF16_TFLOPS` by the
GPU's name; on a CPU, or a GPU not in the table, only the achieved FLOP/s is reported.

Imports torch only inside functions.
"""

from __future__ import annotations

import os
from typing import Any

#: environment variable that sets the peak (TFLOP/s) MFU divides by
PEAK_ENV = "ZDEBIAS_PEAK_TFLOPS"
#: dense bf16 peak TFLOP/s by a substring of ``torch.cuda.get_device_name()`` (vendor sheets;
#: first match wins, so the more specific names come first)
PEAK_BF16_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H200", 989.0),
    ("H100 PCIe", 756.0),
    ("H100", 989.0),
    ("GH200", 989.0),
    ("A100", 312.0),
    ("L40S", 362.0),
    ("L4", 121.0),
    ("A10G", 70.0),
    ("RTX 4090", 165.0),
)


def flop_parameters(model: Any) -> int:
    """N of 6·N·tokens: the parameters without an untied input embedding."""
    n = sum(p.numel() for p in model.parameters())
    embed = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if embed is not None and (out is None or out.weight is not embed.weight):
        n -= embed.weight.numel()
    return int(n)


def peak_tflops(device: Any) -> tuple[float | None, str]:
    """(peak TFLOP/s, where it came from) for ``device``; (None, why) where unknown."""
    import torch

    if os.environ.get(PEAK_ENV):
        return float(os.environ[PEAK_ENV]), PEAK_ENV
    if str(device).split(":")[0] != "cuda" or not torch.cuda.is_available():
        return None, "not a GPU: achieved FLOP/s only"
    name = torch.cuda.get_device_name(torch.device(device))
    for key, value in PEAK_BF16_TFLOPS:
        if key in name:
            return value, f"table: {key} dense bf16"
    return None, f"{name!r} not in the table: set {PEAK_ENV}"


def throughput(n_params: int, tokens: int, seconds: float, device: Any) -> dict[str, Any]:
    """``{"tokens_per_s", "achieved_tflops", "peak_tflops", "peak_source", "mfu"}`` of a run
    that trained ``tokens`` (forward + backward) through ``n_params`` in ``seconds``."""
    rate = tokens / max(seconds, 1e-9)
    achieved = 6.0 * n_params * rate / 1e12
    peak, source = peak_tflops(device)
    return {
        "tokens_per_s": round(rate, 1),
        "flop_parameters": n_params,
        "achieved_tflops": round(achieved, 4),
        "peak_tflops": peak,
        "peak_source": source,
        "mfu": None if peak is None else round(achieved / peak, 4),
    }


__all__ = ["PEAK_BF16_TFLOPS", "PEAK_ENV", "flop_parameters", "peak_tflops", "throughput"]
