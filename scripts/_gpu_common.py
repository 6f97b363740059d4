"""What the GPU check scripts share (run them as ``python3 scripts/gpu_check_*.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def sync(torch: Any) -> None:
    """Wait for queued CUDA work, so that wall-clock timings are real."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def emit(result: dict, out: str | None, filename: str, *, quiet: bool = False) -> None:
    """Print the result as JSON and write it to ``out``, else to ``$OUT/filename`` if set.
    ``quiet``: write only (the partial result after each part, kept if a later part hangs)."""
    text = json.dumps(result, indent=2)
    if not quiet:
        print(text)
    target = out or (Path(os.environ["OUT"]) / filename if os.environ.get("OUT") else None)
    if target:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text(text + "\n")
