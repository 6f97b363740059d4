"""Speed of ``zdebias shortcut-split --by features`` against ``zdebias stats`` on its training set.

Run: ``python benchmarks/bench_shortcut_split.py`` (options: ``--train`` (default
``snli_20k/train.jsonl``), ``--test`` (default the full SNLI test set,
``snli_full_devtest::test``, 9,824 pairs), ``--by`` (``features``), ``--rules`` (``sum-z,effect``:
the split once per verdict rule), ``--repeat`` (3)). Needs the real SNLI text:
``$ZDEBIAS_TEST_DATA`` (default ``../shared/data``).

Each command runs in a fresh process, as a user runs it (start-up, reading, features with the
cross-fitted hypothesis-only model; the split extracts them once over train and test together),
the two taking turns ``--repeat`` times; the run with the median wall time is shown, with its
CPU seconds (children included). Prints the ratio split / stats: the target (issue 37) is 2 or
less; and the effect rule (docs/design.md §13 amended, the default) against the summed-z rule:
within 2x (issue 55). Wall time is noisy on a shared machine; CPU time much less so.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import compile_package, data_dir


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (children included) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    data = data_dir()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", default=str(data / "snli_20k" / "train.jsonl"))
    parser.add_argument("--test", default=str(data / "snli_full_devtest") + "::test")
    parser.add_argument("--by", default="features")
    parser.add_argument("--rules", default="sum-z,effect")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    compile_package()
    zdebias = [sys.executable, "-m", "zdebias.cli"]
    work = Path(tempfile.mkdtemp(prefix="bench-split-"))
    jobs = {"stats": [*zdebias, "stats", args.train, "--out", str(work / "stats.json")]}
    rules = [r for r in args.rules.split(",") if r]
    for rule in rules:
        jobs[f"split {rule}"] = [
            *zdebias,
            "shortcut-split",
            "--train",
            args.train,
            "--test",
            args.test,
            "--by",
            args.by,
            "--rule",
            rule,
            "--out",
            str(work / f"split-{rule}"),
        ]
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in jobs}
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for _ in range(args.repeat):
        for name, cmd in jobs.items():
            times[name].append(timed([*cmd, "--overwrite"]))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    median = {}
    for name, runs in times.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = next(c for w, c in runs if w == wall)
        median[name] = (wall, cpu)
        print(f"{name:15s} wall {wall:6.2f} s  cpu {cpu:6.2f} s  (runs: {len(runs)})")
    tw, tc = median["stats"]
    for rule in rules:
        sw, sc = median[f"split {rule}"]
        print(f"ratio split {rule} / stats: wall {sw / tw:.2f}, cpu {sc / tc:.2f} (target <= 2)")
    if {"sum-z", "effect"} <= set(rules):
        (ew, ec), (ow, oc) = median["split effect"], median["split sum-z"]
        print(f"ratio effect / sum-z: wall {ew / ow:.2f}, cpu {ec / oc:.2f} (target <= 2)")


if __name__ == "__main__":
    main()
