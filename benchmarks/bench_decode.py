"""Rows/s of the HF sampler's decoding loops side by side with ``model.generate``, on a model
of a real shape with random weights (nothing downloaded).

Run: ``python benchmarks/bench_decode.py [--shape smollm2|gpt2-large] [--batch 16 64]
[--jobs 2] [--steps 63] [--end-rate 0.04] [--dtype float32] [--threads N] [--compile]``.

Per batch size B, the same ``jobs x B`` rows (top-p 0.9, up to ``--steps`` new tokens) through:

- ``generate``: ``model.generate``, B rows at a time (each batch runs to its longest row);
- ``carry``: :func:`zdebias.generation.decode.decode`, B rows at a time (ended rows dropped);
- ``refill``: one :class:`zdebias.generation.decode.SlotDecoder` job of all the rows on B
  slots (ended rows replaced); ``refill_compiled`` with ``--compile`` (its first job,
  which compiles, is not timed).

A random model almost never writes its end token, so a bias on the end token's logit makes a
row end with probability ``--end-rate`` a token (lengths spread as real rows' do: the case
refill is for; 0: every row runs to ``--steps``). Prints JSON: per variant rows/s, tokens/s
(tokens written, end tokens included), seconds, and ``hours_for_5m`` (5M rows at that rate).
The GPU check (scripts/gpu_check_generate.py) runs :func:`compare` on GPT-2-large.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from typing import Any

#: the shapes, as transformers configs (model type, sizes)
SHAPES: dict[str, dict[str, Any]] = {
    "smollm2": {  # SmolLM2-135M
        "model_type": "llama",
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "vocab_size": 49152,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": True,
    },
    "gpt2-large": {  # 774M
        "model_type": "gpt2",
        "n_embd": 1280,
        "n_layer": 36,
        "n_head": 20,
        "vocab_size": 50257,
        "n_positions": 1024,
    },
}


def random_model(shape: str, dtype: Any, device: str) -> Any:
    """A causal LM of ``shape`` with random weights, in eval mode."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    sizes = dict(SHAPES[shape])
    config = AutoConfig.for_model(sizes.pop("model_type"), **sizes)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval()


def end_bias(model: Any, eos: int, rate: float) -> None:
    """Make ``model`` write ``eos`` with probability about ``rate`` a token: its logit is
    raised to the log-sum-exp of the others plus ``log(rate / (1 - rate))`` (a forward hook
    on the output layer, so ``model.generate`` sees it too)."""
    import torch

    if rate <= 0:
        return
    lift = math.log(rate / (1 - rate))

    def hook(_module: Any, _inputs: Any, logits: torch.Tensor) -> torch.Tensor:
        others = logits.float().logsumexp(dim=-1)
        logits[..., eos] = (others + lift).to(logits.dtype)
        return logits

    model.get_output_embeddings().register_forward_hook(hook)


def _rows_and_tokens(rows: list[list[int]], eos: int) -> int:
    return sum(r.index(eos) + 1 if eos in r else len(r) for r in rows)


def compare(
    model: Any,
    batch: int,
    *,
    steps: int,
    jobs: int,
    eos: int = 0,
    top_p: float = 0.9,
    compile: bool = False,
    out: dict[str, Any] | None = None,
    save: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Rows/s of ``generate``, ``carry``, ``refill`` (and ``refill_compiled``) on the same
    ``jobs x batch`` rows; results go into ``out`` as they come and ``save()`` is called
    after each, so a cut run keeps what it measured."""
    import torch

    from zdebias.generation.decode import SlotDecoder, decode, uniforms

    out = {} if out is None else out
    device = next(model.parameters()).device
    rows = jobs * batch
    u = uniforms(steps, rows, seed=0, device=device)
    start = torch.ones((batch, 1), dtype=torch.long, device=device)

    sampling = {"do_sample": True, "top_p": top_p, "top_k": 0, "max_new_tokens": steps}

    def generate() -> list[list[int]]:
        got: list[list[int]] = []
        mask = torch.ones_like(start)
        for _ in range(jobs):
            ids = model.generate(
                input_ids=start, attention_mask=mask, eos_token_id=eos, pad_token_id=eos, **sampling
            )
            got += ids[:, 1:].tolist()
        return got

    def carry() -> list[list[int]]:
        got: list[list[int]] = []
        for j in range(jobs):
            got += decode(model, 1, eos, eos, steps, u[:, j * batch : (j + 1) * batch], top_p=top_p)
        return got

    variants: list[tuple[str, Callable[[], list[list[int]]]]] = [
        ("generate", generate),
        ("carry", carry),
    ]
    slots = SlotDecoder(model, steps, batch)
    variants.append(("refill", lambda: slots(1, eos, eos, u, top_p=top_p)))
    if compile:
        compiled = SlotDecoder(model, steps, batch, compile=True)
        variants.append(("refill_compiled", lambda: compiled(1, eos, eos, u, top_p=top_p)))
    for name, run in variants:
        try:
            if name == "refill_compiled":  # compiles: timed apart
                begin = time.perf_counter()
                compiled(1, eos, eos, u[:, :batch], top_p=top_p)
                out["compile_seconds"] = round(time.perf_counter() - begin, 1)
            if device.type == "cuda":
                torch.cuda.synchronize()
            begin = time.perf_counter()
            with torch.inference_mode() if name != "refill_compiled" else torch.no_grad():
                got = run()
            if device.type == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - begin
            tokens = _rows_and_tokens(got, eos)
            out[name] = {
                "rows_per_s": round(rows / seconds, 2),
                "tokens_per_s": round(tokens / seconds, 1),
                "seconds": round(seconds, 2),
                "tokens_per_row": round(tokens / rows, 1),
                "hours_for_5m": round(5e6 / (rows / seconds) / 3600, 2),
            }
        except Exception as err:  # report and go on: the other variants still count
            out[name] = {"error": f"{type(err).__name__}: {err}"}
        save()
    if "rows_per_s" in out.get("generate", {}):
        for name in ("carry", "refill", "refill_compiled"):
            if "rows_per_s" in out.get(name, {}):
                out[name]["x_generate"] = round(
                    out[name]["rows_per_s"] / out["generate"]["rows_per_s"], 2
                )
    out.update(batch=batch, rows=rows, max_new_tokens=steps, top_p=top_p)
    save()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="smollm2")
    parser.add_argument("--batch", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--jobs", type=int, default=2, help="batches of rows per variant")
    parser.add_argument("--steps", type=int, default=63, help="most new tokens a row")
    parser.add_argument("--end-rate", type=float, default=0.04)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--compile", action="store_true", help="also the compiled refill step")
    args = parser.parse_args()

    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    if args.threads:
        torch.set_num_threads(args.threads)
    model = random_model(args.shape, getattr(torch, args.dtype), args.device)
    end_bias(model, 0, args.end_rate)
    result: dict[str, Any] = {
        "shape": args.shape,
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": args.dtype,
        "device": args.device,
        "torch_threads": torch.get_num_threads(),
        "end_rate": args.end_rate,
        "batches": {},
    }
    for batch in args.batch:
        result["batches"][batch] = compare(
            model, batch, steps=args.steps, jobs=args.jobs, compile=args.compile
        )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
