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
