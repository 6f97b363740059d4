"""Did a classifier training learn anything? (:func:`did_not_learn`)

A training can end where it started: on snli_20k, 1 epoch at learning rate 1e-4 left 6 MiniLM
runs of docs/results/history.md at a training loss of ln 3 and a dev accuracy of a third, and their
test numbers were averaged with the seeds that learned. A run is said not to have learned when

- its best dev accuracy is less than :data:`CHANCE_MARGIN` above always answering the dev
  set's most frequent label, or
- (plain cross-entropy only) its last logged training loss is at least :data:`LOSS_SHARE` of
  the entropy of the training labels' shares, the loss of a model that answers those shares
  whatever the input (ln 3 = 1.099 for three even labels).

The training summary (``metrics.json``) records the reason (``did_not_learn``) and the
training warns, unless its caller says it instead (:func:`said_by_caller`: a recipe stage's
notes); evaluation tables mark such runs and keep them in their means, so the numbers stay
what was measured. Only the standard library loads here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

#: best dev accuracy must exceed the majority label's dev share by this much (2 points)
CHANCE_MARGIN = 0.02
#: the last logged cross-entropy at this share of the label prior's entropy or above: not learned
LOSS_SHARE = 0.98


_CALLER_SAYS: ContextVar[bool] = ContextVar("zdebias_unlearned_said_by_caller", default=False)


@contextmanager
def said_by_caller() -> Iterator[None]:
    """Within it, a classifier that did not learn is not warned about where it is trained or
    loaded (the training still records why): the caller says it (a recipe stage, in its
    notes)."""
    token = _CALLER_SAYS.set(True)
    try:
        yield
    finally:
        _CALLER_SAYS.reset(token)


def warn_unlearned() -> bool:
    """Whether a classifier that did not learn is warned about where it is trained or loaded
    (outside :func:`said_by_caller`)."""
    return not _CALLER_SAYS.get()


def prior_entropy(counts: Mapping[str, int]) -> float | None:
    """The entropy (nats) of the label shares in ``counts``; None without labels."""
    n = sum(counts.values())
    if n <= 0:
        return None
    return -sum(c / n * math.log(c / n) for c in counts.values() if c > 0)


def did_not_learn(metrics: Mapping[str, Any]) -> str | None:
    """Why the training summarised by ``metrics`` (a ``metrics.json``) did not learn, or
    None when it did (or when its summary holds neither test's numbers: older folders lack
    ``dev_label_counts``)."""
    reasons = []
    dev = metrics.get("dev_label_counts") or {}
    best = (metrics.get("best") or {}).get("dev_accuracy")
    if dev and best is not None:
        label, top = max(dev.items(), key=lambda item: (item[1], item[0]))
        share = top / sum(dev.values())
        if best < share + CHANCE_MARGIN:
            reasons.append(
                f"best dev accuracy {100 * best:.1f}% is no better than always answering "
                f"{label!r} ({100 * share:.1f}% of dev)"
            )
    losses = [e["loss"] for e in metrics.get("log_history") or [] if "loss" in e]
    prior = prior_entropy(metrics.get("train_label_counts") or {})
    if metrics.get("loss") == "ce" and losses and prior and losses[-1] >= LOSS_SHARE * prior:
        reasons.append(
            f"training loss ended at {losses[-1]:.3f}, the loss of answering the training "
            f"labels' shares whatever the input is {prior:.3f}"
        )
    return "; ".join(reasons) or None


#: a training whose loss stays at chance for more than this share of its steps started slowly
SLOW_START_SHARE = 0.3


def slow_start(metrics: Mapping[str, Any]) -> dict[str, int] | None:
    """A plain cross-entropy training that learned, but late: its logged training loss stayed
    at :data:`LOSS_SHARE` of the label prior's entropy or above (chance) for more than
    :data:`SLOW_START_SHARE` of its steps. Returns ``{"steps": first step below, "of": total
    steps}``, or None (learned early, never learned: :func:`did_not_learn`, or not plain CE).
    Such a run tends to end far below its sibling seeds (docs/classify.md, 'A seed that trains
    poorly')."""
    if metrics.get("loss") != "ce":
        return None
    prior = prior_entropy(metrics.get("train_label_counts") or {})
    logged = [(e["step"], e["loss"]) for e in metrics.get("log_history") or [] if "loss" in e]
    total = metrics.get("steps")
    if not prior or not logged or not isinstance(total, int) or total <= 0:
        return None
    below = next((step for step, loss in logged if loss < LOSS_SHARE * prior), None)
    if below is None or below <= SLOW_START_SHARE * total:
        return None
    return {"steps": int(below), "of": total}


def recorded_did_not_learn(metrics: Mapping[str, Any]) -> str | None:
    """``metrics["did_not_learn"]`` as the training recorded it, or :func:`did_not_learn` of
    a summary written before it was recorded."""
    return metrics["did_not_learn"] if "did_not_learn" in metrics else did_not_learn(metrics)


def folder_did_not_learn(folder: str | Path) -> str | None:
    """Why the classifier in ``folder`` did not learn, from its ``metrics.json``: the reason
    recorded at training, or :func:`did_not_learn` of an older summary; None when it learned
    or the folder has no readable summary (a hub model)."""
    path = Path(folder) / "metrics.json"
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(metrics, dict):
        return None
    return recorded_did_not_learn(metrics)


__all__ = [
    "CHANCE_MARGIN",
    "LOSS_SHARE",
    "SLOW_START_SHARE",
    "did_not_learn",
    "folder_did_not_learn",
    "prior_entropy",
    "recorded_did_not_learn",
    "said_by_caller",
    "slow_start",
    "warn_unlearned",
]
