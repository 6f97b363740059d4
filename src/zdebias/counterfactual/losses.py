"""The infilling loss (AutoCAD §3.2, docs/design.md §10.2): MLE + α·UL on rationale tokens.

Per batch::

    L = MLE(fillers | original label) + α · UL(original fillers | each wrong label)
    UL = mean over filler tokens t of −log(1 − p(z_t | x − z, ŷ, z_<t))

The token losses are those of :mod:`zdebias.generation.losses` (one implementation for the
generator and the infiller), taken as a mean over the tokens a mask selects. α = 1 for NLI and
0.3 for sentiment (the paper's defaults).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from zdebias.counterfactual.format import Arch
from zdebias.generation.losses import mle_loss, unlikelihood_loss

#: 1 − p is floored at this: log p is clamped to at most −1e-7 (the infiller's bound).
UL_EPS = -math.expm1(-1e-7)


def token_nll(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood of ``labels`` over positions where ``mask`` is set.

    ``logits [N, T, V]``, ``labels [N, T]`` (any value where masked out), ``mask [N, T]``.
    """
    return mle_loss(logits, labels, mask, reduction="weighted_mean", log_softmax=True)


def token_unlikelihood(
    logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Mean of ``−log(1 − p(label_t))`` over positions where ``mask`` is set."""
    return unlikelihood_loss(
        logits, labels, mask, reduction="weighted_mean", eps=UL_EPS, log_softmax=True
    )


LossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
LOSSES: dict[str, LossFn] = {"mle": token_nll, "unlikelihood": token_unlikelihood}


def infill_loss(
    model: Any,
    batch: dict[str, Any],
    *,
    arch: Arch,
    alpha: float,
    mle: str = "mle",
    ul: str = "unlikelihood",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Any]:
    """``(loss, mle, ul, outputs)`` for a collated batch (see ``InfillCollator``).

    Rows with ``is_original`` get the likelihood term on all target tokens (fillers,
    sentinels, EOS); the other rows (wrong labels) get the unlikelihood term on ``ul_mask``.
    """
    labels, ul_mask, is_orig = batch["labels"], batch["ul_mask"], batch["is_original"]
    kwargs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    if arch == "causal":
        outputs = model(**kwargs)
        logits = outputs.logits[:, :-1]
        labels, ul_mask = labels[:, 1:], ul_mask[:, 1:]
    else:
        base = getattr(model, "module", model)  # DDP wraps the model (torchrun, accelerate)
        kwargs["decoder_input_ids"] = base.prepare_decoder_input_ids_from_labels(labels)
        outputs = model(**kwargs)
        logits = outputs.logits
    mle_term = LOSSES[mle](logits[is_orig], labels[is_orig], labels[is_orig] != -100)
    if alpha and bool((~is_orig).any()):
        ul_term = LOSSES[ul](logits[~is_orig], labels[~is_orig], ul_mask[~is_orig].bool())
    else:
        ul_term = torch.zeros((), device=logits.device)
    return mle_term + alpha * ul_term, mle_term, ul_term, outputs
