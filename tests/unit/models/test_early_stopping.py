"""The shared early-stopping policy on hand-made metric sequences."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from zdebias.models.early_stopping import EarlyStopping


def _run(stop: EarlyStopping, values: list[float], key: str) -> tuple[torch.nn.Module, list[int]]:
    """Feed one evaluation per epoch; the model's weight is set to the epoch number first."""
    model = torch.nn.Linear(1, 1, bias=False)
    stops = []
    for epoch, value in enumerate(values, start=1):
        with torch.no_grad():
            model.weight.fill_(float(epoch))
        control = SimpleNamespace(should_training_stop=False)
        stop.on_evaluate(
            None,
            SimpleNamespace(global_step=10 * epoch, epoch=float(epoch)),
            control,
            metrics={"eval_loss": value / 2, key: value},
            model=model,
        )
        if control.should_training_stop:
            stops.append(epoch)
    return model, stops


def test_lower_is_better_keeps_best_and_stops_after_patience() -> None:
    stop = EarlyStopping("eval_loss", greater_is_better=False, patience=2)
    model, stops = _run(stop, [3.0, 2.0, 2.0, 1.5, 1.6, 1.7], "eval_loss")
    # epoch 3 ties the best (2.0): a tie is no improvement; epoch 4 improves, 5-6 do not
    assert (stop.best_value, stop.best_step, stop.best_epoch) == (1.5, 40, 4.0)
    assert stops == [6] and stop.stopped_early and stop.bad_evals == 2
    assert stop.best_state["weight"].tolist() == [[4.0]]
    assert model.weight.item() == 6.0
    assert stop.restore_best(model) and model.weight.item() == 4.0
    assert [h["eval_loss"] for h in stop.history] == [3.0, 2.0, 2.0, 1.5, 1.6, 1.7]
    assert [h["step"] for h in stop.history] == [10, 20, 30, 40, 50, 60]


def test_greater_is_better_with_named_history() -> None:
    stop = EarlyStopping(
        "eval_accuracy",
        greater_is_better=True,
        patience=1,
        record={"dev_accuracy": "eval_accuracy", "dev_loss": "eval_loss"},
    )
    _, stops = _run(stop, [0.5, 0.7, 0.7], "eval_accuracy")
    assert stop.best_value == 0.7 and stop.best_epoch == 2.0 and stops == [3]
    assert stop.history[0] == {"step": 10, "epoch": 1.0, "dev_accuracy": 0.5, "dev_loss": 0.25}


@pytest.mark.parametrize("patience", [0, -1])
def test_patience_zero_never_stops(patience: int) -> None:
    stop = EarlyStopping("eval_loss", greater_is_better=False, patience=patience)
    _, stops = _run(stop, [1.0, 2.0, 3.0, 4.0], "eval_loss")
    assert stops == [] and not stop.stopped_early and stop.best_epoch == 1.0


def test_missing_metric_and_no_evaluation() -> None:
    stop = EarlyStopping("eval_bleu", greater_is_better=True, patience=1)
    _run(stop, [1.0], "eval_loss")
    assert stop.history == [] and stop.best_value is None
    assert not stop.restore_best(torch.nn.Linear(1, 1))
    assert stop.update(0.3, step=1, epoch=1.0) is False and stop.best_state is None
    assert stop.update(0.2, step=2, epoch=2.0) is True
