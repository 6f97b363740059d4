"""What the benchmarks share (run them as scripts: ``python benchmarks/bench_*.py``)."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    """The real datasets: ``$ZDEBIAS_TEST_DATA``, else ``../shared/data`` beside the checkout."""
    value = os.environ.get("ZDEBIAS_TEST_DATA")
    if value:
        return Path(value)
    return Path(__file__).resolve().parents[2] / "shared" / "data"
