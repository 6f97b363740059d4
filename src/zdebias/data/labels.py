"""Named label sets per task, raw labels to names, and raw-label conventions (docs/design.md §1).

The one place that infers a label set from records (:func:`infer_task`) and maps records'
labels to ids (:func:`label_ids`); statistics, features, classifiers and generators use these.
A raw label is a task's label name or one of its aliases; a number never stands for a label
by its position unless the input says so (a ``ClassLabel``, ``--label-map``, or a format that
fixes it: :data:`CONVENTIONS`).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.errors import ConfigError, DataError

if TYPE_CHECKING:
    from zdebias.data.schema import Record

#: Raw label values that mean "no gold label": such rows are skipped and counted, never errors.
UNLABELLED = frozenset({"", "-", "-1", "none", "null"})


def raw_key(raw: object) -> str:
    """The key of a raw label: stripped lower-case text; an integral number (``2``, ``2.0``,
    ``numpy.int64(2)``) as its digits. ``ValueError`` for a value that can name no label
    (a bool, a fraction, a number of 10 digits or more)."""
    if isinstance(raw, bool):
        raise ValueError(f"unknown label {raw!r}")
    if isinstance(raw, numbers.Number) and not isinstance(raw, numbers.Integral):
        if not (isinstance(raw, numbers.Real) and float(raw).is_integer()):
            raise ValueError(f"unknown label {raw!r}")
        raw = int(float(raw))  # integral (checked above): the same number as int(raw)
    if isinstance(raw, numbers.Integral):
        if abs(int(raw)) >= 10**9:
            raise ValueError("unknown label: number too large")
        return str(int(raw))
    return str(raw).strip().lower()


@dataclass(frozen=True)
class Task:
    """A task's label set. ``labels[i]`` is the name of label id ``i`` (the order of the
    model's outputs, never a reading of raw numbers). ``pair``: pair data (premise,
    hypothesis) or single text; None for a custom set (``labels:a,b``) whose data decides."""

    name: str
    labels: tuple[str, ...]
    pair: bool | None = True
    aliases: dict[str, str] = field(default_factory=dict)

    def normalize(self, raw: object) -> str | None:
        """The label name of a raw label: a name or an alias, any case.

        Returns ``None`` for an unlabelled row (``-``, ``-1``, empty) and raises
        ``ValueError`` for anything else (a number too: what it means is the input's to say).
        """
        if raw is None:
            return None
        key = raw_key(raw)
        if key in UNLABELLED:
            return None
        if key in self.aliases:
            return self.aliases[key]
        shown = _shown(raw if isinstance(raw, str) else key)
        expected = ", ".join(self.labels)
        raise ValueError(f"unknown label {shown}; expected one of {expected} (task {self.name})")

    def index(self, label: str) -> int:
        """The numeric id of a label name."""
        return self.labels.index(label)

    def of_kind(self, pair: bool) -> Task:
        """This task for data of that kind: a custom set takes the data's kind."""
        return self if self.pair is not None else replace(self, pair=pair)

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
    """The task of that name (``nli``, ``nli-binary``, ``sentiment``) or a custom one,
    ``labels:a,b,c``: pair or single-text data alike, as the data's columns say
    (``text-labels:a,b``, the old spelling for single text, is read as ``labels:a,b``)."""
    if isinstance(name, Task):
        return name
    if name in TASKS:
        return TASKS[name]
    for prefix in ("labels:", "text-labels:"):
        if name.startswith(prefix):
            labels = tuple(x.strip() for x in name[len(prefix) :].split(",") if x.strip())
            if len(labels) < 2:
                raise ConfigError(f"custom task {name!r} needs at least two labels")
            return Task(f"labels:{','.join(labels)}", labels, pair=None, aliases=_aliases(labels))
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
    return Task("labels:" + ",".join(labels), labels, pair=pair, aliases=_aliases(labels))


def implied_task(label_map: Mapping[Any, object], default: Task | None = None) -> Task | None:
    """The task a label map implies when no task is given: None when ``default`` has every
    value among its names or aliases (it reads them, as before), else the first built-in task
    of ``default``'s kind that has (``0=entailment,1=non-entailment`` → nli-binary), else the
    custom task of its values in the map's order (``0=hate,1=offensive,2=neither`` →
    ``labels:hate,offensive,neither``). None too when the map names fewer than two labels,
    or some but not all of its values are ``default``'s labels (``0=contradiction,2=maybe``
    for NLI: more likely a slip than a label set; the reader refuses it, naming ``--task``).
    Values meaning "no gold label" (``-``) are left out.

    >>> implied_task({"0": "hate", "1": "offensive", "2": "neither"}).name
    'labels:hate,offensive,neither'
    >>> implied_task({"0": "negative", "1": "pos"}) is None
    True
    """
    values: list[str] = []
    for value in label_map.values():
        name = str(value).strip()
        if name.lower() not in UNLABELLED and name.lower() not in map(str.lower, values):
            values.append(name)
    if len(values) < 2:
        return None
    keys = {v.lower() for v in values}
    if default is not None and keys <= set(default.aliases):
        return None
    pair = default.pair if default is not None else None
    for task in TASKS.values():
        if keys <= set(task.aliases):
            return task if pair is None or task.pair == pair else None
    if default is not None and not keys.isdisjoint(default.aliases):
        return None  # some of the default task's labels, some not: a slip, refused as one
    return get_task("labels:" + ",".join(values))


#: The order of each built-in task's labels in the datasets most often met on the HF hub,
#: named in the example of the error for an unmapped number (an example, never applied).
HUB_ORDER = {
    "nli": "the SNLI/MNLI order on the hub",
    "nli-binary": "the HANS order on the hub",
    "sentiment": "the SST-2/IMDB order on the hub",
}


def check_raw_labels(label_map: Mapping[Any, object], flag: str) -> None:
    """A :class:`ConfigError` when two keys of a label map name one raw label (``0`` and
    ``"0"``, ``Neutral`` and ``neutral``: the reader could keep only one of their values)."""
    seen: dict[str, object] = {}
    for key in label_map:
        try:
            raw = raw_key(key)
        except ValueError:
            raw = str(key)
        if raw in seen:
            raise ConfigError(
                f"{flag}: {seen[raw]!r} and {key!r} name the same raw label "
                f"({seen[raw]}={label_map[seen[raw]]} and {key}={label_map[key]}); "
                "give each raw label once"
            )
        seen[raw] = key


def map_text(pairs: Mapping[str, str], flag: str) -> str:
    """A label map as the user writes it: ``--label-map 0=a,1=b`` or ``label_map={...}``."""
    if flag.startswith("--"):
        return f"{flag} {','.join(f'{k}={v}' for k, v in pairs.items())}"
    return f"{flag}={dict(pairs)!r}"


def nearest_label(task: Task, key: str) -> str | None:
    """The label name whose name or alias is spelled most like the raw label ``key`` (a
    typo: ``entailmnet`` → ``entailment``), else None: a hint never guesses a meaning."""
    import difflib

    found = difflib.get_close_matches(key, list(task.aliases), n=1, cutoff=0.75)
    return task.aliases[found[0]] if found else None


def unmapped_hint(
    task: Task,
    key: str,
    given: Mapping[str, str],
    flag: str,
    *,
    values: Sequence[str] | None = None,
    others: Sequence[Task] = (),
) -> str:
    """How to say what the raw label ``key`` means, for the error of a label that is neither
    a name of ``task`` nor a key of the user's map ``given`` (``flag``: ``--label-map`` or
    ``label_map``). The example proposes a label only where the spelling or the map fixes
    it: a word's nearest label by spelling (:func:`nearest_label`), the one label a map has
    left free; a number without a map gets the task's labels in order, named as an example
    of the hub's order; anything else ``LABEL``, for the user to fill in.

    ``values``: the distinct numbers the label column holds, where known: the example maps
    each of them, with the labels of the first of ``task`` and ``others`` (tasks the user
    did not rule out) that has as many, else with names to fill in (never a task with fewer
    labels than the column has values)."""
    shown = key if len(key) <= 20 else "VALUE"
    number = key.lstrip("-").isdigit()
    if given:
        free = [name for name in task.labels if name not in given.values()]
        target = nearest_label(task, key) if not number else free[0] if len(free) == 1 else None
        example = {**given, shown: target or "LABEL"}
        return f"it is not a key of {map_text(given, flag)}; add it, e.g. {map_text(example, flag)}"
    if number and values and list(values) != [str(i) for i in range(task.num_labels)]:
        fits = next((t for t in (task, *others) if t.num_labels == len(values)), None)
        held = ", ".join(values[:10]) + (", ..." if len(values) > 10 else "")
        what = f"the column holds {len(values)} values ({held})"
        if fits is None:
            names = [f"NAME{i + 1}" for i in range(len(values))]
            example = dict(zip(values, names, strict=True))
            return (
                f"{what}; say what each means with {map_text(example, flag)} (names of your "
                f"own make the label set labels:{','.join(names)})"
            )
        example = dict(zip(values, fits.labels, strict=True))
        first = list(values) == [str(i) for i in range(len(values))]
        order = f", {HUB_ORDER[fits.name]}" if first and fits.name in HUB_ORDER else ""
        return (
            f"{what}; say what each means with {map_text(example, flag)} (task {fits.name}{order})"
        )
    if number:
        example = {str(i): name for i, name in enumerate(task.labels)}
        order = f" ({HUB_ORDER[task.name]})" if task.name in HUB_ORDER else ""
        return f"say what it means with {map_text(example, flag)}{order}"
    target = nearest_label(task, key)
    if target is None:
        return f"say what it means with {map_text({shown: 'LABEL'}, flag)}"
    return (
        f"say what it means with {map_text({shown: target}, flag)} (the nearest label by spelling)"
    )


@dataclass(frozen=True)
class LabelConvention:
    """Raw labels whose meaning a dataset's own definition fixes, read that way when a file
    has exactly its layout (format, header) and the task is ``task``, and no map is given.
    The map used is recorded in every summary (``label_map_from``: the convention's name)."""

    name: str
    format: str
    columns: tuple[str, ...]
    task: str
    label_map: dict[str, str]


#: The conventions the readers know. GLUE SST-2 (Wang et al. 2019; ``train.tsv``,
#: ``dev.tsv``: header ``sentence<TAB>label``) defines 0 = negative, 1 = positive.
CONVENTIONS = (
    LabelConvention(
        "glue-sst2", "tsv", ("sentence", "label"), "sentiment", {"0": "negative", "1": "positive"}
    ),
)


def convention_for(fmt: str | None, columns: Sequence[str], task: Task) -> LabelConvention | None:
    """The convention of a file of format ``fmt`` and header ``columns`` read as ``task``."""
    return next(
        (
            c
            for c in CONVENTIONS
            if c.format == fmt and tuple(columns) == c.columns and c.task == task.name
        ),
        None,
    )


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
