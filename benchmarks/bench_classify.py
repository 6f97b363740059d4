"""CPU training and inference throughput of the packaged MiniLM classifier (examples/s).

Run: ``python benchmarks/bench_classify.py [--n-train 256] [--n-infer 1024] [--threads N]``.
Needs the real SNLI text: ``$ZDEBIAS_TEST_DATA`` (default ``../shared/data``).

- ``train``: :func:`zdebias.classify.train.train_classifier` on ``--n-train`` random SNLI pairs
  (batch 32, one pass, length-grouped batches, no dev set): the HF Trainer's
  ``train_samples_per_second`` and the wall time of the whole call (model load, tokenisation,
  saving included);
- ``predict``: :func:`zdebias.classify.predict.predict_proba` on ``--n-infer`` SNLI dev pairs
  (batch 64, length-sorted), after one warm-up batch.

For a BERT-base-sized model on a GPU, see ``scripts/gpu_check_classify.py``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _common import data_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--n-train", type=int, default=256)
    parser.add_argument("--n-infer", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()

    import numpy as np
    import torch

    from zdebias.classify.predict import load_classifier, predict_proba
    from zdebias.classify.train import train_classifier
    from zdebias.data.readers import read_records

    if args.threads:
        torch.set_num_threads(args.threads)
    root = data_dir()
    train_all = read_records(root / "snli_20k" / "train.jsonl")
    dev_all = read_records(root / "snli_20k" / "dev.jsonl")
    rng = np.random.default_rng(0)
    train = [train_all[i] for i in rng.choice(len(train_all), args.n_train, replace=False)]
    infer = [dev_all[i % len(dev_all)] for i in rng.permutation(args.n_infer)]

    results: dict[str, object] = {
        "model": args.model,
        "device": "cpu",
        "threads": torch.get_num_threads(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        metrics = train_classifier(
            train,
            None,
            Path(tmp) / "clf",
            model=args.model,
            learning_rate=1e-4,
            batch_size=32,
            epochs=1,
            warmup_steps=0,
            progress=False,
            device="cpu",
        )
        wall = time.perf_counter() - start
        results["train"] = {
            "examples": args.n_train,
            "steps": metrics["steps"],
            "trainer_examples_per_s": round(metrics["train_samples_per_second"], 2),
            "call_wall_s": round(wall, 2),
            "call_examples_per_s": round(args.n_train / wall, 2),
        }
        clf = load_classifier(Path(tmp) / "clf", device="cpu")
        predict_proba(clf, infer[:64])  # warm-up
        start = time.perf_counter()
        predict_proba(clf, infer, batch_size=64)
        wall = time.perf_counter() - start
        results["predict"] = {
            "examples": args.n_infer,
            "wall_s": round(wall, 2),
            "examples_per_s": round(args.n_infer / wall, 2),
        }
    print(
        f"train   {args.model}: {results['train']['trainer_examples_per_s']:8.1f} examples/s "
        f"(Trainer loop; {results['train']['call_examples_per_s']:.1f}/s for the whole call)"
    )
    print(f"predict {args.model}: {results['predict']['examples_per_s']:8.1f} examples/s")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
