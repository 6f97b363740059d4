"""Named label sets per task, with numeric and alias mapping (SPEC §1)."""

from __future__ import annotations

from dataclasses import dataclass, field

from zdebias.errors import ConfigError

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
            raw = str(int(raw))
        key = str(raw).strip().lower()
        if key in UNLABELLED:
            return None
        if key in self.aliases:
            return self.aliases[key]
        if key.isdigit():
            index = int(key)
            if index < len(self.labels):
                return self.labels[index]
        raise ValueError(f"unknown label {raw!r}; expected one of {', '.join(self.labels)}")

    def index(self, label: str) -> int:
        """The numeric id of a label name."""
        return self.labels.index(label)

    @property
    def num_labels(self) -> int:
        return len(self.labels)


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
