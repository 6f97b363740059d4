"""Which premise (and which forced label) each sampled row gets: the premise plan
(docs/design.md §6).

Premise-conditioned sampling gives every row of a round a *slot*: slot g of the run is row j
of round r with g = r · batch_size + j. The premises (de-duplicated, case and space folded)
are visited in a seeded order, one permutation per seed, cycled when the run needs more:

- labels sampled by the model (no ``per_premise``): slot g gets premise ``order[g mod P]``;
- labels forced (``per_premise``, e.g. ``{"entailment": 1, "neutral": 1, "contradiction":
  1}``, Q rows per premise in all): slot g gets premise ``order[(g // Q) mod P]`` and the
  label ``labels_of_premise[g mod Q]`` (each label repeated its quota, in label order).

So a slot's premise and label are a pure function of the seed and the slot index: a resumed
run, a worker or another executor that runs round r gives it the same prompts.

>>> plan = PremisePlan.of(records, seed=0, per_premise={"entailment": 1, "neutral": 1})
>>> plan.slot(5)                                        # doctest: +SKIP
Slot(index=5, draw=2, premise=Record(...), label='neutral')
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from zdebias.data.schema import Record
from zdebias.errors import ConfigError

_SPACES = re.compile(r"\s+")


def unique_premises(records: Sequence[Record]) -> list[Record]:
    """The records with distinct premises (case and space folded), first occurrence kept."""
    seen: set[str] = set()
    out = []
    for r in records:
        key = _SPACES.sub(" ", (r.premise or "").strip()).casefold()
        if key and key not in seen:
            seen.add(key)
            out.append(r)
    return out


def parse_per_premise(spec: str | Mapping[str, int], labels: Sequence[str]) -> dict[str, int]:
    """``"entailment=1,neutral=1"`` (or a mapping) as ``{label: rows per premise}`` in the
    task's label order; unknown labels, bad counts and an all-zero quota are refused."""
    if isinstance(spec, str):
        pairs: dict[str, int] = {}
        for part in (p.strip() for p in spec.split(",")):
            name, eq, count = part.partition("=")
            if not eq or not count.strip().lstrip("-").isdigit():
                raise ConfigError(
                    f"--per-premise {spec!r}: expected LABEL=COUNT,... (e.g. "
                    f"{','.join(f'{lab}=1' for lab in labels)}), not {part!r}"
                )
            pairs[name.strip()] = int(count)
    else:
        pairs = dict(spec)
    unknown = [name for name in pairs if name not in labels]
    if unknown:
        raise ConfigError(
            f"--per-premise: unknown label {unknown[0]!r}; the generator's labels are "
            f"{', '.join(labels)}"
        )
    if any(v < 0 for v in pairs.values()) or not any(pairs.values()):
        raise ConfigError(f"--per-premise {spec!r}: counts must be >= 0, at least one > 0")
    return {lab: pairs[lab] for lab in labels if pairs.get(lab)}


@dataclass(frozen=True)
class Slot:
    """One sampled row's conditioning: its slot index, which premise draw it belongs to (the
    draw-th premise visited), the premise and the forced label (None: the model picks)."""

    index: int
    draw: int
    premise: Record
    label: str | None


@dataclass(frozen=True)
class PremisePlan:
    """The premises in their seeded order and the labels each premise draw asks for."""

    order: tuple[Record, ...]
    labels: tuple[str | None, ...]

    @classmethod
    def of(
        cls,
        premises: Sequence[Record],
        *,
        seed: int,
        per_premise: Mapping[str, int] | None = None,
    ) -> PremisePlan:
        """The plan of ``premises`` (de-duplicated here) for ``seed``; ``per_premise``:
        forced rows per label and premise (None: one row per premise, the label sampled)."""
        order = unique_premises(premises)
        if not order:
            raise ConfigError("--premises: no non-empty premise to sample from")
        random.Random(seed).shuffle(order)
        labels: tuple[str | None, ...] = (None,)
        if per_premise:
            labels = tuple(lab for lab, k in per_premise.items() for _ in range(k))
        return cls(tuple(order), labels)

    @property
    def per_premise(self) -> int:
        """Rows per premise draw (Q)."""
        return len(self.labels)

    @property
    def forced(self) -> bool:
        """Whether the labels are forced (quotas) rather than sampled by the model."""
        return self.labels != (None,)

    def slot(self, index: int) -> Slot:
        """Slot ``index`` of the run: premise ``order[(index // Q) mod P]``, label
        ``labels[index mod Q]``."""
        draw, k = divmod(index, self.per_premise)
        return Slot(index, draw, self.order[draw % len(self.order)], self.labels[k])


__all__ = ["PremisePlan", "Slot", "parse_per_premise", "unique_premises"]
