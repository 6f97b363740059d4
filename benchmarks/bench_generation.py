"""CPU throughput of the data generator: training tokens/s and sampled examples/s (smollm2).

Run: ``python benchmarks/bench_generation.py [--model smollm2] [--steps 6] [--batch-size 8]
[--consistency-weight 0.5] [--sample-batch 32] [--rounds 1] [--threads N]``.
Needs the real SNLI text: ``$ZDEBIAS_TEST_DATA`` (default ``../shared/data``).

- ``train``: :func:`zdebias.generation.trainer.train_generator` for ``--steps`` steps on random
  ``snli_20k`` pairs (max length 64). ``tokens_per_s`` counts the non-padding tokens of the
  training sequences per second of training (the perturbed copies of the consistency loss are
  extra forward work, not extra tokens); the wall time includes loading and saving.
- ``sample``: the sampler's HF backend on the generator just trained: ``--rounds`` batches of
  ``--sample-batch`` sequences (after a small warm-up batch), each parsed back into (P, l, H);
  sequences/s, parseable share and well-formed examples/s. A few training steps do not teach
  the format, so the generator writes until the length limit: a worst case for speed.

For a GPT-2-large-sized model on a GPU, see ``scripts/gpu_check_generate.py``.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from _common import data_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--consistency-weight", type=float, default=0.5)
    parser.add_argument("--sample-batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()

    import torch
    import transformers
    from transformers import AutoTokenizer

    from zdebias.data.readers import read_records
    from zdebias.generation.format import GeneratorFormat, parse_output
    from zdebias.generation.sample import HFBackend, SampleSettings, round_seed
    from zdebias.generation.trainer import train_generator

    transformers.logging.set_verbosity_error()
    if args.threads:
        torch.set_num_threads(args.threads)
    records = read_records(data_dir() / "snli_20k" / "train.jsonl")
    records = random.Random(0).sample(records, args.steps * args.batch_size)
    result: dict = {"model": args.model, "torch_threads": torch.get_num_threads()}
    with tempfile.TemporaryDirectory() as tmp:
        gen = Path(tmp) / "gen"
        start = time.perf_counter()
        summary = train_generator(
            records,
            args.model,
            gen,
            max_steps=args.steps,
            learning_rate=2e-4,
            per_device_train_batch_size=args.batch_size,
            max_length=64,
            consistency_weight=args.consistency_weight,
            disable_tqdm=True,
            seed=0,
        )
        result["train"] = {
            "steps": summary["steps"],
            "batch_size": args.batch_size,
            "consistency_weight": args.consistency_weight,
            "tokens": summary["train_tokens"],
            "train_seconds": summary["train_seconds"],
            "tokens_per_s": summary["train_tokens_per_s"],
            "wall_seconds": round(time.perf_counter() - start, 1),
        }
        fmt = GeneratorFormat.load(gen)
        tok = AutoTokenizer.from_pretrained(gen)
        backend = HFBackend(
            gen, fmt, SampleSettings(n=1, batch_size=args.sample_batch), device="cpu"
        )
        backend.generate(2, round_seed(0, 999))  # warm-up
        start = time.perf_counter()
        ok = n = 0
        for r in range(args.rounds):
            for ids in backend.generate(args.sample_batch, round_seed(0, r)):
                n += 1
                ok += parse_output(ids, tok, fmt).ok
        seconds = time.perf_counter() - start
        result["sample"] = {
            "sequences": n,
            "max_new_tokens": fmt.max_length - 1,
            "seconds": round(seconds, 2),
            "sequences_per_s": round(n / seconds, 2),
            "parseable_share": round(ok / n, 3),
            "wellformed_per_s": round(ok / seconds, 2),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
