"""Each loss against values computed by hand on 3-label toy distributions.

Main model p = (0.5, 0.25, 0.25) (logits = log p), bias model b = (0.25, 0.5, 0.25), gold = 0.
"""

from __future__ import annotations

import math

import pytest
import torch

from zdebias.classify.losses import (
    LOSSES,
    call_loss,
    confidence_regularization,
    cross_entropy,
    learned_mixin,
    loss_needs,
    product_of_experts,
)
from zdebias.errors import ConfigError

P = torch.tensor([[0.5, 0.25, 0.25]])
B = torch.tensor([[0.25, 0.5, 0.25]])
LOGITS = torch.log(P)
GOLD0 = torch.tensor([0])


def test_cross_entropy_is_minus_log_p_gold() -> None:
    assert float(cross_entropy(LOGITS, GOLD0)) == pytest.approx(math.log(2), abs=1e-6)


def test_poe_beta_one_is_product_of_distributions() -> None:
    # p·b ∝ (0.125, 0.125, 0.0625) → p' = (0.4, 0.4, 0.2); −log 0.4 = log 2.5
    loss = product_of_experts(LOGITS, GOLD0, bias_probs=B, beta=1.0, gamma=0.0)
    assert float(loss) == pytest.approx(math.log(2.5), abs=1e-6)


def test_poe_beta_two_sharpens_the_bias() -> None:
    # p·b² ∝ (0.03125, 0.0625, 0.015625) → p'_0 = 2/7; −log(2/7) = log 3.5
    loss = product_of_experts(LOGITS, GOLD0, bias_probs=B, beta=2.0, gamma=0.0)
    assert float(loss) == pytest.approx(math.log(3.5), abs=1e-6)


def test_poe_gamma_adds_bias_cross_entropy() -> None:
    # log 2.5 + 0.5·(−log 0.25) = log 2.5 + log 2 = log 5
    loss = product_of_experts(LOGITS, GOLD0, bias_probs=B, beta=1.0, gamma=0.5)
    assert float(loss) == pytest.approx(math.log(5), abs=1e-6)


def test_poe_gamma_term_trains_a_bias_that_has_gradients() -> None:
    bias_logits = torch.log(B).clone().requires_grad_(True)
    loss = product_of_experts(
        LOGITS, GOLD0, bias_probs=torch.softmax(bias_logits, -1), beta=1.0, gamma=1.0
    )
    loss.backward()
    # PoE part: p' − onehot = (−0.6, 0.4, 0.2); γ part: b − onehot = (−0.75, 0.5, 0.25)
    assert bias_logits.grad.tolist()[0] == pytest.approx([-1.35, 0.9, 0.45], abs=1e-5)


def test_poe_gradient_on_main_logits_is_ensemble_minus_onehot() -> None:
    logits = LOGITS.clone().requires_grad_(True)
    product_of_experts(logits, GOLD0, bias_probs=B, beta=1.0, gamma=0.7).backward()
    assert logits.grad.tolist()[0] == pytest.approx([-0.6, 0.4, 0.2], abs=1e-6)


def test_poe_mask_averages_over_kept_examples_only() -> None:
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25], [0.2, 0.2, 0.6]]))
    bias = torch.tensor([[0.25, 0.5, 0.25], [1 / 3, 1 / 3, 1 / 3]])
    labels = torch.tensor([0, 2])
    both = product_of_experts(logits, labels, bias_probs=bias)
    # second example: uniform bias leaves p unchanged → −log 0.6
    assert float(both) == pytest.approx((math.log(2.5) - math.log(0.6)) / 2, abs=1e-6)
    first = product_of_experts(logits, labels, torch.tensor([1, 0]), bias_probs=bias)
    assert float(first) == pytest.approx(math.log(2.5), abs=1e-6)


def test_learned_mixin_gate_scales_log_bias() -> None:
    # softplus(log(e − 1)) = 1 → same as PoE β = 1; softplus(log(e² − 1)) = 2 → β = 2
    g1 = torch.tensor([math.log(math.e - 1)])
    g2 = torch.tensor([math.log(math.e**2 - 1)])
    assert float(learned_mixin(LOGITS, GOLD0, bias_probs=B, gate_logits=g1)) == pytest.approx(
        math.log(2.5), abs=1e-5
    )
    assert float(learned_mixin(LOGITS, GOLD0, bias_probs=B, gate_logits=g2)) == pytest.approx(
        math.log(3.5), abs=1e-5
    )


def test_learned_mixin_h_adds_entropy_of_scaled_bias() -> None:
    # g = 1: softmax(log b) = b; H(b) = −(2·0.25 log 0.25 + 0.5 log 0.5) = 1.5 log 2
    g1 = torch.tensor([math.log(math.e - 1)])
    loss = learned_mixin(LOGITS, GOLD0, bias_probs=B, gate_logits=g1, entropy_weight=0.1)
    assert float(loss) == pytest.approx(math.log(2.5) + 0.1 * 1.5 * math.log(2), abs=1e-5)
    named = call_loss("learned-mixin-h", LOGITS, GOLD0, bias_probs=B, gate_logits=g1)
    assert float(named) == pytest.approx(math.log(2.5) + 0.03 * 1.5 * math.log(2), abs=1e-5)


def test_learned_mixin_gate_gets_gradient() -> None:
    gate = torch.tensor([0.3], requires_grad=True)
    learned_mixin(LOGITS, GOLD0, bias_probs=B, gate_logits=gate).backward()
    assert gate.grad is not None and float(gate.grad.abs()) > 0


def test_conf_reg_scales_teacher_by_bias_confidence() -> None:
    # gold 1: b_gold = 0.5, teacher t = (1/9, 4/9, 4/9) → t^0.5 = (1/3, 2/3, 2/3) → s = (.2, .4, .4)
    teacher = torch.tensor([[1 / 9, 4 / 9, 4 / 9]])
    loss = confidence_regularization(LOGITS, torch.tensor([1]), bias_probs=B, teacher_probs=teacher)
    # −(0.2 log 0.5 + 0.4 log 0.25 + 0.4 log 0.25) = 1.8 log 2
    assert float(loss) == pytest.approx(1.8 * math.log(2), abs=1e-5)


def test_conf_reg_extremes_keep_or_flatten_the_teacher() -> None:
    teacher = torch.tensor([[0.7, 0.2, 0.1]])
    # bias gives gold probability 0 → targets = teacher
    loss = confidence_regularization(
        LOGITS, GOLD0, bias_probs=torch.tensor([[0.0, 0.5, 0.5]]), teacher_probs=teacher
    )
    expected = -(0.7 * math.log(0.5) + 0.3 * math.log(0.25))
    assert float(loss) == pytest.approx(expected, abs=1e-5)
    # bias certain of gold → uniform targets
    loss = confidence_regularization(
        LOGITS, GOLD0, bias_probs=torch.tensor([[1.0, 0.0, 0.0]]), teacher_probs=teacher
    )
    expected = -(math.log(0.5) + 2 * math.log(0.25)) / 3
    assert float(loss) == pytest.approx(expected, abs=1e-5)


def test_registry_names_and_needs() -> None:
    assert set(LOSSES) == {"ce", "poe", "learned-mixin", "learned-mixin-h", "conf-reg"}
    assert loss_needs("ce") == set()
    assert loss_needs("poe") == {"bias_probs"}
    assert loss_needs("learned-mixin") == {"bias_probs", "gate_logits"}
    assert loss_needs("conf-reg") == {"bias_probs", "teacher_probs"}
    with pytest.raises(ConfigError, match=r"unknown loss 'focal'.*ce, poe"):
        call_loss("focal", LOGITS, GOLD0)
    with pytest.raises(ValueError, match="needs bias_probs"):
        call_loss("poe", LOGITS, GOLD0)
    # extras a loss does not declare are not passed to it
    assert float(call_loss("ce", LOGITS, GOLD0, bias_probs=B, beta=3.0)) == pytest.approx(
        math.log(2), abs=1e-6
    )
