"""The training-dynamics file, ``training_dynamics.jsonl``, written beside every classifier
zdebias trains (:mod:`zdebias.classify.dynamics`) and read by the cartography filter, the data
map and :func:`zdebias.cartography`.

One line per training example, in training-set order::

    {"id": "train.jsonl:1", "label": "neutral", "gold_probs": [0.31, 0.52, 0.71],
     "correct": [false, true, true], "epochs": 3,
     "confidence": 0.5133, "variability": 0.1632, "correctness": 0.6667}

``gold_probs[e]`` is the gold label's probability in epoch ``e`` (``null`` when the example was
not trained on in that epoch, e.g. the last epoch of a run cut by ``max_steps``); the three
statistics are :func:`~zdebias.stats.cartography.cartography_statistics` of those values.
Reading recomputes them from ``gold_probs`` and ``correct``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zdebias.errors import ConfigError, DataError
from zdebias.stats.cartography import cartography_statistics

#: the file's name in a classifier folder
DYNAMICS_FILE = "training_dynamics.jsonl"


@dataclass(frozen=True)
class Dynamics:
    """Training dynamics of N examples over E epochs (NaN: not trained on in that epoch)."""

    path: str
    ids: list[str]
    labels: list[str | None]
    gold_probs: np.ndarray  # [N, E]
    correct: np.ndarray  # [N, E], 1.0 / 0.0 / NaN
    confidence: np.ndarray
    variability: np.ndarray
    correctness: np.ndarray

    @property
    def n_epochs(self) -> int:
        return int(self.gold_probs.shape[1])

    def index(self) -> dict[str, int]:
        """id → row (the last row of a repeated id: match those by position)."""
        return {key: i for i, key in enumerate(self.ids)}


def dynamics_path(ref: str | Path) -> Path:
    """The dynamics file of ``ref``: a classifier folder (its :data:`DYNAMICS_FILE`) or the
    file itself; a clear error when there is none."""
    path = Path(ref)
    if path.is_dir():
        found = path / DYNAMICS_FILE
        if not found.is_file():
            raise ConfigError(
                f"{path}: no {DYNAMICS_FILE} (training dynamics are written by "
                "`zdebias train-classifier` of this version; train the classifier again)"
            )
        return found
    if not path.is_file():
        raise ConfigError(f"{path}: no such training-dynamics file or classifier folder")
    return path


def dynamics_rows(
    ids: Sequence[str],
    labels: Sequence[str | None],
    gold_probs: np.ndarray,
    correct: np.ndarray,
) -> list[dict[str, Any]]:
    """The file's lines for the given arrays (``[N, E]``, NaN where not seen)."""
    conf, var, corr = cartography_statistics(gold_probs, correct)
    rows = []
    for i, key in enumerate(ids):
        probs_i, right_i = gold_probs[i], correct[i]
        seen = ~np.isnan(probs_i)
        rows.append(
            {
                "id": key,
                "label": labels[i],
                "gold_probs": [float(p) if s else None for p, s in zip(probs_i, seen, strict=True)],
                "correct": [bool(c) if s else None for c, s in zip(right_i, seen, strict=True)],
                "epochs": int(seen.sum()),
                "confidence": float(conf[i]),
                "variability": float(var[i]),
                "correctness": float(corr[i]),
            }
        )
    return rows


def read_dynamics(ref: str | Path) -> Dynamics:
    """The dynamics of a classifier folder or file (:func:`dynamics_path`); a bad line or an
    example without any epoch fails with ``FILE:LINE``. Ids may repeat (a training set with
    repeated ids): the cartography filter then matches rows by position."""
    path = dynamics_path(ref)
    ids: list[str] = []
    labels: list[str | None] = []
    probs: list[list[float]] = []
    rights: list[list[float]] = []
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where: dict[str, Any] = {"path": str(path), "line": line_no}
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"not JSON ({err.msg})", **where) from None
            except (ValueError, RecursionError) as err:  # a number over the digit limit, depth
                raise DataError(f"not JSON ({err})", **where) from None
            if not isinstance(row, dict) or not isinstance(row.get("id"), str):
                raise DataError("expected an object with a string id", field="id", **where)
            key = row["id"]
            p, c = row.get("gold_probs"), row.get("correct")
            if not isinstance(p, list) or not isinstance(c, list) or len(p) != len(c):
                raise DataError(
                    "expected lists gold_probs and correct of the same length",
                    field="gold_probs",
                    **where,
                )
            try:
                p_vals = [np.nan if v is None else float(v) for v in p]
                c_vals = [np.nan if v is None else float(bool(v)) for v in c]
            except (TypeError, ValueError):
                raise DataError("expected numbers or null", field="gold_probs", **where) from None
            if all(np.isnan(v) for v in p_vals):
                raise DataError("no epoch recorded for this example", field="gold_probs", **where)
            ids.append(key)
            labels.append(row.get("label"))
            probs.append(p_vals)
            rights.append(c_vals)
    width = max((len(p) for p in probs), default=0)
    gold = np.full((len(ids), width), np.nan)
    correct = np.full((len(ids), width), np.nan)
    for i, (p_vals, c_vals) in enumerate(zip(probs, rights, strict=True)):
        gold[i, : len(p_vals)] = p_vals
        correct[i, : len(c_vals)] = c_vals
    conf, var, corr = cartography_statistics(gold, correct)
    return Dynamics(str(path), ids, labels, gold, correct, conf, var, corr)


__all__ = ["DYNAMICS_FILE", "Dynamics", "dynamics_path", "dynamics_rows", "read_dynamics"]
