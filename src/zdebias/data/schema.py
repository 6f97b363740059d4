"""The one record type every stage reads and writes (docs/design.md §1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Record:
    """One labelled example.

    Pair tasks (NLI) fill ``premise`` and ``hypothesis``; single-text tasks fill ``text``.
    ``label`` is always the label *name* of the record's task (``"entailment"``, ``"positive"``).
    ``meta`` is free: ``source``, ``type`` (original | generated | counterfactual),
    ``rejected_by``, HANS ``heuristic``/``subcase``/``template``, ...

    >>> Record(id="a:1", premise="A man sleeps.", hypothesis="A man naps.", label="entailment")
    Record(id='a:1', label='entailment', premise='A man sleeps.', hypothesis='A man naps.', ...)
    """

    id: str
    label: str
    premise: str | None = None
    hypothesis: str | None = None
    text: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        parts = [f"id={self.id!r}", f"label={self.label!r}"]
        if self.is_pair:
            parts += [f"premise={self.premise!r}", f"hypothesis={self.hypothesis!r}"]
        else:
            parts.append(f"text={self.text!r}")
        return f"Record({', '.join(parts)}, ...)"

    @property
    def is_pair(self) -> bool:
        """True for premise/hypothesis records, False for single-text ones."""
        return self.text is None

    @property
    def main_text(self) -> str:
        """The text a single-input model sees: the hypothesis of a pair, else ``text``."""
        return self.hypothesis if self.is_pair else self.text  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        """The JSONL form: ``id``, ``premise``/``hypothesis`` or ``text``, ``label``, ``meta``."""
        out: dict[str, Any] = {"id": self.id}
        if self.is_pair:
            out["premise"] = self.premise
            out["hypothesis"] = self.hypothesis
        else:
            out["text"] = self.text
        out["label"] = self.label
        out["meta"] = self.meta
        return out

    def replace(self, **changes: Any) -> Record:
        """A copy with some fields changed (``meta`` is copied, never shared)."""
        values: dict[str, Any] = {
            "id": self.id,
            "label": self.label,
            "premise": self.premise,
            "hypothesis": self.hypothesis,
            "text": self.text,
            "meta": dict(self.meta),
        }
        values.update(changes)
        return Record(**values)
