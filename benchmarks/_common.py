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


def compile_package(source: Path | None = None) -> None:
    """Byte-compile zdebias (from ``source`` when given), as ``pip install`` does."""
    import compileall
    import importlib.util

    if source is not None:
        folder = source / "zdebias"
    else:
        spec = importlib.util.find_spec("zdebias")
        assert spec is not None and spec.submodule_search_locations is not None
        folder = Path(next(iter(spec.submodule_search_locations)))
    compileall.compile_dir(folder, quiet=1)
