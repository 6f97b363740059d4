"""Token losses of the generator (SPEC §6): likelihood, unlikelihood, masked unlikelihood.

Plain functions ``(logits, labels, mask=None, *, reduction=...) -> Tensor``, picked from
:data:`LOSSES` by name. ``logits[..., t, :]`` is the model's distribution for ``labels[..., t]``
(already shifted; the trainer shifts causal-LM outputs). ``labels == -100`` are ignored.

- ``mle``: −log p(y_t); ``mask`` (optional) weights tokens.
- ``unlikelihood``: −log(1 − p(y_t)) (Welleck et al. 2020; the consistency loss of GD-NLI
  §2.2.1); ``mask`` (optional) weights tokens.
- ``masked_unlikelihood``: −log(m_t·p(y_t) + (1 − m_t)·(1 − p(y_t))) with m_t ∈ {0, 1}
  (GD-NLI §4.1): likelihood where m_t = 1, unlikelihood where m_t = 0.

log(1 − p) is computed from log p as ``log1p(−exp(log p))`` (``log(−expm1(log p))`` near
p = 1, where it is more exact), with log p clamped to at most ``log(1 − eps)``: the loss is
bounded by −log(eps) per token and never NaN or infinite, even when the model puts all its
mass on the token.

``reduction``: ``"mean"`` over counted tokens (0 when there are none), ``"sum"``,
``"weighted_mean"`` (Σ m_t·loss_t / Σ m_t: the mean over the tokens the mask selects, as the
infiller's losses need), or ``"none"`` (per-token values, 0 at ignored positions).

``log_softmax=True`` computes log p with ``torch.log_softmax`` instead of gather − logsumexp:
equal to within an ulp; the infiller keeps it so its trained weights stay bit-identical.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import torch

from zdebias.errors import lookup

IGNORE_INDEX = -100
#: Smallest 1 − p the unlikelihood terms see: −log(1 − p) ≤ −log(UL_EPS) ≈ 13.8.
UL_EPS = 1e-6
Reduction = Literal["mean", "sum", "weighted_mean", "none"]


def token_logprobs(
    logits: torch.Tensor, labels: torch.Tensor, *, log_softmax: bool = False
) -> torch.Tensor:
    """log p(labels_t) under ``logits`` (shape of ``labels``; 0 at ignored positions)."""
    valid = labels != IGNORE_INDEX
    safe = torch.where(valid, labels, torch.zeros_like(labels))
    logits = logits.float()
    if log_softmax:
        logp = torch.log_softmax(logits, dim=-1).gather(-1, safe.unsqueeze(-1)).squeeze(-1)
    else:
        picked = logits.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
        logp = picked - torch.logsumexp(logits, dim=-1)
    return torch.where(valid, logp, torch.zeros_like(logp))


def log1m_exp(logp: torch.Tensor, *, eps: float = UL_EPS) -> torch.Tensor:
    """log(1 − exp(logp)), stable for every logp ≤ 0; logp is clamped to ≤ log(1 − eps)."""
    logp = logp.clamp(max=math.log1p(-eps))
    near_one = logp > -math.log(2.0)
    # expm1 is exact near 0 (p near 1); log1p(-exp) is exact for small p. Each branch is fed
    # a safe value so the unused one never produces inf/NaN gradients.
    a = torch.log(-torch.expm1(torch.where(near_one, logp, torch.full_like(logp, -1.0))))
    b = torch.log1p(-torch.exp(torch.where(near_one, torch.full_like(logp, -1.0), logp)))
    return torch.where(near_one, a, b)


def _reduce(
    values: torch.Tensor,
    counted: torch.Tensor,
    weights: torch.Tensor | None,
    reduction: Reduction,
) -> torch.Tensor:
    if weights is not None:
        values = values * weights.to(values.dtype)
    values = torch.where(counted, values, torch.zeros_like(values))
    if reduction == "none":
        return values
    if reduction == "sum":
        return values.sum()
    if reduction == "mean":
        return values.sum() / counted.sum().clamp(min=1)
    if reduction == "weighted_mean":
        if weights is None:
            return values.sum() / counted.sum().clamp(min=1)
        total = torch.where(counted, weights.to(values.dtype), torch.zeros_like(values)).sum()
        return values.sum() / total.clamp(min=1.0)
    raise ValueError(f"unknown reduction {reduction!r}; expected mean, sum, weighted_mean or none")


def mle_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    reduction: Reduction = "mean",
    log_softmax: bool = False,
) -> torch.Tensor:
    """Token negative log-likelihood −log p(y_t); ``mask`` weights tokens (optional)."""
    logp = token_logprobs(logits, labels, log_softmax=log_softmax)
    return _reduce(-logp, labels != IGNORE_INDEX, mask, reduction)


def unlikelihood_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    reduction: Reduction = "mean",
    eps: float = UL_EPS,
    log_softmax: bool = False,
) -> torch.Tensor:
    """Token unlikelihood −log(1 − p(y_t)); ``mask`` weights tokens (optional)."""
    logp = token_logprobs(logits, labels, log_softmax=log_softmax)
    return _reduce(-log1m_exp(logp, eps=eps), labels != IGNORE_INDEX, mask, reduction)


def masked_unlikelihood_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    reduction: Reduction = "mean",
    eps: float = UL_EPS,
) -> torch.Tensor:
    """−log(m_t·p + (1 − m_t)·(1 − p)) for a 0/1 mask m (1 = likelihood, 0 = unlikelihood).

    Without a mask every m_t is 1 and this equals :func:`mle_loss`.
    """
    logp = token_logprobs(logits, labels)
    if mask is None:
        return _reduce(-logp, labels != IGNORE_INDEX, None, reduction)
    if not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError("masked_unlikelihood_loss needs a 0/1 mask")
    per_token = torch.where(mask.bool(), -logp, -log1m_exp(logp, eps=eps))
    return _reduce(per_token, labels != IGNORE_INDEX, None, reduction)


LossFn = Callable[..., torch.Tensor]

#: Loss functions by name (the trainer's settings name them).
LOSSES: dict[str, LossFn] = {
    "mle": mle_loss,
    "unlikelihood": unlikelihood_loss,
    "masked_unlikelihood": masked_unlikelihood_loss,
}


def get_loss(name: str) -> LossFn:
    """The loss function of that name; an unknown name fails with the valid ones."""
    return lookup(LOSSES, name, "loss", error=ValueError)
