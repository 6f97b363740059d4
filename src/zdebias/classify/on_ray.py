"""Scoring with a classifier on Ray actors (``--ray``): predict, confidence-filter, evaluate.

:func:`classifier_for` is where those operations choose: the classifier loaded in this process
(:class:`~zdebias.classify.predict.LoadedClassifier`), or with ``ray`` set a
:class:`RemoteClassifier` that scores through Ray Data: the driver cuts the rows into the
forward passes the in-process path makes (:func:`~zdebias.classify.predict.length_batches`),
one Ray Data row per pass, and ``map_batches`` runs them on a pool of actors that each hold the
model (:class:`BatchScorer`, :func:`~zdebias.classify.predict.score_batch`). The probabilities
come back by pass index, so they are the in-process ones (to float32's last digits: the math
library may sum a matrix product in another order in another process), and the caller writes
its outputs as it does without Ray. The model folder must be readable on every node (a shared
filesystem).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zdebias.classify.predict import (
    LoadedClassifier,
    hf_progress,
    length_batches,
    load_classifier,
    model_inputs,
    read_info,
    score_batch,
)
from zdebias.classify.settings import InferenceSettings, InputKind, torch_device
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, ZdebiasError
from zdebias.executor import ray_session
from zdebias.models.resolve import resolve_model


class BatchScorer:
    """A Ray Data actor: the classifier loaded once; each row of a batch is one forward pass
    (``first``, ``second`` texts), scored to its probabilities (float64 bytes)."""

    def __init__(self, path: str, device: str | None) -> None:
        self.clf = load_classifier(path, device=device)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        probs = []
        for first, second in zip(batch["first"], batch["second"], strict=True):
            pairs = list(second) if len(second) else None
            probs.append(score_batch(self.clf, list(first), pairs).tobytes())
        return {"index": batch["index"], "probs": np.array(probs, dtype=object)}


@dataclass
class RemoteClassifier:
    """A classifier that scores on Ray actors (see the module doc): its folder, labels and
    input kind are read here; the weights load only in the actors."""

    path: str
    labels: list[str]
    input: InputKind | None
    settings: InferenceSettings

    def predict_each(
        self, sets: Sequence[Sequence[Record]], *, batch_size: int, progress: bool = False
    ) -> list[np.ndarray]:
        """The probabilities ``[len(records), num_labels]`` of each record set, from one pass
        of Ray Data over all their forward passes."""
        items: list[dict[str, object]] = []
        where: list[tuple[int, np.ndarray]] = []
        for k, records in enumerate(sets):
            first, second = model_inputs(records, self.input)
            for idx in length_batches(first, second, batch_size):
                pairs = [second[i] for i in idx] if second is not None else []
                items.append({"index": len(items), "first": [first[i] for i in idx]})
                items[-1]["second"] = pairs
                where.append((k, idx))
        out = [np.zeros((len(s), len(self.labels)), dtype=np.float64) for s in sets]
        if not items:
            return out
        s = self.settings
        with ray_session(s) as ray:
            ray.data.DataContext.get_current().enable_progress_bars = progress
            actors = min(s.actor_count(ray.cluster_resources()), len(items))
            data = ray.data.from_items(items, override_num_blocks=min(len(items), 4 * actors))
            scored = data.map_batches(
                BatchScorer,
                fn_constructor_args=(self.path, torch_device(s.device)),
                batch_size=1,
                compute=ray.data.ActorPoolStrategy(size=actors),
                **s.actor_options(),
            )
            try:
                for row in scored.iter_rows():
                    k, idx = where[int(row["index"])]
                    probs = np.frombuffer(row["probs"], dtype=np.float64)
                    out[k][idx] = probs.reshape(len(idx), -1)
            except ray.exceptions.RayError as err:
                cause = " ".join(str(err).split())[-300:]
                raise ZdebiasError(f"scoring on Ray failed: ...{cause}") from None
        return out


def classifier_for(
    model: str | Path, settings: InferenceSettings, *, progress: bool = False
) -> LoadedClassifier | RemoteClassifier:
    """The classifier ``model`` as the operation runs it: loaded here on ``settings.device``,
    or with ``settings.ray`` a :class:`RemoteClassifier`. Both give ``labels``, ``input`` and
    ``predict_each``."""
    if not settings.on_ray:
        with hf_progress(progress):
            return load_classifier(model, device=settings.device)
    from transformers import AutoConfig

    path = resolve_model(model)
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"cannot load classifier {model!s}: {' '.join(str(err).split())}"
        ) from None
    labels = [str(config.id2label[i]) for i in range(len(config.id2label))]
    info = read_info(path) if Path(path).is_dir() else {}
    return RemoteClassifier(str(path), labels, info.get("input"), settings)


__all__ = ["BatchScorer", "RemoteClassifier", "classifier_for"]
