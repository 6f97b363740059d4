"""Load a generator folder and score hypotheses under it: log p(H | l, P).

Used to check label consistency: a consistent generator gives the gold hypothesis a much
higher probability under the gold label than under a wrong one.

>>> model, tokenizer, fmt = load_generator("runs/gen")                          # doctest: +SKIP
>>> hypothesis_logprobs(model, tokenizer, fmt, records, labels=["neutral"] * 3)  # doctest: +SKIP
[-12.1, -9.7, -15.3]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zdebias.data.schema import Record
from zdebias.generation.format import GeneratorFormat, encode_record
from zdebias.models.compute import model_device


def load_generator(folder: str | Path, *, device: str | None = None) -> tuple[Any, Any, Any]:
    """``(model in eval mode, tokenizer, GeneratorFormat)`` of a generator folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    fmt = GeneratorFormat.load(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    model.to(model_device(device)).eval()  # type: ignore[arg-type]  # transformers: .to typed unbound (functools.wraps)
    return model, tokenizer, fmt


def hypothesis_logprobs(
    model: Any,
    tokenizer: Any,
    fmt: GeneratorFormat,
    records: Sequence[Record],
    *,
    labels: Sequence[str] | None = None,
    batch_size: int = 32,
) -> list[float]:
    """Σ_t log p(H_t | l, P, H_<t) for each record (text tokens for single-text tasks).

    ``labels[i]`` replaces record i's label (e.g. a wrong label); default: its own.
    """
    import torch

    from zdebias.generation.losses import IGNORE_INDEX, token_logprobs

    device = next(model.parameters()).device
    out: list[float] = []
    for start in range(0, len(records), batch_size):
        chunk = records[start : start + batch_size]
        encoded = [
            encode_record(r, tokenizer, fmt, label=labels[start + i] if labels else None)
            for i, r in enumerate(chunk)
        ]
        width = max(len(e) for e in encoded)
        ids = torch.full((len(chunk), width), fmt.pad_token_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        targets = torch.full_like(ids, IGNORE_INDEX)
        for i, e in enumerate(encoded):
            ids[i, : len(e)] = torch.tensor(e.input_ids)
            attn[i, : len(e)] = 1
            s, t = e.main
            targets[i, s:t] = ids[i, s:t]
        with torch.inference_mode():
            logits = model(input_ids=ids.to(device), attention_mask=attn.to(device)).logits
        logp = token_logprobs(logits[:, :-1], targets[:, 1:].to(device))
        out.extend(float(v) for v in logp.sum(dim=1).cpu())
    return out
