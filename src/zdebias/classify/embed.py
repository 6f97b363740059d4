"""Frozen sentence embeddings of records (AFLite's features), cached on disk.

A pair record is encoded as the encoder's text pair (``tokenizer(premise, hypothesis)``:
``[CLS] premise [SEP] hypothesis [SEP]`` for BERT-type encoders, as the classifiers see it), a
single-text record as its text; the last hidden states are mean-pooled over the real tokens
and L2-normalised (all-MiniLM-L6-v2's own pooling). The result is cached as
``$ZDEBIAS_CACHE/embeddings/<key>.npy`` (default ``~/.cache/zdebias``), the key a digest of
the encoder (its name, or a local folder's path and its files' sizes and mtimes), the
``max_length`` and every text embedded, so a rerun on the same data reads it back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from zdebias.classify.predict import hf_progress, length_batches, model_inputs
from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.models.compute import model_device
from zdebias.models.coverage import warn_vocabulary
from zdebias.models.resolve import cache_dir, resolve_model

#: rows per forward pass
EMBED_BATCH = 64


def _encoder_identity(resolved: str) -> str:
    """The encoder's part of the cache key: a hub name as is; a local folder by its path and
    its files' names, sizes and mtimes (a retrained folder is embedded again)."""
    path = Path(resolved)
    if not path.is_dir():
        return resolved
    items = [
        f"{p.relative_to(path).as_posix()}|{p.stat().st_size}|{p.stat().st_mtime_ns}"
        for p in sorted(path.rglob("*"))
        if p.is_file()
    ]
    return json.dumps([str(path), items])


def cache_key(
    encoder: str, max_length: int, first: Sequence[str], second: Sequence[str] | None
) -> str:
    """The digest that names a cached embedding file."""
    h = hashlib.sha256()
    h.update(json.dumps([_encoder_identity(encoder), max_length, second is not None]).encode())
    for i, text in enumerate(first):
        h.update(text.encode())
        h.update(b"\x00")
        if second is not None:
            h.update(second[i].encode())
        h.update(b"\x01")
    return h.hexdigest()


def _embed(
    resolved: str,
    first: Sequence[str],
    second: Sequence[str] | None,
    *,
    max_length: int,
    progress: bool,
) -> np.ndarray:
    import torch
    from transformers import AutoModel, AutoTokenizer

    with hf_progress(progress):
        try:
            tokenizer = AutoTokenizer.from_pretrained(resolved)
            model = AutoModel.from_pretrained(resolved)
        except (OSError, ValueError) as err:
            raise ConfigError(
                f"cannot load encoder {resolved}: {' '.join(str(err).split())}"
            ) from None
    warn_vocabulary(tokenizer, first, resolved)  # the English MiniLM given Chinese, ...
    device = model_device()
    model.to(device).eval()
    dim = int(model.config.hidden_size)
    out = np.zeros((len(first), dim), dtype=np.float32)
    batches: Any = length_batches(first, second, EMBED_BATCH)
    if progress:
        from zdebias.data.progress import track

        batches = track(batches, "embedding", total=len(batches))
    with torch.inference_mode():
        for idx in batches:
            enc = tokenizer(
                [first[i] for i in idx],
                [second[i] for i in idx] if second is not None else None,
                truncation=True,
                max_length=max_length,
                padding=True,
                return_tensors="pt",
            ).to(device)
            hidden = model(**enc).last_hidden_state.float()
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
            out[idx] = pooled.cpu().numpy()
    return out


def embed_records(
    records: Sequence[Record], settings: Any, *, progress: bool = False
) -> tuple[np.ndarray, dict[str, Any]]:
    """The embeddings ``[len(records), hidden]`` (float32) of ``records`` with
    ``settings.encoder`` (``minilm``, a local folder or a hub name) and
    ``settings.max_length``, from the cache when there; and what was done: ``encoder``,
    ``pooling``, ``input``, ``max_length``, ``cache`` (the file) and ``cache_hit``."""
    from zdebias.data.writers import atomic_open

    resolved = resolve_model(settings.encoder)
    first, second = model_inputs(records, None)
    key = cache_key(resolved, settings.max_length, first, second)
    path = cache_dir() / "embeddings" / f"{key}.npy"
    info = {
        "encoder": settings.encoder,
        "pooling": "mean, L2-normalised",
        "input": "premise, hypothesis as a text pair" if second is not None else "text",
        "max_length": settings.max_length,
        "cache": str(path),
    }
    if path.exists():
        try:
            cached = np.load(path)
        except (OSError, ValueError):
            cached = None
        if cached is not None and cached.shape[0] == len(records):
            return cached, {**info, "cache_hit": True}
    x = _embed(resolved, first, second, max_length=settings.max_length, progress=progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "wb") as fh:
        np.save(fh, x)
    return x, {**info, "cache_hit": False}


__all__ = ["EMBED_BATCH", "cache_key", "embed_records"]
