"""Sampling on N workers (``--workers N``) against one process: wall time and extra rounds.

Run: ``python benchmarks/bench_sample_workers.py [--n 400] [--round-seconds 0.5]
[--workers 2 4] [--repeat 2]``.

The backend is a stand-in for an accelerator: each round sleeps ``--round-seconds`` (the time a
GPU would take for one batch) and returns 16 demo-grammar samples seeded by the round, so the
numbers measure what the worker layer adds: process start-up, the checks after each shard, the
rounds the workers sample past the one-process run's last (``extra_rounds``), and the merge.
``sampling_speedup`` leaves out the start-up (each worker process imports torch and loads its
model: seconds, against hours of sampling at paper scale).
The runs are interleaved (1 process, then each N, ``--repeat`` times) so that machine load
hits them alike; ``speedup`` is the one-process wall time over the N-worker wall time, and
every merged ``samples.jsonl`` is checked to equal the one-process file byte for byte.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

BATCH = 16


class SleepBackend:
    """One round: sleep, then ``batch_size`` demo-grammar samples of the round's seed."""

    def __init__(self, generator: Path, fmt: Any, settings: Any, **_: Any) -> None:
        from transformers import AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(generator)
        self.fmt = fmt
        self.seconds = float(os.environ.get("BENCH_ROUND_SECONDS", "0.5"))

    def generate(self, batch_size: int, seed: int) -> list[list[int]]:
        from zdebias.data.demo import make_demo_corpus

        time.sleep(self.seconds)
        corpus = make_demo_corpus(seed=seed % 2**31, n_train=max(30, batch_size), n_dev=3, n_test=3)
        out = []
        for r in corpus["train"][:batch_size]:
            ids = self.tok(r.premise, add_special_tokens=False)["input_ids"]
            ids.append(self.fmt.label_token_ids[r.label])
            ids += self.tok(r.hypothesis, add_special_tokens=False)["input_ids"]
            ids.append(self.fmt.eos_token_id)
            out.append(ids)
        return out


def _generator(root: Path) -> Path:
    from zdebias.generation.tiny import make_tiny_generator

    return make_tiny_generator(root / "gen", max_length=96)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--round-seconds", type=float, default=0.5)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    os.environ["BENCH_ROUND_SECONDS"] = str(args.round_seconds)

    import transformers

    from zdebias.generation import trained as trained_mod
    from zdebias.generation.sample import sample_generator

    transformers.logging.set_verbosity_error()
    trained_mod.BACKENDS["hf"] = SleepBackend  # type: ignore[assignment]
    options = {"batch_size": BATCH, "shard_size": 64, "progress": False}
    times: dict[int, list[float]] = {1: [], **{w: [] for w in args.workers}}
    extra: dict[int, list[int]] = {w: [] for w in args.workers}
    sampling: dict[int, list[float]] = {w: [] for w in args.workers}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        gen = _generator(root)
        for rep in range(args.repeat):
            start = time.perf_counter()
            one = sample_generator(gen, root / f"one-{rep}", args.n, **options)
            times[1].append(time.perf_counter() - start)
            reference = (root / f"one-{rep}" / "samples.jsonl").read_bytes()
            for w in args.workers:
                start = time.perf_counter()
                merged = sample_generator(gen, root / f"w{w}-{rep}", args.n, workers=w, **options)
                times[w].append(time.perf_counter() - start)
                assert (root / f"w{w}-{rep}" / "samples.jsonl").read_bytes() == reference
                extra[w].append(merged["rounds_sampled"] - one["n_generated"] // BATCH)
                sampling[w].append(max(x["seconds"] for x in merged["per_worker"]))
    result = {
        "n": args.n,
        "rounds_one_process": one["n_generated"] // BATCH,
        "round_seconds": args.round_seconds,
        "load_average": os.getloadavg(),
        "seconds": {str(w): [round(t, 2) for t in ts] for w, ts in times.items()},
        "speedup": {str(w): round(min(times[1]) / min(times[w]), 2) for w in args.workers},
        "extra_rounds": {str(w): v for w, v in extra.items()},
        # the slowest worker's seconds from its first round to its last shard: wall time less
        # process start-up (imports, model load), waiting and the merge
        "worker_sampling_seconds": {
            str(w): [round(t, 2) for t in ts] for w, ts in sampling.items()
        },
        "sampling_speedup": {
            str(w): round(min(times[1]) / min(sampling[w]), 2) for w in args.workers
        },
        "merged_equals_one_process": True,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
