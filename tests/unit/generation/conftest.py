"""Fixtures for the generator tests: a tiny tokenizer with the NLI generator format."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def nli_tokenizer() -> tuple[Any, Any]:
    """``(tokenizer, GeneratorFormat)``: the tiny GPT-2 BPE tokenizer with NLI label tokens."""
    from zdebias.generation.format import add_format_tokens
    from zdebias.models.tiny import tiny_tokenizer

    tok = tiny_tokenizer("gpt2")
    fmt = add_format_tokens(tok, None, "nli", max_length=64)
    return tok, fmt


@pytest.fixture(scope="session")
def ending_generator(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A random tiny GPT-2 generator folder (max length 32) that ends a sequence with
    probability ~0.2 a token, whatever came before: the final layer norm's first unit is held
    at 1 and only the end token reads it. Random weights otherwise, so its outputs are
    well-formed often enough to test premise-conditioned sampling without training."""
    import math

    import torch
    from transformers import AutoModelForCausalLM

    from zdebias.generation.format import GeneratorFormat
    from zdebias.generation.tiny import make_tiny_generator

    folder = make_tiny_generator(tmp_path_factory.mktemp("gen") / "ending", max_length=32)
    fmt = GeneratorFormat.load(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    with torch.no_grad():
        model.transformer.ln_f.weight[0] = 0.0
        model.transformer.ln_f.bias[0] = 1.0
        model.transformer.wte.weight[:, 0] = 0.0
        model.transformer.wte.weight[fmt.eos_token_id, 0] = math.log(0.25 * model.config.vocab_size)
    model.save_pretrained(folder)
    return folder


@pytest.fixture
def tiny_lm(tiny_model: Any) -> tuple[Any, Any, Any]:
    """``(model, tokenizer, GeneratorFormat)``: a tiny random GPT-2 with the NLI label tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from zdebias.generation.format import add_format_tokens

    folder = tiny_model("gpt2")
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    fmt = add_format_tokens(tok, model, "nli")
    return model, tok, fmt
