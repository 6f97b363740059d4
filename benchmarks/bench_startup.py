"""Start-up time of the light commands (target: well under a second).

Run: ``python benchmarks/bench_startup.py``. Prints the median wall time of ``--help`` for
each command over a few runs (the package byte-compiled first, as ``pip install`` does), and
which heavy modules an ``inspect`` start imports.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from _common import compile_package

COMMANDS = [["--help"], ["inspect", "--help"], ["stats", "--help"], ["filter", "--help"]]
HEAVY = ("torch", "transformers", "datasets", "sklearn", "scipy", "matplotlib", "plotly")


def main(repeats: int = 5) -> None:
    compile_package()  # as pip install does
    for args in COMMANDS:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "zdebias.cli", *args], capture_output=True)
            times.append(time.perf_counter() - start)
        print(f"zdebias {' '.join(args):<16} median {statistics.median(times):.3f} s")
    probe = (
        f"import sys; from zdebias import cli; print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    print(f"heavy modules imported at start-up: {out.stdout.strip()}")


if __name__ == "__main__":
    main()
