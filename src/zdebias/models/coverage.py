"""Does a model's vocabulary cover the text it is given? A warning when it does not.

The packaged models are English: ``minilm`` (all-MiniLM-L6-v2, an uncased English WordPiece
vocabulary) and ``smollm2`` (SmolLM2-135M, trained on English). Given Chinese, Japanese or Thai
they still run, without a word of complaint, and a classifier then learns little. Before
training or predicting, a sample of the texts is measured: the share of the tokenizer's
unknown tokens (any model with one, e.g. BERT's ``[UNK]``), and for the packaged English
models (or a classifier trained from one) the share of letters outside the Latin script. Above
:data:`POOR_SHARE` a warning names multilingual hub models to use instead, once per model and
process.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("zdebias")

#: the share of unknown tokens, or of non-Latin letters for an English model, warned about
POOR_SHARE = 0.10
#: multilingual hub models a user would pick instead (``--model NAME``)
MULTILINGUAL_MODELS = ("xlm-roberta-base", "bert-base-multilingual-cased")
#: records measured (evenly spaced over the data)
SAMPLE = 1000
#: models already warned about in this process
_warned: set[str] = set()


def packaged_base(ref: str | Path) -> str | None:
    """The packaged model alias (``minilm``, ``smollm2``) that ``ref`` names, is the folder
    of, or that a classifier folder ``ref`` was trained from; None for anything else."""
    from zdebias.models.resolve import PACKAGED, cache_dir

    text = str(ref)
    if text in PACKAGED:
        return text
    path = Path(text)
    if not path.is_dir():
        return None
    info = path / "zdebias_classifier.json"
    if info.is_file():
        import json

        try:
            base = json.loads(info.read_text()).get("base_model")
        except (OSError, ValueError):
            return None
        return base if base in PACKAGED else None
    import importlib.util

    resolved = path.resolve()
    if resolved == (cache_dir() / "models" / "smollm2").resolve():
        return "smollm2"
    spec = importlib.util.find_spec(PACKAGED["minilm"][0])
    if spec is not None and spec.submodule_search_locations:
        folder = Path(next(iter(spec.submodule_search_locations))) / "model"
        if resolved == folder.resolve():
            return "minilm"
    return None


def sample_texts(records: Sequence[Any], sample: int = SAMPLE) -> list[str]:
    """The texts (premise and hypothesis, or text) of at most ``sample`` records spread
    evenly over ``records`` (which may be texts themselves)."""
    n = len(records)
    if not n:
        return []
    rows = range(n) if n <= sample else np.linspace(0, n - 1, sample).astype(np.int64).tolist()
    out = []
    for i in rows:
        r = records[i]
        if isinstance(r, str):
            out.append(r)
        else:
            out.extend(t for t in (r.premise, r.hypothesis, r.text) if t)
    return out


def unknown_share(tokenizer: Any, texts: Sequence[str]) -> float | None:
    """The share of ``tokenizer``'s tokens of ``texts`` that are its unknown token (None when
    it has none or there are no tokens)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None or not texts:
        return None
    ids = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    total = sum(map(len, ids))
    if not total:
        return None
    return sum(row.count(unk) for row in ids) / total


def non_latin_share(texts: Sequence[str]) -> float:
    """The share of letters in ``texts`` that are not of the Latin script (0 without letters)."""
    import regex

    letters = regex.sub(r"[^\p{L}]+", "", "".join(texts))
    if not letters:
        return 0.0
    return 1 - len(regex.findall(r"\p{Latin}", letters)) / len(letters)


def vocabulary_line(
    tokenizer: Any, texts: Sequence[str], *, model: str, english: bool
) -> str | None:
    """The warning for ``texts`` that ``tokenizer``'s vocabulary covers poorly, or None."""
    unk = unknown_share(tokenizer, texts)
    if unk is not None and unk > POOR_SHARE:
        what = f"{unk:.0%} of its tokens of these texts are unknown ({tokenizer.unk_token})"
    elif english and (share := non_latin_share(texts)) > POOR_SHARE:
        what = f"it is an English model and {share:.0%} of the letters are not Latin"
    else:
        return None
    others = " or ".join(MULTILINGUAL_MODELS)
    return (
        f"model {model}: {what}; it cannot learn much from this text: for other languages use a "
        f"multilingual model, e.g. --model {others}"
    )


def warn_vocabulary(tokenizer: Any, records: Sequence[Any], model: str | Path) -> str | None:
    """Log :func:`vocabulary_line` for a sample of ``records`` (or texts), once per model and
    process; the line, or None."""
    name = str(model)
    if name in _warned:
        return None
    line = vocabulary_line(
        tokenizer, sample_texts(records), model=name, english=packaged_base(name) is not None
    )
    if line:
        _warned.add(name)
        log.warning("%s", line)
    return line


__all__ = [
    "MULTILINGUAL_MODELS",
    "POOR_SHARE",
    "non_latin_share",
    "packaged_base",
    "unknown_share",
    "vocabulary_line",
    "warn_vocabulary",
]
