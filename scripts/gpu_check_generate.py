"""GPU check for the data generator: GPT-2-large-sized training tokens/s and sampling speed.

Run on a machine with a GPU (falls back to CPU; ``--small`` shrinks the model for a quick CPU
smoke run): ``python scripts/gpu_check_generate.py [--small] [--out FILE]``. Nothing is
downloaded: the model is a ``GPT2LMHeadModel`` built from a config with GPT-2 large sizes
(36 layers, hidden 1280, 20 heads, vocabulary 50,257; 774M parameters) and random weights; the
tokenizer is the in-process BPE of :mod:`zdebias.models.tiny`; the synthetic pairs give
sequences of median ~33 tokens (SNLI under a GPT-2-style BPE: median 25, 95th percentile 41).

1. ``raw``: forward + backward + AdamW step in bf16 autocast at batch 24 (Table 7) and padded
   length 48, once as plain MLE and once at batch 48 (MLE + consistency: the perturbed copy
   doubles the work); tokens/s counts the 24 × 48 training tokens of a step either way.
   ``model.generate`` from one start token, exactly 40 new tokens, at batch 64 and 256;
   sequences/s.
2. ``zdebias``: our code on the device. The random model is saved as a generator folder (label
   tokens added), :func:`zdebias.generation.trainer.train_generator` trains it 20 steps at batch
   24 with λ = 0.5 in bf16 on 960 synthetic pairs (``train_tokens_per_s``), then the sampler's
   HF backend (:class:`zdebias.generation.trained.HFBackend`, bf16) generates and parses batches
   of 256 (a random model never writes EOS, so every sequence runs to the 40-token limit and
   is counted malformed: a worst case), and the same rounds through ``model.generate``
   (``sample_hf_generate``). With vLLM installed, its backend is timed too.

0. ``sampling`` (first: the headline, kept if a later part is cut): the sampler's decoding
   loops against ``model.generate`` on the same rows, GPT-2-large shape, bf16, 127 new tokens
   a row (a random model never ends a row: every row runs to the limit), batch as large as
   fits (:func:`zdebias.generation.decode.auto_slots`, at most 2048): ``generate``,
   ``carry`` (the loop before the refill one), ``refill`` and ``refill_compiled`` (CUDA
   graphs; ``compile_seconds`` apart), each with rows/s, ``x_generate`` and
   ``hours_for_5m`` (:func:`bench_decode.compare`).

Paper scale for reference: 5M samples in ~35 h on one A100 (~40 samples/s).
Writes one JSON object to stdout and to ``--out`` (default ``$OUT/gpu_check_generate.json``
when ``$OUT`` is set). Expect two to three minutes on an H200, most of it start-up.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _gpu_common import StepClock as _StepClock
from _gpu_common import emit, sync

WORDS = (
    "a man woman child dog group people girl boy person team crowd musician is are "
    "sleeping playing running standing sitting eating dancing reading riding talking "
    "on in at near through outside the park bench snow water street table beach night "
    "with red old broken guitar bike apple newspaper umbrella"
).split()


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]
    return " ".join(words).capitalize() + "."


def synthetic_records(n: int) -> list[Any]:
    from zdebias.data.schema import Record

    rng = random.Random(0)
    labels = ("entailment", "neutral", "contradiction")
    return [
        Record(
            id=f"syn:{i}",
            premise=_sentence(rng, 5, 9),
            hypothesis=_sentence(rng, 2, 5),
            label=labels[i % 3],
        )
        for i in range(n)
    ]


def make_config(small: bool) -> Any:
    from transformers import GPT2Config

    if small:
        # a small vocabulary too: top-p sorts it for every row at every step, slow on a CPU
        return GPT2Config(n_embd=64, n_layer=2, n_head=2, vocab_size=2048, n_positions=256)
    return GPT2Config(n_embd=1280, n_layer=36, n_head=20, vocab_size=50257, n_positions=1024)


def train_side_by_side(
    torch: Any, _config: Any, *, small: bool, device: str, bf16: bool, out: dict, save: Any
) -> dict:
    """Generator training, zdebias vs a plain causal-LM fine-tune (HF ``Trainer``, the model's
    own loss) on the same sequences at the same batch (64; 8 with ``--small``), SmolLM2-135M
    shape (Llama: hidden 576, 30 layers, vocabulary 49,152, tied; random weights). zdebias runs
    λ = 0 (the same work as plain: the 0.8x target) and λ = 0.5 (two forwards a row: compare
    model tokens/s). Each result goes into ``out`` and ``save()`` as it comes."""
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    from zdebias.generation.format import add_format_tokens, encode_record
    from zdebias.generation.trainer import train_generator
    from zdebias.models.throughput import flop_parameters, throughput
    from zdebias.models.tiny import tiny_tokenizer

    _StepClock.install()
    sizes = (
        dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
        if small
        else dict(hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
                  num_key_value_heads=3, intermediate_size=1536)
    )  # fmt: skip
    config = LlamaConfig(vocab_size=49152, tie_word_embeddings=True, **sizes)
    batch, steps = (8, 4) if small else (64, 60)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        tok = tiny_tokenizer("gpt2")
        model = LlamaForCausalLM(config)
        fmt = add_format_tokens(tok, model, "nli", max_length=64)
        model.save_pretrained(base)
        tok.save_pretrained(base)
        fmt.save(base)
        records = synthetic_records(batch * steps)
        seqs = [encode_record(r, tok, fmt).input_ids for r in records]
        out.update(
            shape="SmolLM2-135M" if not small else "tiny llama",
            batch=batch,
            steps=steps,
            bf16=bf16,
            flop_parameters=flop_parameters(model),
            sequence_tokens_mean=round(sum(map(len, seqs)) / len(seqs), 1),
        )
        del model

        def collate(rows: list[dict]) -> dict:
            width = max(len(r["input_ids"]) for r in rows)
            ids = torch.full((len(rows), width), fmt.pad_token_id)
            attn = torch.zeros_like(ids)
            for i, r in enumerate(rows):
                ids[i, : len(r["input_ids"])] = torch.tensor(r["input_ids"])
                attn[i, : len(r["input_ids"])] = 1
            return {
                "input_ids": ids,
                "attention_mask": attn,
                "labels": ids.masked_fill(attn == 0, -100),
            }

        args = TrainingArguments(
            output_dir=str(Path(tmp) / "plain"), per_device_train_batch_size=batch,
            max_steps=steps, learning_rate=1e-5, bf16=bf16, use_cpu=device == "cpu",
            save_strategy="no", report_to="none", disable_tqdm=True, logging_steps=50,
            remove_unused_columns=False, seed=0,
        )  # fmt: skip
        plain_model = LlamaForCausalLM.from_pretrained(base)
        plain = Trainer(
            model=plain_model,
            args=args,
            train_dataset=[{"input_ids": q} for q in seqs],
            data_collator=collate,
        )
        start = time.perf_counter()
        plain.train()
        seconds = time.perf_counter() - start
        real = sum(map(len, seqs[: batch * steps]))
        out["plain_causal_lm"] = {
            "train_seconds": round(seconds, 2),
            **throughput(flop_parameters(plain_model), real, seconds, device),
            **_StepClock.rates(min(10, steps - 1)),
        }
        del plain, plain_model
        save()
        for lam in (0.0, 0.5):
            summary = train_generator(
                records, base, Path(tmp) / f"gen{lam}", max_steps=steps,
                per_device_train_batch_size=batch, consistency_weight=lam, bf16=bf16,
                disable_tqdm=True, max_length=64, seed=0, logging_steps=50,
                use_cpu=device == "cpu", checkpoint_steps=0,
            )  # fmt: skip
            t = summary["throughput"]
            out[f"zdebias_lambda_{lam}"] = {
                "train_seconds": summary["train_seconds"],
                "group_by_length": summary["settings"]["group_by_length"],
                **t,
                **_StepClock.rates(min(10, steps - 1)),
                "model_tokens_per_s_vs_plain": round(
                    t["tokens_per_s"] / max(out["plain_causal_lm"]["tokens_per_s"], 1e-9), 3
                ),
            }
            save()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    return out


def raw_throughput(torch: Any, config: Any, *, small: bool, device: str, bf16: bool) -> dict:
    """Training tokens/s and generation sequences/s of the bare model."""
    from transformers import GPT2LMHeadModel

    with torch.device(device):
        model = GPT2LMHeadModel(config)
    dtype = torch.bfloat16 if bf16 else torch.float32
    out: dict = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": str(dtype).replace("torch.", ""),
    }
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, eps=1e-6)
    steps, warm = (2, 1) if small else (15, 3)
    kind = device.split(":")[0]
    for name, batch in (("mle_b24", 24), ("consistency_b24x2", 48)):
        ids = torch.randint(0, config.vocab_size, (batch, 48), device=device)
        model.train()
        for i in range(warm + steps):
            if i == warm:
                sync(torch)
                start = time.perf_counter()
            with torch.autocast(device_type=kind, dtype=dtype, enabled=bf16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        sync(torch)
        seconds = time.perf_counter() - start
        out[f"train_{name}"] = {
            "steps_per_s": round(steps / seconds, 2),
            "tokens_per_s": round(steps * 24 * 48 / seconds),
        }
    del opt
    model.eval()
    if bf16:
        model.to(torch.bfloat16)
    for batch in (16, 32) if small else (64, 256):
        start_ids = torch.zeros((batch, 1), dtype=torch.long, device=device)
        kwargs = {
            "do_sample": True,
            "top_p": 0.9,
            "top_k": 0,
            "max_new_tokens": 40,
            "min_new_tokens": 40,
            "pad_token_id": 0,
        }
        model.generate(input_ids=start_ids, attention_mask=torch.ones_like(start_ids), **kwargs)
        sync(torch)
        start = time.perf_counter()
        rounds = 1 if small else 3
        for _ in range(rounds):
            model.generate(input_ids=start_ids, attention_mask=torch.ones_like(start_ids), **kwargs)
        sync(torch)
        seconds = time.perf_counter() - start
        out[f"generate_b{batch}_40tok"] = {"sequences_per_s": round(rounds * batch / seconds, 1)}
    if torch.cuda.is_available():
        out["peak_gpu_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return out


def zdebias_path(
    torch: Any,
    config: Any,
    *,
    small: bool,
    device: str,
    bf16: bool,
    out: dict | None = None,
    save: Any = None,
) -> dict:
    """Our trainer and sampler on the device. Results go into ``out`` as they come, and
    ``save()`` (when given) is called after each, so a cut run keeps them."""
    out = {} if out is None else out
    save = save or (lambda: None)
    from transformers import GPT2LMHeadModel

    from zdebias.generation.format import add_format_tokens, parse_output
    from zdebias.generation.rounds import round_seed
    from zdebias.generation.settings import SampleSettings
    from zdebias.generation.trained import HFBackend, VllmBackend
    from zdebias.generation.trainer import train_generator
    from zdebias.models.tiny import tiny_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        tok = tiny_tokenizer("gpt2")
        with torch.device(device):
            model = GPT2LMHeadModel(config)
        fmt = add_format_tokens(tok, model, "nli", max_length=41)
        start = time.perf_counter()
        model.save_pretrained(base)
        tok.save_pretrained(base)
        fmt.save(base)
        out["save_seconds"] = round(time.perf_counter() - start, 1)
        del model
        records = synthetic_records(960)
        lengths = sorted(
            len(tok(r.premise)["input_ids"]) + len(tok(r.hypothesis)["input_ids"]) + 3
            for r in records
        )
        out["sequence_tokens_median"] = lengths[len(lengths) // 2]
        steps = 3 if small else 20
        start = time.perf_counter()
        summary = train_generator(
            records,
            base,
            Path(tmp) / "gen",
            max_steps=steps,
            per_device_train_batch_size=24,
            consistency_weight=0.5,
            bf16=bf16,
            disable_tqdm=True,
            max_length=64,
            seed=0,
        )
        out["train"] = {
            "steps": summary["steps"],
            "batch_size": 24,
            "consistency_weight": 0.5,
            "bf16": bf16,
            "train_seconds": summary["train_seconds"],
            "train_tokens_per_s": summary["train_tokens_per_s"],
            "wall_seconds_incl_load_save": round(time.perf_counter() - start, 1),
        }
        save()
        gen = Path(tmp) / "gen"
        from zdebias.generation.format import GeneratorFormat

        fmt = GeneratorFormat.load(gen)
        fmt.max_length = 41  # 40 new tokens, as in `raw`
        batch = 32 if small else 256
        backends: list[tuple[str, Any]] = [("hf", HFBackend)]
        if importlib.util.find_spec("vllm") is not None and torch.cuda.is_available():
            backends.append(("vllm", VllmBackend))
        else:
            out["vllm"] = "not installed (or no GPU): skipped"
        for name, cls in backends:
            try:
                settings = SampleSettings(n=1, batch_size=batch, backend=name)
                engine = cls(
                    gen, fmt, settings, device=device, dtype="bfloat16" if bf16 else "float32"
                )
                # the sampler's own round, and (HF) the same round through model.generate
                methods = [(f"sample_{name}", engine.generate)]
                if hasattr(engine, "generate_hf"):
                    methods.append(("sample_hf_generate", engine.generate_hf))
                for key, method in methods:
                    method(batch, round_seed(0, 999))  # warm-up
                    sync(torch)
                    start = time.perf_counter()
                    rounds = 1 if small else 3
                    n = parsed_ok = 0
                    for r in range(rounds):
                        for ids in method(batch, round_seed(0, r)):
                            n += 1
                            parsed_ok += parse_output(ids, tok, fmt).ok
                    seconds = time.perf_counter() - start
                    out[key] = {
                        "batch": batch,
                        "sequences": n,
                        "sequences_per_s_incl_parse": round(n / seconds, 1),
                        "parseable": parsed_ok,
                    }
                    save()
                del engine
            except Exception as err:  # report and go on: the other numbers still count
                out[f"sample_{name}"] = {"error": f"{type(err).__name__}: {err}"}
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    return out


def sampling_speed(torch: Any, config: Any, *, small: bool, device: str, **kw: Any) -> dict:
    """The decoding loops against ``model.generate`` (doc, part 0), in bf16 with ``bf16``;
    results go into ``out`` as they come, ``save()`` after each (both keywords)."""
    bf16, out, save = kw["bf16"], kw.get("out"), kw.get("save")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_decode import compare
    from transformers import GPT2LMHeadModel

    from zdebias.generation.decode import auto_slots

    dtype = torch.bfloat16 if bf16 else torch.float32
    with torch.device(device):
        model = GPT2LMHeadModel(config).to(dtype).eval()
    steps = 15 if small else 127
    batch = 16 if small else auto_slots(model, steps)
    out = {} if out is None else out
    out.update(parameters=sum(p.numel() for p in model.parameters()), dtype=str(dtype)[6:])
    compare(
        model,
        batch,
        steps=steps,
        jobs=2,
        compile=device == "cuda",
        out=out,
        save=save or (lambda: None),
    )
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="tiny model, quick CPU smoke run")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    bf16 = device == "cuda" and torch.cuda.is_bf16_supported()
    started = time.perf_counter()
    result: dict = {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "small": args.small,
    }
    config = make_config(args.small)

    def save() -> None:
        emit(result, args.out, "gpu_check_generate.json", quiet=True)

    parts = (
        ("sampling", sampling_speed),
        ("train", train_side_by_side),
        ("raw", raw_throughput),
        ("zdebias", zdebias_path),
    )
    for name, fn in parts:
        kept = name != "raw"  # these save what they measured as they go
        extra = {"out": result.setdefault(name, {}), "save": save} if kept else {}
        try:
            result[name] = fn(torch, config, small=args.small, device=device, bf16=bf16, **extra)
        except Exception as err:
            result[name] = {**result.get(name, {}), "error": f"{type(err).__name__}: {err}"}
        emit(result, args.out, "gpu_check_generate.json", quiet=True)  # kept if a later part hangs
    result["total_seconds"] = round(time.perf_counter() - started, 1)
    emit(result, args.out, "gpu_check_generate.json")


if __name__ == "__main__":
    main()
