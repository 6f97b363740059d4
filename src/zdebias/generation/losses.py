"""Token losses of the generator (docs/design.md §6): likelihood, unlikelihood, masked unlikelihood.

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
from typing import Any, Literal

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


TermsFn = Callable[
    [torch.Tensor, torch.Tensor | None, float], tuple[torch.Tensor, torch.Tensor | None]
]


def _mle_terms(
    logp: torch.Tensor, mask: torch.Tensor | None, eps: float
) -> tuple[torch.Tensor, torch.Tensor | None]:
    return -logp, mask


def _unlikelihood_terms(
    logp: torch.Tensor, mask: torch.Tensor | None, eps: float
) -> tuple[torch.Tensor, torch.Tensor | None]:
    return -log1m_exp(logp, eps=eps), mask


def _masked_unlikelihood_terms(
    logp: torch.Tensor, mask: torch.Tensor | None, eps: float
) -> tuple[torch.Tensor, torch.Tensor | None]:
    if mask is None:
        return -logp, None
    return torch.where(mask.bool(), -logp, -log1m_exp(logp, eps=eps)), None


#: Per-token terms ``(logp, mask, eps) -> (values, weights)`` of the losses of :data:`LOSSES`
#: (the trainer computes log p once and applies several of them: :func:`loss_from_logprobs`).
TERMS: dict[str, TermsFn] = {
    "mle": _mle_terms,
    "unlikelihood": _unlikelihood_terms,
    "masked_unlikelihood": _masked_unlikelihood_terms,
}


def loss_from_logprobs(name: str, logp: torch.Tensor, labels: Any, mask: Any, how: Any) -> Any:
    """Loss ``name`` from ``logp`` = :func:`token_logprobs` (of any labels that cover
    ``labels``' counted positions), ``how`` = (reduction, eps): equal, bit for bit, to the
    loss function of that name on the logits. The mask is not checked here."""
    values, weights = TERMS[name](logp, mask, how[1])
    return _reduce(values, labels != IGNORE_INDEX, weights, how[0])


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
    return loss_from_logprobs("mle", logp, labels, mask, (reduction, UL_EPS))


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
    return loss_from_logprobs("unlikelihood", logp, labels, mask, (reduction, eps))


def masked_unlikelihood_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    reduction: Reduction = "mean",
    eps: float = UL_EPS,
) -> torch.Tensor:
    """−log(m_t·p + (1 − m_t)·(1 − p)) for a 0/1 mask m (1 = likelihood, 0 = unlikelihood).

    Without a mask every m_t is 1 and this equals :func:`mle_loss`. A mask on the CPU is
    checked to be 0/1 (a ``ValueError`` otherwise); one on an accelerator is not, since the
    check would wait for the device: the trainer builds its masks 0/1 on the host.
    """
    if mask is not None and mask.device.type == "cpu":
        if not bool(((mask == 0) | (mask == 1)).all()):
            raise ValueError("masked_unlikelihood_loss needs a 0/1 mask")
    logp = token_logprobs(logits, labels)
    return loss_from_logprobs("masked_unlikelihood", logp, labels, mask, (reduction, eps))


def objective_parts(
    logits: torch.Tensor,
    targets: torch.Tensor,
    negative: torch.Tensor | None = None,
    ul_mask: torch.Tensor | None = None,
    perturbed_logits: torch.Tensor | None = None,
    perturbed_targets: torch.Tensor | None = None,
    *,
    alpha: float = 1.0,
    consistency_weight: float = 0.0,
    names: tuple[str, str, str] = ("mle", "masked_unlikelihood", "unlikelihood"),
) -> dict[str, torch.Tensor]:
    """The generator's summed loss parts for one batch (the trainer divides by its tokens).

    ``logits`` ``[B, T, V]`` and ``targets`` ``[B, T]`` (shifted); ``negative`` ``[B]``
    marks Z⁻ rows (None: no Z⁻ in this run), trained with α·``names[1]`` and ``ul_mask``;
    the other rows with ``names[0]`` (``"mle"``); ``perturbed_*`` (the wrong-label copies,
    hypothesis targets only) with λ·``names[2]`` when λ > 0. Returns ``{"mle", "negative",
    "consistency"}`` (the parts that apply) as 0-d tensors. log p of ``logits`` is computed
    once for both row kinds; nothing is read back to the host (no ``.item()``, no ``bool()``
    of a tensor), so a step on a GPU never waits for it. A loss name without per-token
    terms (:data:`TERMS`; a user's own) is called on the logits instead.
    """
    ignore = torch.full_like(targets, IGNORE_INDEX)
    shared = all(name in TERMS for name in names[:2])
    logp = token_logprobs(logits, targets) if shared else None

    def part(name: str, scores: torch.Tensor, labels: torch.Tensor, *rest: Any) -> torch.Tensor:
        if logp is not None and scores is logits:
            return loss_from_logprobs(
                name, logp, labels, rest[0] if rest else None, ("sum", UL_EPS)
            )
        return get_loss(name)(scores, labels, *rest, reduction="sum")

    parts: dict[str, torch.Tensor] = {}
    if negative is None:
        parts["mle"] = part(names[0], logits, targets)
    else:
        rows = negative.unsqueeze(1)
        parts["mle"] = part(names[0], logits, torch.where(rows, ignore, targets))
        if alpha > 0:
            negatives = torch.where(rows, targets, ignore)
            parts["negative"] = alpha * part(names[1], logits, negatives, ul_mask)
    if consistency_weight > 0 and perturbed_logits is not None:
        assert perturbed_targets is not None
        parts["consistency"] = consistency_weight * part(
            names[2], perturbed_logits, perturbed_targets
        )
    return parts


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
