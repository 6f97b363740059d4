"""Speed of the group metrics of ``zdebias evaluate --shortcut-split`` (issue 55.2).

Run: ``python benchmarks/bench_groups.py`` (options: ``--split DIR``, a shortcut-split folder;
by default one is made of ``snli_20k/train.jsonl`` → the full SNLI test set
(``snli_full_devtest::test``, 9,824 pairs); ``--runs`` (5) seeds; ``--repeat`` (5)). Needs the
real SNLI text: ``$ZDEBIAS_TEST_DATA`` (default ``../shared/data``).

Only the metric part is timed, on synthetic outcomes (no model): *before* is what evaluate
did with a split before the groups (check the split's slice files against its summary, then
each run's accuracy per slice and the gap); *after* adds each run's gold label × verdict
groups, worst group and per-shortcut view. Prints the median of ``--repeat`` runs of each and
the ratio after / before: the target (issue 55) is 2 or less.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import data_dir


def synthetic(split: dict[str, Any], rows: dict[str, list[Any]], runs: int) -> dict[str, Any]:
    """A results document of ``runs`` runs with random outcomes on the split's slices."""
    from zdebias.evaluation.reliance import SUITES

    rng = random.Random(0)
    docs = []
    for i in range(runs):
        results, metrics = {}, {}
        for name, records in rows.items():
            out = "".join("1" if rng.random() < 0.8 else "0" for _ in records)
            acc = out.count("1") / len(out)
            results[SUITES[name]] = {"accuracy": acc, "outcomes": out, "n": len(out)}
            metrics[SUITES[name]] = acc
        docs.append({"model": f"run{i}", "results": results, "metrics": metrics})
    return {"name": "bench", "runs": docs, "summary": {}}


def main() -> None:
    data = data_dir()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default=None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from zdebias.evaluation import reliance

    folder = args.split
    if folder is None:
        folder = str(Path(tempfile.mkdtemp(prefix="bench-groups-")) / "split")
        cmd = [sys.executable, "-m", "zdebias.cli", "shortcut-split"]
        cmd += ["--train", str(data / "snli_20k" / "train.jsonl")]
        cmd += ["--test", str(data / "snli_full_devtest") + "::test", "--out", folder]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    split = reliance.read_split(folder)
    rows = reliance.check_split(split, [])["rows"]
    n = sum(len(r) for r in rows.values())

    def before() -> None:
        reliance.check_split(split, [])
        doc = synthetic(split, rows, args.runs)
        for run in doc["runs"]:
            reliance.run_reliance(run)

    def after() -> None:
        found = reliance.check_split(split, [])
        doc = synthetic(split, rows, args.runs)
        reliance.add_reliance(doc, {**split, "suite": None}, rows=found["rows"])
        assert all("groups" in run for run in doc["runs"])

    times: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(args.repeat):  # taking turns: load on a shared machine hits both alike
        for name, job in (("before", before), ("after", after)):
            start = time.perf_counter()
            job()
            times[name].append(time.perf_counter() - start)
    b, a = statistics.median(times["before"]), statistics.median(times["after"])
    print(f"{n:,} test rows, {args.runs} runs (median of {args.repeat}):")
    print(f"  before (slices checked, accuracy per slice, gap): {b:.3f} s")
    print(f"  after (+ groups, worst group, per-shortcut view): {a:.3f} s")
    print(f"  ratio after / before: {a / b:.2f} (target: 2 or less)")


if __name__ == "__main__":
    main()
