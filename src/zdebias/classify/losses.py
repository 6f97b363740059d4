"""Classification losses as plain functions, picked by name from :data:`LOSSES` (docs/design.md §8).

Every loss has the shape ``loss(logits, labels, mask=None, *, ...) -> scalar Tensor``:

- ``logits`` ``[B, L]``: the main model's raw scores;
- ``labels`` ``[B]``: gold label ids;
- ``mask`` ``[B]`` (optional): 1 for examples that count, 0 for those that do not; the loss is
  the mean over counted examples;
- keyword-only extras: ``bias_probs`` ``[B, L]`` (a bias-only model's distribution, here the
  hypothesis-only classifier's), ``teacher_probs`` ``[B, L]``, ``gate_logits`` ``[B]`` and the
  hyper-parameters ``beta``, ``gamma``, ``entropy_weight``.

The trainer calls :func:`call_loss`, which passes each function only the extras it declares.

>>> import torch
>>> logits = torch.log(torch.tensor([[0.5, 0.25, 0.25]]))   # p
>>> bias = torch.tensor([[0.25, 0.5, 0.25]])                 # b
>>> p_prime = torch.softmax(logits + torch.log(bias), -1)    # p·b normalised: 0.4, 0.4, 0.2
>>> round(float(call_loss("poe", logits, torch.tensor([0]), bias_probs=bias)), 4)  # −log 0.4
0.9163
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F

from zdebias.errors import lookup

#: Probabilities are clamped to at least this before a log.
EPS = 1e-12

LossFn = Callable[..., torch.Tensor]


def _reduce(per_example: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean over the examples that ``mask`` keeps (all when ``mask`` is None)."""
    if mask is None:
        return per_example.mean()
    weights = mask.to(per_example.dtype)
    return (per_example * weights).sum() / weights.sum().clamp_min(1.0)


def _log_probs(probs: torch.Tensor) -> torch.Tensor:
    return torch.log(probs.float().clamp_min(EPS))


def cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Plain cross-entropy ``−log softmax(logits)[label]``."""
    return _reduce(F.cross_entropy(logits.float(), labels, reduction="none"), mask)


def product_of_experts(
    logits: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    bias_probs: torch.Tensor,
    beta: float = 1.0,
    gamma: float = 0.0,
) -> torch.Tensor:
    """Product-of-Experts (GD-NLI Appendix A.2, Karimi Mahabadi et al. 2020).

    ``p' = softmax(log p + β·log b)`` and ``L = CE(l, p') + γ·CE(l, b)``, with ``p`` the main
    model's distribution and ``b`` the bias-only model's. In joint mode (the default of
    ``train_classifier``, as robust-nli) ``bias_probs`` is the softmax of a hypothesis-only
    head on the detached encoder, so it carries gradients: the head's logits get
    ``β·(p' − onehot(l)) + γ·(b − onehot(l))``. When ``b`` comes from a frozen bias model the
    γ term adds a constant (it moves the reported loss, not the gradients).
    """
    log_p = F.log_softmax(logits.float(), dim=-1)
    log_b = _log_probs(bias_probs)
    main = F.cross_entropy(log_p + beta * log_b, labels, reduction="none")
    bias = F.nll_loss(log_b, labels, reduction="none")
    return _reduce(main + gamma * bias, mask)


def learned_mixin(
    logits: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    bias_probs: torch.Tensor,
    gate_logits: torch.Tensor,
    entropy_weight: float = 0.0,
) -> torch.Tensor:
    """Learned-Mixin (Clark et al. 2019), with the +H entropy penalty when ``entropy_weight > 0``.

    ``g(x) = softplus(gate_logits)`` (the trainer computes ``gate_logits = w·h + c`` from the
    main model's first-token hidden state), ``p' = softmax(log p + g(x)·log b)``,
    ``L = CE(l, p') + w_H · H(softmax(g(x)·log b))``. The penalty stops the model from
    switching the bias off by driving ``g(x)`` to 0.
    """
    log_p = F.log_softmax(logits.float(), dim=-1)
    scaled_bias = F.softplus(gate_logits.float()).unsqueeze(-1) * _log_probs(bias_probs)
    per_example = F.cross_entropy(log_p + scaled_bias, labels, reduction="none")
    if entropy_weight:
        log_q = F.log_softmax(scaled_bias, dim=-1)
        entropy = -(log_q.exp() * log_q).sum(dim=-1)
        per_example = per_example + entropy_weight * entropy
    return _reduce(per_example, mask)


#: Learned-Mixin+H: :func:`learned_mixin` with the entropy penalty on (weight 0.03 unless given).
learned_mixin_h: LossFn = partial(learned_mixin, entropy_weight=0.03)


def confidence_regularization(
    logits: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    bias_probs: torch.Tensor,
    teacher_probs: torch.Tensor,
) -> torch.Tensor:
    """Confidence regularisation (Utama et al. 2020): self-distillation from a scaled teacher.

    The teacher's distribution is flattened where the bias model is confident about the gold
    label: ``s_j ∝ t_j^(1 − b_gold)``; the loss is the cross-entropy ``−Σ_j s_j log p_j``.
    """
    b_gold = bias_probs.float().gather(-1, labels.unsqueeze(-1))  # [B, 1]
    scaled = teacher_probs.float().clamp_min(EPS) ** (1.0 - b_gold)
    scaled = scaled / scaled.sum(dim=-1, keepdim=True)
    per_example = -(scaled * F.log_softmax(logits.float(), dim=-1)).sum(dim=-1)
    return _reduce(per_example, mask)


#: Losses by name. ``learned-mixin`` takes an ``entropy_weight`` too (0 by default).
LOSSES: dict[str, LossFn] = {
    "ce": cross_entropy,
    "poe": product_of_experts,
    "learned-mixin": learned_mixin,
    "learned-mixin-h": learned_mixin_h,
    "conf-reg": confidence_regularization,
}


def get_loss(name: str) -> LossFn:
    """The loss of that name; an unknown name fails with the list of valid names."""
    return lookup(LOSSES, name, "loss")


def loss_needs(name: str) -> set[str]:
    """The extra inputs a loss needs: a subset of ``bias_probs``, ``teacher_probs``,
    ``gate_logits``."""
    params = inspect.signature(get_loss(name)).parameters
    return {
        p
        for p, spec in params.items()
        if spec.kind is inspect.Parameter.KEYWORD_ONLY and spec.default is inspect.Parameter.empty
    }


def call_loss(
    name: str,
    logits: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor | None = None,
    **extras: Any,
) -> torch.Tensor:
    """Call the loss ``name``, passing only the extras it declares (``None`` extras are dropped)."""
    fn = get_loss(name)
    params = inspect.signature(fn).parameters
    kwargs = {k: v for k, v in extras.items() if k in params and v is not None}
    missing = loss_needs(name) - set(kwargs)
    if missing:
        raise ValueError(f"loss {name!r} needs {', '.join(sorted(missing))}")
    return fn(logits, labels, mask, **kwargs)
