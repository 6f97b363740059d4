"""Speed and memory of z-statistics and z-filtering on a 1M-example SNLI-like file.

Run: ``python benchmarks/bench_zfilter.py [--n 1000000] [--workdir /tmp/zdebias-bench]``
(``make bench``). Needs the real SNLI text: ``$ZDEBIAS_TEST_DATA`` (default ``../shared/data``).

The input is built once (cached in the work folder) from every real SNLI pair available
offline (snli_20k train/dev/test, full SNLI dev/test, SNLI-hard: ~50k distinct pairs): row i is
a random pair with its label, and for half of the rows the premise gets a second real premise
appended, so rows are rarely exact copies while every hypothesis/label artifact stays real.

Each stage runs in a fresh subprocess (so its peak memory is its own) and prints its time:

- ``parse+tokenise``: read the JSONL into records and tokenise premise and hypothesis;
- ``stats``: read, extract all default features (incl. the cross-fitted hypothesis-only
  classifier), z-statistics for every feature and label (what ``zdebias stats`` does);
- ``filter``: read, extract features, z-filter (k = 20, batch 1,000), write kept.jsonl,
  rejected.jsonl and summary.json (what ``zdebias filter`` does).

Targets (2 cores): filter 1M in <= 30 s, <= 3x parse+tokenise, <= 4 GB peak.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

from _common import data_dir

SOURCES = [
    "snli_20k/train.jsonl",
    "snli_20k/dev.jsonl",
    "snli_20k/test.jsonl",
    "snli_full_devtest::dev",
    "snli_full_devtest::test",
    "snli_hard/snli_1.0_test_hard.jsonl",
]


def build_input(path: Path, n: int, seed: int = 0) -> None:
    """Write ``n`` SNLI-like JSONL rows recombined from the real SNLI pairs."""
    from zdebias.data.readers import read_records

    root = data_dir()
    pairs: dict[tuple[str, str], str] = {}
    for source in SOURCES:
        spec = str(root / source) if "::" not in source else f"{root / source}"
        for r in read_records(spec, task="nli"):
            pairs.setdefault((r.premise, r.hypothesis), r.label)
    base = [(p, h, lab) for (p, h), lab in pairs.items()]
    premises = [p for p, _, _ in base]
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for i in range(n):
            p, h, lab = base[rng.randrange(len(base))]
            if rng.random() < 0.5:
                p = f"{p} {premises[rng.randrange(len(premises))]}"
            fh.write(json.dumps({"id": f"b{i}", "premise": p, "hypothesis": h, "label": lab}))
            fh.write("\n")
    tmp.replace(path)
    print(f"built {path} ({n:,} rows from {len(base):,} real SNLI pairs)", flush=True)


class Clock:
    """Wall-clock and CPU seconds since the last ``lap`` (CPU time is what a stage would take
    on an idle machine: every stage is single-threaded, OMP_NUM_THREADS=1)."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.laps[f"{name}_s"] = wall - self.wall
        self.laps[f"{name}_cpu"] = cpu - self.cpu
        self.wall, self.cpu = wall, cpu

    def totals(self) -> dict[str, float]:
        out = dict(self.laps)
        out["total_s"] = sum(v for k, v in self.laps.items() if k.endswith("_s"))
        out["total_cpu"] = sum(v for k, v in self.laps.items() if k.endswith("_cpu"))
        return out


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # Linux: KiB


def stage_parse_tokenise(path: Path) -> dict[str, float]:
    from zdebias.data.readers import read_records
    from zdebias.features.tokenize import tokenize

    clock = Clock()
    records = read_records(path)
    clock.lap("read")
    n_tokens = 0
    for r in records:
        n_tokens += len(tokenize(r.premise)) + len(tokenize(r.hypothesis))
    clock.lap("tokenise")
    return {"n": len(records), **clock.totals(), "tokens": n_tokens}


def stage_stats(path: Path) -> dict[str, float]:
    from zdebias.data.labels import infer_task
    from zdebias.data.readers import read_records
    from zdebias.features.registry import extract_features
    from zdebias.stats.zstats import describe

    clock = Clock()
    records = read_records(path)
    clock.lap("read")
    labels = infer_task(records).labels
    fm = extract_features(records, labels=labels)
    clock.lap("features")
    report = describe(records, labels=labels, feature_matrix=fm)
    clock.lap("zstats")
    return {
        "n": len(records),
        **clock.totals(),
        "n_features": report["n_features"],
        "max_z": report["max_z"],
    }


def stage_filter(path: Path, out: Path) -> dict[str, float]:
    from zdebias.data.labels import infer_task
    from zdebias.data.readers import read_records
    from zdebias.data.writers import write_json, write_jsonl
    from zdebias.features.registry import extract_features
    from zdebias.stats.zfilter import z_filter

    clock = Clock()
    records = read_records(path)
    clock.lap("read")
    labels = infer_task(records).labels
    fm = extract_features(records, labels=labels)
    clock.lap("features")
    result = z_filter(
        records, feature_matrix=fm, labels=labels, biased_k=20, zfilter_batch_size=1000
    )
    clock.lap("filter")
    write_jsonl(result.kept, out / "kept.jsonl")
    write_jsonl(result.rejected, out / "rejected.jsonl")
    write_json(result.summary, out / "summary.json")
    clock.lap("write")
    s = result.summary
    return {
        "n": len(records),
        **clock.totals(),
        "n_kept": s["n_kept"],
        "n_rejected": s["n_rejected"],
        "top_z_before": {k: round(v["z"], 1) for k, v in s["top_z_before"].items()},
        "top_z_after": {k: round(v["z"], 1) for k, v in s["top_z_after"].items()},
    }


def run_stage(stage: str, path: Path, workdir: Path) -> dict[str, float]:
    proc = subprocess.run(
        [
            sys.executable,
            __file__,
            "--stage",
            stage,
            "--input",
            str(path),
            "--workdir",
            str(workdir),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"stage {stage} failed")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="examples (default 1M)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/zdebias-bench"))
    parser.add_argument("--stage", choices=["parse", "stats", "filter"], help=argparse.SUPPRESS)
    parser.add_argument("--input", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.stage:
        fn = {
            "parse": lambda: stage_parse_tokenise(args.input),
            "stats": lambda: stage_stats(args.input),
            "filter": lambda: stage_filter(args.input, args.workdir / "filtered"),
        }[args.stage]
        result = fn()
        result["peak_rss_gb"] = peak_rss_gb()
        print(json.dumps(result))
        return

    path = args.workdir / f"snli_like_{args.n}.jsonl"
    if not path.exists():
        build_input(path, args.n)
    size_mb = path.stat().st_size / 1e6
    print(
        f"input: {path} ({size_mb:.0f} MB), cpu cores: {os.cpu_count()}, "
        f"load average: {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    parse = run_stage("parse", path, args.workdir)
    stats = run_stage("stats", path, args.workdir)
    filt = run_stage("filter", path, args.workdir)
    n = parse["n"]

    def line(name: str, r: dict[str, float], parts: list[str]) -> str:
        detail = ", ".join(f"{p} {r[p + '_s']:.1f}/{r[p + '_cpu']:.1f}" for p in parts)
        ratio = (
            f"  {r['total_s'] / parse['total_s']:.2f}x / "
            f"{r['total_cpu'] / parse['total_cpu']:.2f}x parse+tokenise"
            if r is not parse
            else ""
        )
        return (
            f"{name:<15} wall {r['total_s']:6.1f} s ({n / r['total_s']:>8,.0f} ex/s)  cpu "
            f"{r['total_cpu']:6.1f} s ({n / r['total_cpu']:>8,.0f} ex/s)  [{detail}]"
            f"{ratio}  peak {r['peak_rss_gb']:.2f} GB"
        )

    print("stage            wall-clock and CPU seconds; [part wall/cpu]", flush=True)
    print(line("parse+tokenise", parse, ["read", "tokenise"]))
    print(line("stats", stats, ["read", "features", "zstats"]))
    print(line("filter", filt, ["read", "features", "filter", "write"]))
    print(
        f"features: {stats['n_features']:,}; z-filter (k=20, batch 1000) kept "
        f"{filt['n_kept']:,}, rejected {filt['n_rejected']:,}"
    )
    print(f"top z before {filt['top_z_before']}  after {filt['top_z_after']}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
