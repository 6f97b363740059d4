"""A tiny random generator folder for tests and benchmarks (no weights are downloaded)."""

from __future__ import annotations

from pathlib import Path

from zdebias.models.tiny import make_tiny_model


def make_tiny_generator(
    out_dir: str | Path, *, task: str = "nli", max_length: int = 48, seed: int = 0
) -> Path:
    """A random tiny GPT-2 saved as an untrained generator folder for ``task``: the format
    tokens added (:func:`zdebias.generation.format.add_format_tokens`) and the format file
    written, as ``zdebias train-generator`` leaves one; return it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from zdebias.generation.format import add_format_tokens

    folder = make_tiny_model("gpt2", out_dir, seed=seed)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    fmt = add_format_tokens(tok, model, task, max_length=max_length)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    fmt.save(folder)
    return folder


__all__ = ["make_tiny_generator"]
