"""Speed of AFLite's rounds (``zdebias.stats.aflite``) on embeddings of snli_20k train's shape.

Run: ``python benchmarks/bench_aflite.py`` (options: ``--embeddings FILE.npy`` real embeddings,
e.g. the MiniLM cache file ``zdebias filter --method aflite`` wrote, with ``--labels FILE``
(the JSONL they embed, for the gold labels); else random embeddings of ``--rows`` (19,993)
× ``--dim`` (384, MiniLM's) with three labels and a planted third; ``--rounds`` (3) rounds
timed; ``--n`` (64); ``--steps`` (100); ``--threads`` (BLAS threads, default: numpy's)).

Prints, per round, its seconds and rows scored per second, then the median. The n models of a
round are trained at once (one matrix product of the rows left by all models' weights per
step), so a round costs about ``steps`` × 2 × rows × dim × n × labels multiply-adds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embeddings", default=None)
    parser.add_argument("--labels", default=None)
    parser.add_argument("--rows", type=int, default=19_993)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[name] = str(args.threads)

    import numpy as np

    from zdebias.stats.aflite import aflite_arrays
    from zdebias.stats.settings import AfliteSettings, scaled_aflite

    if args.embeddings:
        from zdebias.data import read_records
        from zdebias.data.labels import label_ids

        x = np.load(args.embeddings)
        if not args.labels:
            sys.exit("--embeddings needs --labels (the JSONL file they embed)")
        labels = ("entailment", "neutral", "contradiction")
        y = label_ids(read_records(args.labels), labels)
        what = f"{args.embeddings} {x.shape}"
    else:
        rng = np.random.default_rng(0)
        y = np.arange(args.rows) % 3
        x = rng.normal(size=(args.rows, args.dim)).astype(np.float32)
        planted = rng.permutation(args.rows)[: args.rows // 3]
        x[planted, y[planted]] += 3.0
        what = f"random {x.shape}, a planted third"
    m, k, _ = scaled_aflite(len(y), AfliteSettings())
    print(f"AFLite on {what}: n {args.n}, m {m}, k {k}, {args.steps} steps; load {os.getloadavg()}")
    times: list[float] = []
    for r in range(args.rounds):
        start = time.perf_counter()
        out = aflite_arrays(
            x, y, 3, n=args.n, m=m, k=k, tau=0.75, target=len(y) - k, seed=r, steps=args.steps
        )
        took = time.perf_counter() - start
        times.append(took)
        info = out.rounds[0]
        print(
            f"round {r + 1}: {took:.2f} s, {info['rows'] / took:,.0f} rows/s, "
            f"{info['at_or_above_tau']:,} at or above τ, mean score {info['mean_score']}"
        )
    med = statistics.median(times)
    print(f"median: {med:.2f} s per round, {len(y) / med:,.0f} rows/s; load {os.getloadavg()}")


if __name__ == "__main__":
    main()
