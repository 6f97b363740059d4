"""Generator losses against values computed by hand on a 3-token vocabulary."""

from __future__ import annotations

import math

import pytest
import torch

from zdebias.generation.losses import (
    LOSSES,
    UL_EPS,
    get_loss,
    log1m_exp,
    masked_unlikelihood_loss,
    mle_loss,
    unlikelihood_loss,
)

# Three positions over the vocabulary {0, 1, 2}; targets 1, 2, 0.
LOGITS = [[1.0, 2.0, 0.5], [0.0, 0.0, 3.0], [2.0, -1.0, 1.0]]
TARGETS = [1, 2, 0]


def _p(row: list[float], k: int) -> float:
    z = sum(math.exp(v) for v in row)
    return math.exp(row[k]) / z


# p(target) per position, by hand: e^2/(e^1+e^2+e^0.5), e^3/(1+1+e^3), e^2/(e^2+e^-1+e^1)
P = [_p(row, k) for row, k in zip(LOGITS, TARGETS, strict=True)]


def _tensors() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor([LOGITS]), torch.tensor([TARGETS])


def test_probabilities_by_hand() -> None:
    assert P[0] == pytest.approx(0.6285317, abs=1e-6)
    assert P[1] == pytest.approx(0.9094430, abs=1e-6)
    assert P[2] == pytest.approx(0.7053845, abs=1e-6)


def test_mle_matches_hand_value() -> None:
    logits, labels = _tensors()
    expected = -(math.log(P[0]) + math.log(P[1]) + math.log(P[2])) / 3
    assert float(mle_loss(logits, labels)) == pytest.approx(expected, abs=1e-6)
    assert float(mle_loss(logits, labels)) == pytest.approx(0.3027680, abs=1e-6)


def test_unlikelihood_matches_hand_value() -> None:
    logits, labels = _tensors()
    per_token = [-math.log(1 - p) for p in P]
    assert float(unlikelihood_loss(logits, labels, reduction="sum")) == pytest.approx(
        sum(per_token), abs=1e-5
    )
    assert float(unlikelihood_loss(logits, labels)) == pytest.approx(sum(per_token) / 3, abs=1e-5)
    # -log(1-0.6285317) - log(1-0.9094129) - log(1-0.7053845)
    assert float(unlikelihood_loss(logits, labels, reduction="sum")) == pytest.approx(
        4.61415, abs=1e-4
    )


def test_masked_unlikelihood_matches_hand_value() -> None:
    logits, labels = _tensors()
    mask = torch.tensor([[1.0, 0.0, 1.0]])  # likelihood, unlikelihood, likelihood
    expected = -(math.log(P[0]) + math.log(1 - P[1]) + math.log(P[2]))
    got = masked_unlikelihood_loss(logits, labels, mask, reduction="sum")
    assert float(got) == pytest.approx(expected, abs=1e-5)
    assert float(got) == pytest.approx(3.21516, abs=1e-4)
    # all-ones mask is plain likelihood; all-zeros is plain unlikelihood
    ones, zeros = torch.ones(1, 3), torch.zeros(1, 3)
    assert float(masked_unlikelihood_loss(logits, labels, ones)) == pytest.approx(
        float(mle_loss(logits, labels)), abs=1e-6
    )
    assert float(masked_unlikelihood_loss(logits, labels, zeros)) == pytest.approx(
        float(unlikelihood_loss(logits, labels)), abs=1e-6
    )


def test_ignored_positions_and_reductions() -> None:
    logits, _ = _tensors()
    labels = torch.tensor([[1, -100, 0]])
    expected_sum = -(math.log(P[0]) + math.log(P[2]))
    assert float(mle_loss(logits, labels, reduction="sum")) == pytest.approx(expected_sum, 1e-6)
    assert float(mle_loss(logits, labels)) == pytest.approx(expected_sum / 2, abs=1e-6)
    per = mle_loss(logits, labels, reduction="none")
    assert per.shape == (1, 3)
    assert float(per[0, 1]) == 0.0
    assert float(per[0, 0]) == pytest.approx(-math.log(P[0]), abs=1e-6)
    weights = torch.tensor([[2.0, 5.0, 0.0]])
    assert float(unlikelihood_loss(logits, labels, weights, reduction="sum")) == pytest.approx(
        -2 * math.log(1 - P[0]), abs=1e-5
    )
    nothing = torch.full((1, 3), -100)
    assert float(mle_loss(logits, nothing)) == 0.0


def test_unlikelihood_is_stable_at_p_near_one_and_zero() -> None:
    logits = torch.tensor([[[0.0, 0.0, 200.0], [0.0, 0.0, -200.0]]], requires_grad=True)
    labels = torch.tensor([[2, 2]])
    loss = unlikelihood_loss(logits, labels, reduction="none")
    # p = 1: clamped to 1 - p = eps; p ~ 0: -log(1 - p) ~ 0
    assert float(loss[0, 0].detach()) == pytest.approx(-math.log(UL_EPS), rel=1e-4)
    assert float(loss[0, 1].detach()) == pytest.approx(0.0, abs=1e-9)
    loss.sum().backward()
    assert torch.isfinite(logits.grad).all()
    masked = masked_unlikelihood_loss(logits, labels, torch.tensor([[0.0, 1.0]]))
    assert torch.isfinite(masked)


def test_log1m_exp_matches_direct_formula() -> None:
    xs = torch.tensor([-50.0, -5.0, -1.0, -0.7, -0.6931, -0.5, -1e-3, -1e-5], dtype=torch.float64)
    got = log1m_exp(xs, eps=1e-12)
    for x, g in zip(xs.tolist(), got.tolist(), strict=True):
        assert g == pytest.approx(math.log(1 - math.exp(x)), rel=1e-9)


def test_losses_by_name() -> None:
    assert set(LOSSES) == {"mle", "unlikelihood", "masked_unlikelihood"}
    assert get_loss("mle") is mle_loss
    with pytest.raises(ValueError, match="expected one of mle, unlikelihood"):
        get_loss("focal")
    logits, labels = _tensors()
    with pytest.raises(ValueError, match="0/1 mask"):
        masked_unlikelihood_loss(logits, labels, torch.tensor([[0.5, 1.0, 1.0]]))


def test_weighted_mean_and_log_softmax_path() -> None:
    logits, labels = _tensors()
    mask = torch.tensor([[1.0, 0.0, 1.0]])
    # the mean over the tokens the mask selects (2 of 3), not over all counted tokens
    expected = -(math.log(P[0]) + math.log(P[2])) / 2
    got = mle_loss(logits, labels, mask, reduction="weighted_mean")
    assert float(got) == pytest.approx(expected, abs=1e-6)
    assert float(mle_loss(logits, labels, reduction="weighted_mean")) == pytest.approx(
        float(mle_loss(logits, labels)), abs=1e-7
    )
    ul = unlikelihood_loss(logits, labels, mask, reduction="weighted_mean", log_softmax=True)
    assert float(ul) == pytest.approx(-(math.log(1 - P[0]) + math.log(1 - P[2])) / 2, abs=1e-5)
    for fn in (mle_loss, unlikelihood_loss):
        assert float(fn(logits, labels, log_softmax=True)) == pytest.approx(
            float(fn(logits, labels)), abs=1e-6
        )
    with pytest.raises(ValueError, match="weighted_mean"):
        mle_loss(logits, labels, reduction="average")
