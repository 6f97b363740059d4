"""Named label sets per task, with numeric and alias mapping (SPEC §1).

The one place that infers a label set from records (:func:`infer_task`) and maps records'
labels to ids (:func:`label_ids`); statistics, features, classifiers and generators use these.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np

from zdebias.errors import ConfigError, DataError

if TYPE_CHECKING:
    from zdebias.data.schema import Record

#: Raw label values that mean "no gold label": such rows are skipped and counted, never errors.
UNLABELLED = frozenset({"", "-", "-1", "none", "null"})


@dataclass(frozen=True)
class Task:
    """A task's label set. ``labels[i]`` is the name of numeric label ``i``."""

    name: str
    labels: tuple[str, ...]
    pair: bool = True
    aliases: dict[str, str] = field(default_factory=dict)

    def normalize(self, raw: object) -> str | None:
        """Map a raw label (name, alias, int or numeric string) to its name.

        Returns ``None`` for an unlabelled row (``-``, ``-1``, empty) and raises
        ``ValueError`` for a label the task does not know.
        """
        if raw is None:
            return None
        if isinstance(raw, bool):
            raise ValueError(f"unknown label {raw!r}")
        if isinstance(raw, int | float):
            if isinstance(raw, float) and not raw.is_integer():
                raise ValueError(f"unknown label {raw!r}")
            if abs(raw) >= 10**9:
                raise ValueError(
                    f"unknown label: number too large; expected one of {', '.join(self.labels)}"
                )
            raw = str(int(raw))
        key = str(raw).strip().lower()
        if key in UNLABELLED:
            return None
        if key in self.aliases:
            return self.aliases[key]
        if key.isdigit() and len(key) < 10:
            index = int(key)
            if index < len(self.labels):
                return self.labels[index]
        raise ValueError(f"unknown label {_shown(raw)}; expected one of {', '.join(self.labels)}")

    def index(self, label: str) -> int:
        """The numeric id of a label name."""
        return self.labels.index(label)

    @property
    def num_labels(self) -> int:
        return len(self.labels)


def _shown(raw: object, limit: int = 40) -> str:
    """``repr(raw)``, cut to ``limit`` characters (a 5,000-digit label stays one short line)."""
    text = repr(raw)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(str(raw)):,} characters)"


def _aliases(labels: tuple[str, ...], extra: dict[str, str] | None = None) -> dict[str, str]:
    out = {name.lower(): name for name in labels}
    out.update(extra or {})
    return out


_NLI = ("entailment", "neutral", "contradiction")
_BINARY_NLI = ("entailment", "non-entailment")
_SENTIMENT = ("negative", "positive")

TASKS: dict[str, Task] = {
    "nli": Task("nli", _NLI, pair=True, aliases=_aliases(_NLI, {"entailed": "entailment"})),
    "nli-binary": Task(
        "nli-binary",
        _BINARY_NLI,
        pair=True,
        aliases=_aliases(
            _BINARY_NLI, {"non_entailment": "non-entailment", "not_entailment": "non-entailment"}
        ),
    ),
    "sentiment": Task(
        "sentiment",
        _SENTIMENT,
        pair=False,
        aliases=_aliases(_SENTIMENT, {"neg": "negative", "pos": "positive"}),
    ),
}


def get_task(name: str | Task) -> Task:
    """The task of that name (``nli``, ``nli-binary``, ``sentiment``) or a custom one.

    A custom task is written ``labels:a,b,c`` (pair task) or ``text-labels:a,b`` (single text).
    """
    if isinstance(name, Task):
        return name
    if name in TASKS:
        return TASKS[name]
    for prefix, pair in (("labels:", True), ("text-labels:", False)):
        if name.startswith(prefix):
            labels = tuple(x.strip() for x in name[len(prefix) :].split(",") if x.strip())
            if len(labels) < 2:
                raise ConfigError(f"custom task {name!r} needs at least two labels")
            return Task(name, labels, pair=pair, aliases=_aliases(labels))
    raise ConfigError(f"unknown task {name!r}; expected one of {', '.join(TASKS)} or labels:a,b,c")


def infer_task(records: Iterable[Record]) -> Task:
    """The task of some records: the first built-in task whose labels cover theirs (nli,
    nli-binary, sentiment), else a custom task of their sorted distinct labels.

    The task has the records' kind (pair or single text). The label set fixes L and so
    p0 = 1/L; pass a task explicitly for custom label sets. No records: no labels.

    >>> infer_task([Record("1", "neutral", "p", "h")]).labels
    ('entailment', 'neutral', 'contradiction')
    """
    records = records if isinstance(records, list) else list(records)
    pair = not records or records[0].is_pair
    seen = set(map(attrgetter("label"), records))
    if not seen:
        return Task("labels:", (), pair=pair)
    for task in TASKS.values():
        if seen <= set(task.labels):
            if task.pair == pair:
                return task
            return Task(f"labels:{','.join(task.labels)}", task.labels, pair, task.aliases)
    labels = tuple(sorted(seen))
    prefix = "labels:" if pair else "text-labels:"
    return Task(prefix + ",".join(labels), labels, pair=pair, aliases=_aliases(labels))


def label_ids(
    records: Iterable[Record], labels: Sequence[str], what: str = "", *, unknown: int | None = None
) -> np.ndarray:
    """Index of each record's label in ``labels``: ``[N]`` int64.

    A label outside ``labels`` is a :class:`DataError` naming the record (``what`` says which
    records, e.g. ``"training"``), or gets the id ``unknown`` when that is given.
    """
    records = records if isinstance(records, list) else list(records)
    index = dict(zip(labels, range(len(labels)), strict=True))
    names = map(attrgetter("label"), records)
    if unknown is not None:
        return np.fromiter(
            map(index.get, names, repeat(unknown)), dtype=np.int64, count=len(records)
        )
    try:
        return np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=len(records))
    except KeyError:
        bad = next(r for r in records if r.label not in index)
        who = f"{what} record" if what else "record"
        raise DataError(
            f"{who} {bad.id!r} has label {bad.label!r}, not one of {', '.join(labels)}",
            field="label",
        ) from None
