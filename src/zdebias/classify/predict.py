"""Load a trained classifier folder and predict label probabilities.

A classifier folder is an HF ``save_pretrained`` folder (model + tokenizer) whose
``config.id2label`` names the labels, plus ``zdebias_classifier.json`` saying which input it was
trained on: ``pair`` (premise, hypothesis), ``hypothesis-only`` or ``text``. A folder without
that file (any hub or local HF classifier) is taken as ``pair`` for pair records, ``text``
otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from zdebias.data.schema import Record
from zdebias.models.resolve import resolve_model

CLASSIFIER_INFO = "zdebias_classifier.json"
InputKind = Literal["pair", "hypothesis-only", "text"]


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


def read_info(folder: str | Path) -> dict[str, Any]:
    """The ``zdebias_classifier.json`` of a folder, or ``{}``."""
    path = Path(folder) / CLASSIFIER_INFO
    return json.loads(path.read_text()) if path.exists() else {}


def load_classifier(ref: str | Path, *, device: str | None = None) -> LoadedClassifier:
    """Load a classifier folder (or hub name / packaged alias) for prediction."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = resolve_model(ref)
    info = read_info(path) if Path(path).is_dir() else {}
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
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


def predict_proba(
    clf: LoadedClassifier | str | Path,
    records: Sequence[Record],
    *,
    batch_size: int = 64,
    progress: bool = False,
) -> np.ndarray:
    """Probabilities ``[len(records), num_labels]`` in the classifier's label order."""
    import torch

    if not isinstance(clf, LoadedClassifier):
        clf = load_classifier(clf)
    first, second = model_inputs(records, clf.input)
    out = np.zeros((len(records), len(clf.labels)), dtype=np.float64)
    starts = range(0, len(records), batch_size)
    if progress:
        from rich.progress import track

        starts = track(starts, description="predicting", total=len(starts))
    with torch.inference_mode():
        for start in starts:
            end = start + batch_size
            enc = clf.tokenizer(
                first[start:end],
                second[start:end] if second is not None else None,
                truncation=True,
                max_length=clf.max_length,
                padding=True,
                return_tensors="pt",
            ).to(clf.device)
            logits = clf.model(**enc).logits.float()
            out[start:end] = torch.softmax(logits, dim=-1).cpu().numpy()
    return out
