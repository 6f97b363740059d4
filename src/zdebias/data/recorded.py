"""The task a zdebias output's rows were written with, recorded beside them and read back.

A rows file of a custom label set (``labels:hate,offensive,neither``) cannot tell its task by
its rows: a label with no row left (all rejected) would be missing, and the order of the
labels (the label ids) would be lost. So every zdebias output of a custom label set records
it beside the rows, and a read with no ``--task`` and no ``--label-map`` takes it from there:

- an output folder (``filter``, ``combine``, ``shortcut-split``, ``confidence-filter``):
  its ``summary.json`` says how the rows' input was read (:data:`READ_KEYS`: ``read.task``,
  ``read_test.task``, ...); it counts for the record files the folder's marker lists
  (:mod:`zdebias.data.ownership`), unless they were written in the input's schema
  (``--output-schema input``: raw labels, read with the input's options);
- a single file (``convert``, ``predict``): a small JSON document beside it, ``FILE`` +
  :data:`SIDECAR`.

Built-in tasks (nli, nli-binary, sentiment) need no record and get none, so their outputs
stay as they were; a recorded built-in task is not taken (the defaults read those files).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

#: the suffix of a single output file's task record: ``out.jsonl`` → ``out.jsonl.zdebias.json``
SIDECAR = ".zdebias.json"
#: the keys of a summary that hold the read report of the input the rows come from, in the
#: order tried: filter and stats, shortcut-split (the test set), combine (the original data,
#: whose task the generated data is read with), confidence-filter
READ_KEYS = ("read", "read_test", "read_original", "input")
#: the biggest summary read for a task (a filter's is ~10 KB; larger ones are not trusted)
MAX_SUMMARY_BYTES = 64 << 20


def is_custom(task: str | None) -> bool:
    """Whether ``task`` names a custom label set (``labels:a,b``), the kind recorded."""
    return bool(task) and str(task).startswith("labels:") and len(str(task)) > len("labels:")


def _json(path: Path, limit: int = MAX_SUMMARY_BYTES) -> Any:
    """The JSON document in ``path`` (a regular file, no link), or None."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > limit:
            return None
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def recorded_task(path: str | Path) -> tuple[str, str] | None:
    """The custom task recorded for the rows file ``path`` and the file that records it, or
    None (no record, a built-in task, or a file the record does not cover)."""
    path = Path(path)
    sidecar = path.with_name(path.name + SIDECAR)
    doc = _json(sidecar, 1 << 20)
    if isinstance(doc, dict) and doc.get("kind") == "task" and is_custom(doc.get("task")):
        return str(doc["task"]), str(sidecar)
    from zdebias.data.ownership import owner_of

    marker = owner_of(path.parent)
    if not marker or marker.get("kind") != "output" or path.name not in marker.get("files", ()):
        return None
    summary_path = path.parent / "summary.json"
    summary = _json(summary_path)
    if not isinstance(summary, dict) or summary.get("output_schema") == "input":
        return None
    for key in READ_KEYS:
        read = summary.get(key)
        task = read.get("task") if isinstance(read, dict) else None
        if task is not None:
            return (str(task), str(summary_path)) if is_custom(task) else None
    return None


def filter_provenance(path: str | Path) -> dict[str, Any] | None:
    """Where the rows file ``path`` came from when it is a z-filter's kept rows whose features
    had the hypothesis-only model: ``{"summary": PATH, "hypo_only_model": {...}}``, the
    record the filter's ``summary.json`` keeps beside it (the same lookup as
    :func:`recorded_task`: a ``zdebias filter`` folder's marker must list the file; a recipe
    stage's folder has no marker, and its ``kept.jsonl`` counts), or None."""
    from zdebias.data.ownership import owner_of

    path = Path(path)
    marker = owner_of(path.parent)
    if marker is not None:
        if marker.get("kind") != "output" or path.name not in marker.get("files", ()):
            return None
    elif path.name != "kept.jsonl":
        return None
    summary_path = path.parent / "summary.json"
    summary = _json(summary_path)
    record = summary.get("hypo_only_model") if isinstance(summary, dict) else None
    if not isinstance(record, dict):
        return None
    return {"summary": str(summary_path), "hypo_only_model": record}


def record_task(path: str | Path, task: str | None) -> Path | None:
    """Record ``task`` beside the single output file ``path`` when it is a custom label set
    (returns the record's path); otherwise remove a record an earlier output left there."""
    from zdebias.data.ownership import marker_doc
    from zdebias.data.writers import write_json

    path = Path(path)
    sidecar = path.with_name(path.name + SIDECAR)
    if is_custom(task):
        return write_json(marker_doc("task", task=task), sidecar)
    old = _json(sidecar, 1 << 20)
    if isinstance(old, dict) and old.get("kind") == "task":
        with contextlib.suppress(FileNotFoundError):
            sidecar.unlink()
    return None


__all__ = [
    "READ_KEYS",
    "SIDECAR",
    "filter_provenance",
    "is_custom",
    "record_task",
    "recorded_task",
]
