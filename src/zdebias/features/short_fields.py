"""A warning when the tokenisation leaves texts only 1-2 tokens long: typically a language
written without spaces read with a word regex (``--token-pattern '\\w+'``), where each clause
is one "word" and n-gram, length and overlap features see whole clauses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from zdebias.features.tokenize import Tokenizer

#: a field whose median length is at most this many tokens is warned about
SHORT_MEDIAN = 2
#: records whose fields are measured (evenly spaced over the data): plenty for a median
SAMPLE = 2_000


def median_token_lengths(
    records: Sequence[Any], tokenizer: Tokenizer, *, sample: int = SAMPLE
) -> dict[str, float]:
    """The median token count of each text field (premise and hypothesis, or text) over at
    most ``sample`` records spread evenly over ``records``."""
    if not records:
        return {}
    n = len(records)
    rows = range(n) if n <= sample else np.linspace(0, n - 1, sample).astype(np.int64).tolist()
    fields = ("premise", "hypothesis") if records[0].is_pair else ("text",)
    out = {}
    for name in fields:
        texts = [getattr(records[i], name) or "" for i in rows]
        out[name] = float(np.median([len(tokenizer(text)) for text in texts]))
    return out


def short_fields_line(medians: Mapping[str, float], tokenizer: Tokenizer) -> str | None:
    """The warning for fields whose median length is 1-2 tokens (``None`` when there are
    none), naming the setting that changes the tokenisation."""
    short = {name: m for name, m in medians.items() if 0 < m <= SHORT_MEDIAN}
    if not short:
        return None
    said = ", ".join(f"{name} {m:g}" for name, m in short.items())
    head = (
        f"median length in tokens: {said} (n-gram, length and overlap features see whole "
        "phrases as words)"
    )
    if tokenizer.pattern is not None:
        return (
            f"{head}; --token-pattern '{tokenizer.pattern}' keeps runs of Chinese, Japanese or "
            "Thai whole: leave it unset to cut them into characters, or add --segmenter jieba "
            "for Chinese words"
        )
    if tokenizer.function is not None:
        return f"{head}; check the tokenizer setting ({tokenizer.spec or tokenizer.function!r})"
    return (
        f"{head}; if the words are not separated by spaces or punctuation, set --token-pattern "
        "(e.g. '\\w' for one token per character)"
    )


def short_fields_warning(records: Sequence[Any], settings: Mapping[str, Any]) -> str | None:
    """:func:`short_fields_line` for ``records`` tokenised as the feature ``settings`` say."""
    tokenizer = Tokenizer.from_settings(settings)
    return short_fields_line(median_token_lengths(records, tokenizer), tokenizer)


__all__ = ["median_token_lengths", "short_fields_line", "short_fields_warning"]
