"""A test-only switch that makes a CPU build of torch claim one CUDA GPU.

``ZDEBIAS_TEST_FAKE_CUDA=1 pytest ...`` (read by ``tests/conftest.py`` and by the scripts the
tests launch) patches ``torch.cuda.is_available`` to answer ``True`` and
``torch.cuda.device_count`` to answer 1 (and the device queries HF makes on the way:
``set_device``, ``current_device``, ``is_bf16_supported``). Nothing else is faked: code that
then puts a tensor or a model on CUDA raises ("Torch not compiled with CUDA enabled"), so a
run of the device-sensitive tests under the switch finds every path that picks CUDA on its
own (device ``auto``, HF Trainer's default device, DDP's backend) without a GPU machine. A
test that pins its device passes under the switch as it does without it.
"""

from __future__ import annotations

import os

ENV = "ZDEBIAS_TEST_FAKE_CUDA"


def wanted() -> bool:
    """Whether the environment asks for the fake GPU."""
    return os.environ.get(ENV, "") not in ("", "0")


def install() -> None:
    """Make ``torch.cuda`` claim one GPU (on a CPU build, using it still raises)."""
    import torch

    if torch.cuda.is_available() and not getattr(torch.cuda.is_available, "fake", False):
        raise RuntimeError(f"{ENV}=1 on a machine with a real GPU: unset it")

    def is_available() -> bool:
        return True

    def device_count() -> int:
        return 1

    def set_device(device: object) -> None:
        return None

    is_available.fake = True  # type: ignore[attr-defined]
    torch.cuda.is_available = is_available
    torch.cuda.device_count = device_count
    torch.cuda.set_device = set_device
    torch.cuda.current_device = lambda: 0
    torch.cuda.is_bf16_supported = lambda including_emulation=True: True


def real_cuda() -> bool:
    """Whether a real CUDA GPU is visible (not the fake one)."""
    import torch

    return torch.cuda.is_available() and not getattr(torch.cuda.is_available, "fake", False)


def install_if_wanted() -> None:
    """:func:`install` when ``ZDEBIAS_TEST_FAKE_CUDA`` is set."""
    if wanted():
        install()
