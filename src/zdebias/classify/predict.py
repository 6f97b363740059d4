"""Load a trained classifier folder and predict label probabilities.

A classifier folder is an HF ``save_pretrained`` folder (model + tokenizer) whose
``config.id2label`` names the labels, plus ``zdebias_classifier.json`` saying which input it was
trained on: ``pair`` (premise, hypothesis), ``hypothesis-only`` or ``text``. A folder without
that file (any hub or local HF classifier) is taken as ``pair`` for pair records, ``text``
otherwise.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zdebias.classify.learned import folder_did_not_learn, warn_unlearned
from zdebias.classify.settings import InputKind
from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.models.compute import model_device
from zdebias.models.coverage import warn_vocabulary
from zdebias.models.resolve import resolve_model

log = logging.getLogger("zdebias")

CLASSIFIER_INFO = "zdebias_classifier.json"


@dataclass
class LoadedClassifier:
    """A classifier ready to predict: model in eval mode, its tokenizer and label names."""

    model: Any
    tokenizer: Any
    labels: list[str]
    input: InputKind | None
    max_length: int = 128

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    def predict_each(
        self, sets: Sequence[Sequence[Record]], *, batch_size: int, progress: bool = False
    ) -> list[np.ndarray]:
        """:func:`predict_proba` of each record set (the interface a classifier on Ray
        actors shares: :class:`zdebias.classify.on_ray.RemoteClassifier`)."""
        return [predict_proba(self, s, batch_size=batch_size, progress=progress) for s in sets]


@contextlib.contextmanager
def hf_progress(enabled: bool) -> Iterator[None]:
    """Turn transformers' own progress bars (loading, saving) off inside the block unless
    ``enabled``; restores the previous state."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    if not enabled:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was and not enabled:
            hf_logging.enable_progress_bar()


def read_info(folder: str | Path) -> dict[str, Any]:
    """The ``zdebias_classifier.json`` of a folder, or ``{}``."""
    path = Path(folder) / CLASSIFIER_INFO
    return json.loads(path.read_text()) if path.exists() else {}


def load_classifier(ref: str | Path, *, device: str | None = None) -> LoadedClassifier:
    """Load a classifier folder (or hub name / packaged alias) for prediction.

    ``device``: ``cpu``, ``cuda``, or ``None`` / ``auto`` (the GPU when there is one).
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = resolve_model(ref)
    info = read_info(path) if Path(path).is_dir() else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForSequenceClassification.from_pretrained(path)
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot load classifier {ref!s}: {' '.join(str(err).split())}") from None
    if tokenizer.pad_token is None:  # decoder-only models (GPT-2, Llama) ship without one
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        if model.config.pad_token_id is None:
            model.config.pad_token_id = tokenizer.pad_token_id
    reason = folder_did_not_learn(path) if Path(path).is_dir() and warn_unlearned() else None
    if reason:
        log.warning(
            "%s: this classifier did not learn (%s): its predictions are no better than chance",
            ref,
            reason,
        )
    device = model_device(device)
    model.to(device).eval()
    id2label = model.config.id2label
    labels = [str(id2label[i]) for i in range(len(id2label))]
    return LoadedClassifier(
        model, tokenizer, labels, info.get("input"), int(info.get("max_length", 128))
    )


def model_inputs(
    records: Sequence[Record], kind: InputKind | None
) -> tuple[list[str], list[str] | None]:
    """The first (and second) text the model sees for each record."""
    if not records:
        return [], None
    if kind is None:
        kind = "pair" if records[0].is_pair else "text"
    if kind == "pair":
        return [r.premise or "" for r in records], [r.hypothesis or "" for r in records]
    if kind == "hypothesis-only":
        return [r.main_text for r in records], None
    return [r.text if r.text is not None else r.main_text for r in records], None


def length_batches(
    first: Sequence[str], second: Sequence[str] | None, batch_size: int
) -> list[np.ndarray]:
    """The row indices of each forward pass: rows sorted by length (batches of similar length
    pad less; stable, so ties keep input order), cut into ``batch_size``."""
    lengths = [len(a) + (len(second[i]) if second is not None else 0) for i, a in enumerate(first)]
    order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
    return [order[start : start + batch_size] for start in range(0, len(first), batch_size)]


def score_batch(
    clf: LoadedClassifier, first: Sequence[str], second: Sequence[str] | None
) -> np.ndarray:
    """One forward pass: the probabilities ``[len(first), num_labels]`` (float64)."""
    import torch

    with torch.inference_mode():
        enc = clf.tokenizer(
            list(first),
            list(second) if second is not None else None,
            truncation=True,
            max_length=clf.max_length,
            padding=True,
            return_tensors="pt",
        ).to(clf.device)
        logits = clf.model(**enc).logits.float()
        return torch.softmax(logits, dim=-1).cpu().numpy().astype(np.float64)


def predict_proba(
    clf: LoadedClassifier | str | Path,
    records: Sequence[Record],
    *,
    batch_size: int = 64,
    progress: bool = False,
) -> np.ndarray:
    """Probabilities ``[len(records), num_labels]`` in the classifier's label order."""
    if not isinstance(clf, LoadedClassifier):
        clf = load_classifier(clf)
    warn_vocabulary(clf.tokenizer, records, clf.model.config.name_or_path)
    first, second = model_inputs(records, clf.input)
    out = np.zeros((len(records), len(clf.labels)), dtype=np.float64)
    batches: Any = length_batches(first, second, batch_size)
    if progress:
        from zdebias.data.progress import track

        batches = track(batches, "predicting", total=len(batches))
    for idx in batches:  # rows are written back in input order
        pairs = [second[i] for i in idx] if second is not None else None
        out[idx] = score_batch(clf, [first[i] for i in idx], pairs)
    return out


def with_predictions(
    records: Sequence[Record], probs: np.ndarray, labels: Sequence[str], input: InputKind | None
) -> list[Record]:
    """Copies of ``records`` whose meta holds ``pred`` (label name) and ``probs`` (label → p).

    A hypothesis-only classifier's prediction is also stored as ``hypo_only_pred`` (and
    ``hypo_only_probs``), the meta keys the ``hypo-only-pred`` feature reads.
    """
    if probs.shape != (len(records), len(labels)):
        raise ValueError(
            f"probabilities of shape {probs.shape} for {len(records)} records "
            f"and {len(labels)} labels"
        )
    out = []
    for record, row in zip(records, probs, strict=True):
        dist = {name: float(p) for name, p in zip(labels, row, strict=True)}
        pred = labels[int(np.argmax(row))]
        meta = {**record.meta, "pred": pred, "probs": dist}
        if input == "hypothesis-only":
            meta["hypo_only_pred"] = pred
            meta["hypo_only_probs"] = dist
        out.append(record.replace(meta=meta))
    return out
