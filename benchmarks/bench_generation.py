"""CPU throughput of the data generator: training tokens/s, and sampling side by side with
``model.generate`` and the FLOP bound (smollm2).

Run: ``python benchmarks/bench_generation.py [--generator DIR] [--n 120] [--repeats 2]
[--batch-size 32] [--shard-size 16] [--top-p 0.9] [--dtype auto] [--threads N]``
(the defaults are the demo's ``samples`` stage). Without ``--generator`` a generator is first
fine-tuned from ``--model`` for ``--steps`` steps on random ``snli_20k`` pairs (max length 64;
needs ``$ZDEBIAS_TEST_DATA``, default ``../shared/data``): ``train`` reports its tokens/s.
A few steps do not teach the format well, so such a generator often writes until the length
limit; the demo's generator (``runs/demo/generator/model``) is the realistic case.

``sample``: ``--repeats`` times, alternately, the same :func:`sample_generator` run
(``--n`` samples, fresh folder) with the HF backend's decoding loop (``zdebias``) and with
``model.generate`` (``model_generate``, the sampler before the loop), so both see the same
machine load. Per variant: ``samples_per_s`` (the sampler's own summary), ``tokens_per_s``
(generated tokens, up to and including each row's end token, per second of sampling; of all
``rounds_decoded``: the loop decodes 128 // batch rounds at once, so a run's last batch may
hold rounds it does not use),
``generate_tokens_per_s`` (per second inside the backend's ``generate`` alone: for
``model_generate`` the plain ``model.generate`` loop) and ``row_steps`` (rows x decoding steps
the model computed; ``model.generate`` keeps finished rows until the longest ends).
``bound``: the matmul FLOP/s measured here in the model's dtype (a 1024-cube, best of 5,
between the runs) and the tokens/s it allows, ``flop_s / (2 x parameters)``. ``ratios``:
``zdebias`` over ``model_generate``, per repeat and overall. ``load`` is the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import data_dir


def _train(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from zdebias.data.readers import read_records
    from zdebias.generation.trainer import train_generator

    records = read_records(data_dir() / "snli_20k" / "train.jsonl")
    records = random.Random(0).sample(records, args.steps * args.train_batch)
    start = time.perf_counter()
    summary = train_generator(
        records,
        args.model,
        out,
        max_steps=args.steps,
        learning_rate=2e-4,
        per_device_train_batch_size=args.train_batch,
        max_length=64,
        consistency_weight=args.consistency_weight,
        disable_tqdm=True,
        seed=0,
    )
    return {
        "steps": summary["steps"],
        "batch_size": args.train_batch,
        "consistency_weight": args.consistency_weight,
        "tokens": summary["train_tokens"],
        "train_seconds": summary["train_seconds"],
        "tokens_per_s": summary["train_tokens_per_s"],
        "wall_seconds": round(time.perf_counter() - start, 1),
    }


def _matmul_flops(dtype: Any, size: int = 1024, tries: int = 5) -> float:
    """The best matmul FLOP/s of ``tries`` ``size``-cubes in ``dtype`` (after one warm-up)."""
    import torch

    a = torch.randn(size, size).to(dtype)
    b = torch.randn(size, size).to(dtype)
    a @ b
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def _timed_backend(new: bool, log: dict[str, Any]) -> type:
    """The HF backend, timed into ``log``: its decoding loop (``new``) or ``model.generate``
    one round at a time (the sampler before the loop)."""
    from zdebias.generation.trained import HFBackend

    class Timed(HFBackend):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            log["parameters"] = sum(p.numel() for p in self.model.parameters())
            log["dtype"] = str(self.model.dtype).removeprefix("torch.")

        def rounds_per_batch(self, batch_size: int) -> int:
            return super().rounds_per_batch(batch_size) if new else 1

        def generate_rounds(self, batch_size: int, seeds: Any) -> list[list[list[int]]]:
            start = time.perf_counter()
            if new:
                rounds = super().generate_rounds(batch_size, seeds)
            else:
                rounds = [self.generate_hf(batch_size, seed) for seed in seeds]
            log["generate_seconds"] += time.perf_counter() - start
            eos = self.fmt.eos_token_id
            for rows in rounds:
                log["rounds_decoded"] += 1
                log["tokens"] += sum(r.index(eos) + 1 if eos in r else len(r) for r in rows)
                if not new:  # model.generate runs every row to the longest
                    log["row_steps"] += len(rows) * len(rows[0])
            if new:
                log["row_steps"] = self.stats["row_steps"]
            return rounds

    return Timed


def _sample_once(gen: Path, out: Path, new: bool, args: argparse.Namespace) -> dict[str, Any]:
    from zdebias.generation import trained as trained_mod
    from zdebias.generation.sample import sample_generator

    log: dict[str, Any] = {"generate_seconds": 0.0, "tokens": 0, "row_steps": 0}
    log["rounds_decoded"] = 0
    saved = trained_mod.BACKENDS["hf"]
    trained_mod.BACKENDS["hf"] = _timed_backend(new, log)
    try:
        summary = sample_generator(
            gen,
            out,
            n=args.n,
            batch_size=args.batch_size,
            shard_size=args.shard_size,
            top_p=args.top_p,
            dtype=args.dtype,
            seed=args.seed,
            device="cpu",
            progress=False,
        )
    finally:
        trained_mod.BACKENDS["hf"] = saved
    seconds = summary["seconds"]
    return {
        "samples": summary["n_written"],
        "generated": summary["n_generated"],
        "parseable_share": summary["parseable_share"],
        "seconds": seconds,
        "samples_per_s": round(summary["n_written"] / seconds, 3),
        "tokens": log["tokens"],
        "tokens_per_s": round(log["tokens"] / seconds, 1),
        "generate_tokens_per_s": round(log["tokens"] / log["generate_seconds"], 1),
        "row_steps": log["row_steps"],
        "rounds": -(-summary["n_generated"] // args.batch_size),
        "rounds_decoded": log["rounds_decoded"],
        "parameters": log["parameters"],
        "dtype": log["dtype"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--generator", type=Path, default=None, help="a generator folder")
    parser.add_argument("--model", default="smollm2", help="model to fine-tune (no --generator)")
    parser.add_argument("--steps", type=int, default=6, help="training steps (no --generator)")
    parser.add_argument("--train-batch", type=int, default=8)
    parser.add_argument("--consistency-weight", type=float, default=0.5)
    parser.add_argument("--n", type=int, default=120, help="samples per sampling run")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--shard-size", type=int, default=16)
    parser.add_argument("--top-p", type=float, default=0.9)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()

    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    if args.threads:
        torch.set_num_threads(args.threads)
    result: dict[str, Any] = {
        "torch_threads": torch.get_num_threads(),
        "settings": {
            k: getattr(args, k) for k in ("n", "batch_size", "shard_size", "top_p", "dtype")
        },
        "load": {"before": os.getloadavg()[0]},
    }
    with tempfile.TemporaryDirectory() as tmp:
        gen = args.generator
        if gen is None:
            gen = Path(tmp) / "gen"
            result["train"] = _train(args, gen)
        runs: dict[str, list[dict[str, Any]]] = {"zdebias": [], "model_generate": []}
        flops: list[float] = []
        for rep in range(args.repeats):
            order = ["model_generate", "zdebias"]
            for name in order if rep % 2 == 0 else order[::-1]:
                folder = Path(tmp) / f"{name}-{rep}"
                runs[name].append(_sample_once(gen, folder, name == "zdebias", args))
                dtype = getattr(torch, runs[name][-1]["dtype"])
                flops.append(_matmul_flops(dtype))
    result["load"]["after"] = os.getloadavg()[0]
    sample: dict[str, Any] = {}
    for name, rows in runs.items():
        seconds = sum(r["seconds"] for r in rows)
        tokens = sum(r["tokens"] for r in rows)
        sample[name] = {
            "samples_per_s": round(sum(r["samples"] for r in rows) / seconds, 3),
            "tokens_per_s": round(tokens / seconds, 1),
            "generate_tokens_per_s": [r["generate_tokens_per_s"] for r in rows],
            "row_steps": [r["row_steps"] for r in rows],
            "rounds_decoded": [r["rounds_decoded"] for r in rows],
            "runs": rows,
        }
    params = runs["zdebias"][0]["parameters"]
    flop_s = max(flops)
    tokens_per_seq = sum(r["tokens"] for r in runs["zdebias"]) / sum(
        r["rounds_decoded"] * args.batch_size for r in runs["zdebias"]
    )
    sample["bound"] = {
        "parameters": params,
        "dtype": runs["zdebias"][0]["dtype"],
        "matmul_flop_s": round(flop_s / 1e9, 1) * 1e9,
        "tokens_per_s": round(flop_s / (2 * params), 1),
        "sequences_per_s": round(flop_s / (2 * params) / tokens_per_seq, 2),
        "tokens_per_sequence": round(tokens_per_seq, 1),
    }
    ratios = [
        round(new["samples_per_s"] / old["samples_per_s"], 2)
        for new, old in zip(runs["zdebias"], runs["model_generate"], strict=True)
    ]
    sample["ratios"] = {
        "samples_per_s": ratios,
        "overall": round(
            sample["zdebias"]["samples_per_s"] / sample["model_generate"]["samples_per_s"], 2
        ),
        "zdebias_tokens_per_s_of_bound": round(
            sample["zdebias"]["tokens_per_s"] / sample["bound"]["tokens_per_s"], 3
        ),
    }
    result["sample"] = sample
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
