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

SOURCES = [
    "snli_20k/train.jsonl",
    "snli_20k/dev.jsonl",
    "snli_20k/test.jsonl",
    "snli_full_devtest::dev",
    "snli_full_devtest::test",
    "snli_hard/snli_1.0_test_hard.jsonl",
]


def data_dir() -> Path:
    value = os.environ.get("ZDEBIAS_TEST_DATA")
    if value:
        return Path(value)
    return Path(__file__).resolve().parents[2] / "shared" / "data"


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


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # Linux: KiB


def stage_parse_tokenise(path: Path) -> dict[str, float]:
    from zdebias.data.readers import read_records
    from zdebias.features.tokenize import tokenize

    t0 = time.perf_counter()
    records = read_records(path)
    t1 = time.perf_counter()
    n_tokens = 0
    for r in records:
        n_tokens += len(tokenize(r.premise)) + len(tokenize(r.hypothesis))
    t2 = time.perf_counter()
    return {"n": len(records), "read_s": t1 - t0, "tokenise_s": t2 - t1, "total_s": t2 - t0,
            "tokens": n_tokens}


def stage_stats(path: Path) -> dict[str, float]:
    from zdebias.data.readers import read_records
    from zdebias.features.registry import extract_features
    from zdebias.stats.zstats import describe, infer_labels

    t0 = time.perf_counter()
    records = read_records(path)
    t1 = time.perf_counter()
    labels = infer_labels(records)
    fm = extract_features(records, labels=labels)
    t2 = time.perf_counter()
    report = describe(records, labels=labels, feature_matrix=fm)
    t3 = time.perf_counter()
    return {"n": len(records), "read_s": t1 - t0, "features_s": t2 - t1, "zstats_s": t3 - t2,
            "total_s": t3 - t0, "n_features": report["n_features"],
            "max_z": report["max_z"]}


def stage_filter(path: Path, out: Path) -> dict[str, float]:
    from zdebias.data.readers import read_records
    from zdebias.data.writers import write_json, write_jsonl
    from zdebias.features.registry import extract_features
    from zdebias.stats.zfilter import z_filter
    from zdebias.stats.zstats import infer_labels

    t0 = time.perf_counter()
    records = read_records(path)
    t1 = time.perf_counter()
    labels = infer_labels(records)
    fm = extract_features(records, labels=labels)
    t2 = time.perf_counter()
    result = z_filter(records, features=fm, labels=labels, top_k=20, batch_size=1000)
    t3 = time.perf_counter()
    write_jsonl(result.kept, out / "kept.jsonl")
    write_jsonl(result.rejected, out / "rejected.jsonl")
    write_json(result.summary, out / "summary.json")
    t4 = time.perf_counter()
    s = result.summary
    return {"n": len(records), "read_s": t1 - t0, "features_s": t2 - t1, "filter_s": t3 - t2,
            "write_s": t4 - t3, "total_s": t4 - t0, "n_kept": s["n_kept"],
            "n_rejected": s["n_rejected"],
            "top_z_before": {k: round(v["z"], 1) for k, v in s["top_z_before"].items()},
            "top_z_after": {k: round(v["z"], 1) for k, v in s["top_z_after"].items()}}


def run_stage(stage: str, path: Path, workdir: Path) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, __file__, "--stage", stage, "--input", str(path),
         "--workdir", str(workdir)],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
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
        fn = {"parse": lambda: stage_parse_tokenise(args.input),
              "stats": lambda: stage_stats(args.input),
              "filter": lambda: stage_filter(args.input, args.workdir / "filtered")}[args.stage]
        result = fn()
        result["peak_rss_gb"] = peak_rss_gb()
        print(json.dumps(result))
        return

    path = args.workdir / f"snli_like_{args.n}.jsonl"
    if not path.exists():
        build_input(path, args.n)
    size_mb = path.stat().st_size / 1e6
    print(f"input: {path} ({size_mb:.0f} MB), cpu cores: {os.cpu_count()}, "
          f"load average: {os.getloadavg()[0]:.2f}", flush=True)
    parse = run_stage("parse", path, args.workdir)
    print(f"parse+tokenise  {parse['total_s']:6.1f} s  {parse['n'] / parse['total_s']:>9,.0f} ex/s"
          f"  (read {parse['read_s']:.1f} s, tokenise {parse['tokenise_s']:.1f} s)"
          f"  peak {parse['peak_rss_gb']:.2f} GB", flush=True)
    stats = run_stage("stats", path, args.workdir)
    print(f"stats           {stats['total_s']:6.1f} s  {stats['n'] / stats['total_s']:>9,.0f} ex/s"
          f"  (read {stats['read_s']:.1f}, features {stats['features_s']:.1f}, z "
          f"{stats['zstats_s']:.1f})  {stats['total_s'] / parse['total_s']:.2f}x parse+tokenise"
          f"  peak {stats['peak_rss_gb']:.2f} GB  features {stats['n_features']:,}", flush=True)
    filt = run_stage("filter", path, args.workdir)
    print(f"filter          {filt['total_s']:6.1f} s  {filt['n'] / filt['total_s']:>9,.0f} ex/s"
          f"  (read {filt['read_s']:.1f}, features {filt['features_s']:.1f}, z-filter "
          f"{filt['filter_s']:.1f}, write {filt['write_s']:.1f})"
          f"  {filt['total_s'] / parse['total_s']:.2f}x parse+tokenise"
          f"  peak {filt['peak_rss_gb']:.2f} GB", flush=True)
    print(f"z-filter loop alone (k=20, batch 1000): {filt['filter_s']:.1f} s, "
          f"{filt['n'] / filt['filter_s']:,.0f} ex/s; kept {filt['n_kept']:,}, "
          f"rejected {filt['n_rejected']:,}")
    print(f"top z before {filt['top_z_before']}  after {filt['top_z_after']}")


if __name__ == "__main__":
    main()
