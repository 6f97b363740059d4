"""Token and word saliency of a classifier's gold-label prediction (AutoCAD §3.1,
docs/design.md §10.1).

For an example ``x`` with gold label ``y`` the saliency of sub-token ``t`` comes from the gradient
``g_t`` of the gold label's output logit (``target="logit"``, the paper: "the output logit for
label y"; ``target="loss"``: of its cross-entropy) with respect to ``t``'s input embedding
``e_t``:

- ``gradient-norm`` (the paper's method, Li et al. 2015): ``‖g_t‖₂``;
- ``gradient-x-input``: ``|g_t · e_t|``.

Scores are divided by the example's maximum. By default (``normalize="text"``) the maximum is
taken over the tokens of the example's text: special tokens (``[CLS]``, ``[SEP]``) often carry
the largest gradients (the pooler reads ``[CLS]``) yet are never rationale candidates, and
letting them set the scale pushes every word under the 0.3 threshold. ``normalize="all"`` uses
every non-padding input token, the literal reading of the paper.
A word then takes the maximum over the sub-tokens that overlap it (``word_spans`` words, matched
through the tokenizer's character offsets), so BPE / WordPiece splits do not matter.

New methods are plain functions ``(grad, embeds) -> scores`` registered by name:

>>> @register_saliency("gradient-l1")                       # doctest: +SKIP
... def _l1(grad, embeds): return grad.abs().sum(-1)
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zdebias.classify.predict import LoadedClassifier, model_inputs
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError
from zdebias.features.tokenize import word_spans

SaliencyFn = Callable[[Any, Any], Any]
SALIENCY_METHODS: dict[str, SaliencyFn] = {}


def register_saliency(name: str) -> Callable[[SaliencyFn], SaliencyFn]:
    """Register ``fn(grad [B,T,D], embeds [B,T,D]) -> scores [B,T]`` under ``name``."""

    def wrap(fn: SaliencyFn) -> SaliencyFn:
        SALIENCY_METHODS[name] = fn
        return fn

    return wrap


@register_saliency("gradient-norm")
def gradient_norm(grad: Any, embeds: Any) -> Any:
    """L2 norm of the gradient over the embedding dimension."""
    return grad.norm(dim=-1)


@register_saliency("gradient-x-input")
def gradient_x_input(grad: Any, embeds: Any) -> Any:
    """Absolute dot product of gradient and input embedding."""
    return (grad * embeds).sum(dim=-1).abs()


def get_saliency(name: str) -> SaliencyFn:
    """The saliency function registered as ``name`` (fails with the list of known names)."""
    try:
        return SALIENCY_METHODS[name]
    except KeyError:
        raise ConfigError(
            f"unknown saliency method {name!r}; expected one of {', '.join(SALIENCY_METHODS)}"
        ) from None


@dataclass
class Word:
    """One word of a field: its text, character offsets into the field, and saliency."""

    text: str
    start: int
    end: int
    score: float = 0.0


@dataclass
class ExampleSaliency:
    """Saliency of one example: classifier probabilities and word scores per input field."""

    probs: np.ndarray
    gold: int
    words: dict[str, list[Word]] = field(default_factory=dict)

    @property
    def pred(self) -> int:
        return int(np.argmax(self.probs))

    @property
    def gold_prob(self) -> float:
        return float(self.probs[self.gold])


def aggregate_words(
    words: Sequence[tuple[int, int]],
    token_spans: Sequence[tuple[int, int]],
    token_scores: Sequence[float],
) -> list[float]:
    """Word score = max over the sub-tokens whose character span overlaps the word.

    ``words`` and ``token_spans`` are ``(start, end)`` character offsets into the same text;
    tokens with an empty span (special tokens) are ignored; a word no token covers (cut off by
    truncation) scores 0.

    >>> aggregate_words([(0, 3), (4, 9)], [(0, 3), (4, 6), (6, 9)], [0.2, 0.5, 0.9])
    [0.2, 0.9]
    """
    scores = [0.0] * len(words)
    starts = [w[0] for w in words]
    for (t_start, t_end), score in zip(token_spans, token_scores, strict=True):
        if t_end <= t_start:
            continue
        # words are sorted and disjoint: scan from the last word starting before t_end
        i = bisect.bisect_left(starts, t_end) - 1
        while i >= 0 and words[i][1] > t_start:
            if words[i][0] < t_end:
                scores[i] = max(scores[i], float(score))
            i -= 1
    return scores


def input_fields(record: Record, kind: str | None) -> list[str]:
    """The record fields a classifier of input ``kind`` sees, in tokenizer sequence order."""
    if kind is None:
        kind = "pair" if record.is_pair else "text"
    if kind == "pair":
        return ["premise", "hypothesis"]
    if kind == "hypothesis-only":
        return ["hypothesis"] if record.is_pair else ["text"]
    return ["text"] if not record.is_pair else ["hypothesis"]


def compute_saliency(
    clf: LoadedClassifier,
    records: Sequence[Record],
    *,
    method: str = "gradient-norm",
    target: str = "logit",
    normalize: str = "text",
    batch_size: int = 16,
    progress: bool = False,
) -> list[ExampleSaliency]:
    """Word saliency of each record's gold label under ``clf`` (one backward pass per batch).

    Records' labels must be names of the classifier's labels. Needs a fast tokenizer (for the
    character offsets of sub-tokens).
    """
    import torch

    fn = get_saliency(method)
    if target not in ("logit", "loss"):
        raise ConfigError(f"saliency target must be 'logit' or 'loss', not {target!r}")
    if normalize not in ("text", "all"):
        raise ConfigError(f"normalize must be 'text' or 'all', not {normalize!r}")
    if not getattr(clf.tokenizer, "is_fast", False):
        raise ConfigError("saliency needs a fast tokenizer (character offsets of sub-tokens)")
    index = {name: i for i, name in enumerate(clf.labels)}
    for record in records:
        if record.label not in index:
            raise DataError(
                f"label {record.label!r} of record {record.id!r} is not a label of the "
                f"classifier ({', '.join(clf.labels)})",
                field="label",
            )
    embedding = clf.model.get_input_embeddings()
    out: list[ExampleSaliency] = []
    starts: Any = range(0, len(records), batch_size)
    if progress:
        from zdebias.data.progress import track

        starts = track(starts, description="saliency", total=len(starts))
    for start in starts:
        batch = list(records[start : start + batch_size])
        first, second = model_inputs(batch, clf.input)
        enc = clf.tokenizer(
            first,
            second,
            truncation=True,
            max_length=clf.max_length,
            padding=True,
            return_offsets_mapping=True,
            return_tensors="pt",
        )
        offsets = enc.pop("offset_mapping").tolist()
        seq_ids = [enc.sequence_ids(i) for i in range(len(batch))]
        enc = enc.to(clf.device)
        gold = torch.tensor([index[r.label] for r in batch], device=clf.device)
        with torch.enable_grad():
            embeds = embedding(enc["input_ids"]).detach().requires_grad_(True)
            inputs = {k: v for k, v in enc.items() if k != "input_ids"}
            logits = clf.model(inputs_embeds=embeds, **inputs).logits.float()
            if target == "logit":  # examples are independent: the sum's gradient is each one's
                objective = logits.gather(1, gold.unsqueeze(1)).sum()
            else:
                objective = torch.nn.functional.cross_entropy(logits, gold, reduction="sum")
            (grad,) = torch.autograd.grad(objective, embeds)
        scores = fn(grad.float(), embeds.detach().float())
        scores = scores * enc["attention_mask"].to(scores.dtype)
        if normalize == "text":
            in_text = torch.tensor(
                [[s is not None for s in ids] for ids in seq_ids], device=scores.device
            )
            scale = (scores * in_text).max(dim=1, keepdim=True).values
        else:
            scale = scores.max(dim=1, keepdim=True).values
        scores = scores / scale.clamp_min(1e-12)
        probs = torch.softmax(logits.detach(), dim=-1).cpu().numpy().astype(np.float64)
        scores_np = scores.detach().cpu().numpy()
        for i, record in enumerate(batch):
            ex = ExampleSaliency(probs=probs[i], gold=int(gold[i]))
            for seq, name in enumerate(input_fields(record, clf.input)):
                text = getattr(record, name) or ""
                spans = [(s, e) for _, s, e in word_spans(text)]
                token_spans = [
                    tuple(offsets[i][t]) if seq_ids[i][t] == seq else (0, 0)
                    for t in range(len(offsets[i]))
                ]
                word_scores = aggregate_words(spans, token_spans, scores_np[i].tolist())
                ex.words[name] = [
                    Word(text[s:e], s, e, sc) for (s, e), sc in zip(spans, word_scores, strict=True)
                ]
            out.append(ex)
    return out
