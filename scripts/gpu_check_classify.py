"""GPU check for classifiers: BERT-base-sized throughput, and our training path on the device.

Run on a machine with a GPU (falls back to CPU; ``--small`` shrinks everything for a quick CPU
smoke run): ``python scripts/gpu_check_classify.py [--small] [--out FILE]``. Nothing is
downloaded: the model is built from a ``BertConfig`` with BERT-base sizes (12 layers, hidden
768, 12 heads, FFN 3072) and random weights; the tokenizer is trained in-process.

1. ``raw``: ``BertForSequenceClassification`` forward + backward + AdamW step (bf16 autocast on
   a GPU that has it) at batch 32 and sequence lengths 128 and 48 (SNLI-like), and inference at
   batch 256; examples/s, tokens/s, peak GPU memory.
2. ``zdebias``: :func:`zdebias.classify.train.train_classifier` through our Trainer subclass on
   the device: a hypothesis-only model (``ce``), then a PoE model using it as the bias model, on
   4,096 NLI pairs (SNLI from ``$ZDEBIAS_TEST_DATA`` when set, else built-in sentences); then
   :func:`zdebias.classify.predict.predict_proba` on 8,192 pairs. Reports the precision the run
   used, the Trainer's examples/s and the prediction examples/s.

Writes one JSON object to stdout and to ``--out`` (default ``$OUT/gpu_check_classify.json``
when ``$OUT`` is set). Expect about one to two minutes on an H200, most of it start-up.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _gpu_common import StepClock, emit, sync


def raw_throughput(torch: Any, *, small: bool, device: str, bf16: bool) -> dict:
    """Training and inference examples/s of a randomly initialised BERT-base classifier."""
    from transformers import BertConfig, BertForSequenceClassification

    config = (
        BertConfig(num_labels=3)
        if not small
        else BertConfig(
            num_labels=3,
            hidden_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=256,
        )
    )
    model = BertForSequenceClassification(config).to(device)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, eps=1e-6)
    dtype = torch.bfloat16 if bf16 else torch.float32
    out: dict = {"parameters": params, "dtype": str(dtype).replace("torch.", "")}
    steps, warm = (3, 1) if small else (30, 5)
    for seq in (128, 48):
        ids = torch.randint(1000, config.vocab_size, (32, seq), device=device)
        labels = torch.randint(0, 3, (32,), device=device)
        model.train()
        for i in range(warm + steps):
            if i == warm:
                sync(torch)
                start = time.perf_counter()
            with torch.autocast(device_type=device.split(":")[0], dtype=dtype, enabled=bf16):
                loss = model(input_ids=ids, labels=labels).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        sync(torch)
        train_s = time.perf_counter() - start
        model.eval()
        ids = torch.randint(1000, config.vocab_size, (256, seq), device=device)
        with torch.inference_mode():
            for i in range(warm + steps):
                if i == warm:
                    sync(torch)
                    start = time.perf_counter()
                with torch.autocast(device_type=device.split(":")[0], dtype=dtype, enabled=bf16):
                    model(input_ids=ids)
        sync(torch)
        infer_s = time.perf_counter() - start
        out[f"seq{seq}"] = {
            "train_examples_per_s": round(32 * steps / train_s, 1),
            "train_tokens_per_s": round(32 * seq * steps / train_s, 1),
            "infer_examples_per_s": round(256 * steps / infer_s, 1),
        }
    if torch.cuda.is_available():
        out["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    del model, opt
    return out


def _records(n: int, seed: int = 0) -> list:
    from zdebias.data.readers import read_records
    from zdebias.data.schema import Record

    root = os.environ.get("ZDEBIAS_TEST_DATA")
    path = Path(root) / "snli_20k" / "train.jsonl" if root else None
    if path is not None and path.exists():
        rows = read_records(path)
        rng = random.Random(seed)
        return [rows[rng.randrange(len(rows))] for _ in range(n)]
    from zdebias.models.tiny import _corpus

    sentences = _corpus()
    labels = ("entailment", "neutral", "contradiction")
    rng = random.Random(seed)
    return [
        Record(
            f"synthetic:{i}",
            labels[i % 3],
            " ".join(rng.sample(sentences, 2)),
            rng.choice(sentences),
        )
        for i in range(n)
    ]


def zdebias_path(torch: Any, *, small: bool, device: str) -> dict:
    """Our Trainer subclass (ce, then PoE) and predict_proba on the device."""
    from transformers import BertConfig, BertForSequenceClassification

    from zdebias.classify.predict import load_classifier, predict_proba
    from zdebias.classify.train import train_classifier
    from zdebias.models.tiny import tiny_tokenizer

    n_train, n_pred = (128, 256) if small else (4096, 8192)
    train = _records(n_train, seed=1)
    dev = _records(256, seed=2)
    pred = _records(n_pred, seed=3)
    out: dict = {
        "n_train": n_train,
        "n_predict": n_pred,
        "data": "snli" if os.environ.get("ZDEBIAS_TEST_DATA") else "synthetic",
    }
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = tiny_tokenizer("bert")
        sizes = (
            {}
            if not small
            else dict(
                hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256
            )
        )
        config = BertConfig(
            vocab_size=len(tokenizer), num_labels=3, pad_token_id=tokenizer.pad_token_id, **sizes
        )
        base = Path(tmp) / "base"
        BertForSequenceClassification(config).save_pretrained(base)
        tokenizer.save_pretrained(base)
        common = dict(
            model=base,
            learning_rate=5e-5,
            batch_size=32,
            epochs=1,
            warmup_steps=0,
            progress=False,
            device=None if device.startswith("cuda") else "cpu",
        )
        start = time.perf_counter()
        hyp = train_classifier(
            train, dev, Path(tmp) / "hyp", input_kind="hypothesis-only", **common
        )
        hyp_wall = time.perf_counter() - start
        start = time.perf_counter()
        poe = train_classifier(
            train,
            dev,
            Path(tmp) / "poe",
            loss="poe",
            bias_model=Path(tmp) / "hyp",
            beta=2.0,
            gamma=0.4,
            **common,
        )
        poe_wall = time.perf_counter() - start
        clf = load_classifier(Path(tmp) / "poe")
        predict_proba(clf, pred[:256], batch_size=256)  # warm-up
        sync(torch)
        start = time.perf_counter()
        probs = predict_proba(clf, pred, batch_size=256)
        sync(torch)
        pred_s = time.perf_counter() - start
        out.update(
            {
                "device_used": poe["settings"]["device"],
                "precision": poe["settings"]["precision"],
                "hypothesis_only": {
                    "trainer_examples_per_s": round(hyp["train_samples_per_second"], 1),
                    "call_wall_s": round(hyp_wall, 1),
                    "dev_accuracy": hyp["best"]["dev_accuracy"],
                },
                "poe": {
                    "trainer_examples_per_s": round(poe["train_samples_per_second"], 1),
                    "call_wall_s": round(poe_wall, 1),
                    "train_loss": poe["train_loss"],
                    "dev_accuracy": poe["best"]["dev_accuracy"],
                },
                "predict_examples_per_s": round(n_pred / pred_s, 1),
                "predict_rows_sum_to_one": bool(abs(float(probs.sum(1).mean()) - 1.0) < 1e-4),
            }
        )
    return out


def trainer_side_by_side(
    torch: Any, *, small: bool, device: str, bf16: bool, out: dict, save: Any
) -> dict:
    """Classifier training, zdebias vs plain HF ``Trainer`` (``DataCollatorWithPadding``), same
    rows, batch 64, BERT-large shape (24 layers, hidden 1024; random weights), 150 steps (tiny
    BERT, batch 8, 12 steps with ``--small``): samples/s, and steps/s over the first 50 steps
    and after them (the slow start issue 28 saw). No dev set: training only."""
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )

    from zdebias.classify.train import train_classifier
    from zdebias.models.tiny import tiny_tokenizer

    StepClock.install()
    batch, steps, split = (8, 12, 4) if small else (64, 150, 50)
    sizes = (
        dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256)
        if small
        else dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                  intermediate_size=4096)
    )  # fmt: skip
    train = _records(batch * steps, seed=4)
    out.update(shape="tiny bert" if small else "BERT-large", batch=batch, steps=steps)
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = tiny_tokenizer("bert")
        config = BertConfig(
            vocab_size=len(tokenizer), num_labels=3, pad_token_id=tokenizer.pad_token_id, **sizes
        )
        base = Path(tmp) / "base"
        BertForSequenceClassification(config).save_pretrained(base)
        tokenizer.save_pretrained(base)
        labels = ("entailment", "neutral", "contradiction")
        enc = tokenizer([r.premise for r in train], [r.hypothesis for r in train], truncation=True,
                        max_length=128)  # fmt: skip
        rows = [
            {**{k: enc[k][i] for k in enc}, "labels": labels.index(r.label)}
            for i, r in enumerate(train)
        ]
        args = TrainingArguments(
            output_dir=str(Path(tmp) / "plain"), per_device_train_batch_size=batch,
            max_steps=steps, learning_rate=1e-5, bf16=bf16, use_cpu=device == "cpu",
            save_strategy="no", report_to="none", disable_tqdm=True, seed=0,
        )  # fmt: skip
        plain = Trainer(
            model=BertForSequenceClassification.from_pretrained(base),
            args=args,
            train_dataset=rows,
            data_collator=DataCollatorWithPadding(tokenizer),
        )
        plain.train()
        clock = StepClock.times  # from the start of training to the last step, both runs
        out["hf_trainer"] = {
            "samples_per_s": round(batch * steps / (clock[-1] - clock[0]), 1),
            **StepClock.rates(split),
        }
        del plain
        save()  # kept if the rest is cut
        start = time.perf_counter()
        metrics = train_classifier(
            train, None, Path(tmp) / "clf", model=base, batch_size=batch, max_steps=steps,
            warmup_steps=0, learning_rate=1e-5, progress=False, checkpoint_steps=0,
            device=None if device.startswith("cuda") else "cpu",
        )  # fmt: skip
        seconds = time.perf_counter() - start
        out["zdebias"] = {
            "samples_per_s": round(batch * steps / (StepClock.times[-1] - StepClock.times[0]), 1),
            "call_wall_s": round(seconds, 1),
            "precision": metrics["settings"]["precision"],
            "group_by_length": metrics["settings"]["group_by_length"],
            **StepClock.rates(split),
        }
        out["zdebias_vs_hf_trainer"] = round(
            out["zdebias"]["samples_per_s"] / max(out["hf_trainer"]["samples_per_s"], 1e-9), 3
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="BERT-base throughput + zdebias GPU path")
    parser.add_argument("--small", action="store_true", help="tiny sizes (CPU smoke run)")
    parser.add_argument("--out", default=None, help="JSON result file")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    import torch

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    bf16 = cuda and torch.cuda.is_bf16_supported()
    result: dict = {
        "torch": torch.__version__,
        "cuda": cuda,
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "small": args.small,
    }
    import transformers

    result["transformers"] = transformers.__version__
    started = time.perf_counter()

    def save() -> None:
        emit(result, args.out, "gpu_check_classify.json", quiet=True)

    side = result.setdefault("trainer_side_by_side", {})
    for name, fn in (
        (
            "trainer_side_by_side",
            lambda: trainer_side_by_side(
                torch, small=args.small, device=device, bf16=bf16, out=side, save=save
            ),
        ),
        ("raw", lambda: raw_throughput(torch, small=args.small, device=device, bf16=bf16)),
        ("zdebias", lambda: zdebias_path(torch, small=args.small, device=device)),
    ):
        try:
            result[name] = fn()
        except Exception as err:  # report and carry on: one failing part must not hide the other
            result[name] = {**result.get(name, {}), "error": f"{type(err).__name__}: {err}"}
        emit(result, args.out, "gpu_check_classify.json", quiet=True)  # kept if a later part hangs
    result["total_s"] = round(time.perf_counter() - started, 1)
    emit(result, args.out, "gpu_check_classify.json")


if __name__ == "__main__":
    main()
