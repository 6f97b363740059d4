"""Premise-conditioned rounds of a trained generator (``zdebias sample --premises``,
docs/design.md §6).

The prompt of a row is the premise part of the training sequence (:func:`~zdebias.generation.
format.encode_prompt`): ``[BOS] P`` when the generator picks the label (the next token is
drawn among the label tokens only: in training a label token always follows the premise),
``[BOS] P <|label|>`` when the label is forced (``per_premise`` quotas). The model writes the
rest, parsed as an unconditional sample is; the record keeps the premise exactly as given.

Which premise and label row j of round r gets is the plan's slot r · batch_size + j
(:class:`~zdebias.generation.premises.PremisePlan`). A row whose output is malformed, or
repeats an earlier row of its round, is decoded again (up to ``attempts`` decodes, each
attempt with its own seed), so every slot normally yields exactly one sample and a round is
a pure function of the seed and its index. The dropped attempts are still counted: the
round's candidates are, per row, its malformed attempts then its sample, and at the end the
repeats (which the round loop counts as duplicates).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from zdebias.data.schema import Record
from zdebias.generation.format import GeneratorFormat, encode_prompt, parse_output, sample_key
from zdebias.generation.premises import PremisePlan, Slot, unique_premises
from zdebias.generation.rounds import Candidate, RoundOutput, round_seed


class Completer(Protocol):
    """A backend that decodes on from given prompts (:meth:`HFBackend.complete
    <zdebias.generation.trained.HFBackend.complete>`, ``VllmBackend.complete``)."""

    def complete(
        self, prompts: Sequence[Sequence[int]], seed: int, *, choices: Sequence[int] | None = None
    ) -> list[list[int]]: ...


def complete_groups(
    engine: Completer,
    groups: Sequence[tuple[Sequence[Sequence[int]], int]],
    choices: Sequence[int] | None,
) -> list[list[list[int]]]:
    """Each ``(prompts, seed)`` group completed: in one batch where the backend can
    (``complete_groups``, HF), else group by group."""
    if hasattr(engine, "complete_groups"):
        return engine.complete_groups(groups, choices=choices)
    return [engine.complete(p, seed, choices=choices) if p else [] for p, seed in groups]


def premises_digest(premises: Sequence[Record]) -> str:
    """The identity of a premises input (its de-duplicated premises, in file order)."""
    h = hashlib.blake2b(digest_size=12)
    for r in unique_premises(premises):
        h.update((r.premise or "").encode("utf-8") + b"\x1e")
    return h.hexdigest()


def fitting_premises(
    premises: Sequence[Record], tokenizer: Any, fmt: GeneratorFormat
) -> tuple[list[Record], int]:
    """The distinct premises whose prompt leaves room for a label, one hypothesis token and
    the end token within ``fmt.max_length``, and how many did not."""
    unique = unique_premises(premises)
    kept = [
        r
        for r in unique
        if len(encode_prompt(r.premise or "", tokenizer, fmt)) + 3 <= fmt.max_length
    ]
    return kept, len(unique) - len(kept)


@dataclass
class ConditionedRounds:
    """The producer of premise-conditioned rounds: ``rounds(engine, r) -> RoundOutput``."""

    plan: PremisePlan
    tokenizer: Any
    fmt: GeneratorFormat
    batch_size: int
    seed: int
    attempts: int
    special: frozenset[int] = frozenset()
    #: rounds decoded as one batch (:func:`~zdebias.generation.trained.rounds_per_group`)
    group: int = 1
    _prompts: dict[int, list[int]] = field(default_factory=dict, repr=False)
    _pending: dict[int, RoundOutput] = field(default_factory=dict, repr=False)

    def prompt(self, slot: Slot) -> list[int]:
        """The ids after the start token that row ``slot`` starts from."""
        key = slot.draw % len(self.plan.order)
        if key not in self._prompts:
            self._prompts[key] = encode_prompt(slot.premise.premise or "", self.tokenizer, self.fmt)
        ids = self._prompts[key][1:]
        return [*ids, self.fmt.label_token_ids[slot.label]] if slot.label is not None else ids

    def slots(self, round_index: int) -> list[Slot]:
        """The slots of round ``round_index``, row by row."""
        first = round_index * self.batch_size
        return [self.plan.slot(first + j) for j in range(self.batch_size)]

    def choices(self) -> list[int] | None:
        """The tokens a row may draw right after its prompt: the label tokens when the model
        picks the label, else None."""
        return None if self.plan.forced else list(self.fmt.label_token_ids.values())

    def check(self, candidates: list[Candidate], slots: list[Slot]) -> list[Candidate]:
        """The candidates of one attempt as the round keeps them (a subclass turns some into
        malformed ones, e.g. a targeted row without its feature)."""
        return candidates

    def __call__(self, engine: Completer, round_index: int) -> RoundOutput:
        """Round ``round_index``. Its group of ``group`` rounds (aligned to round 0, so a
        resumed run decodes each round in the same batch as one that never stopped) is decoded
        together on the first call; the other rounds wait for theirs."""
        if round_index not in self._pending:
            start = round_index - round_index % self.group
            indices = list(range(start, start + self.group))
            self._pending = dict(zip(indices, self._rounds(engine, indices), strict=True))
        return self._pending.pop(round_index)

    def _rounds(self, engine: Completer, indices: Sequence[int]) -> list[RoundOutput]:
        """The rounds ``indices``, decoded together attempt by attempt (each round's rows
        with its own seeds, as alone)."""
        slots = [self.slots(r) for r in indices]
        prompts = [[self.prompt(s) for s in round_slots] for round_slots in slots]
        choices = self.choices()
        per_row: list[list[list[Candidate]]] = [[[] for _ in s] for s in slots]
        repeats: list[list[Candidate]] = [[] for _ in indices]
        taken: list[set[tuple[str, str, str]]] = [set() for _ in indices]
        pending = [list(range(len(s))) for s in slots]
        seeds = [round_seed(self.seed, r) for r in indices]
        for attempt in range(self.attempts):
            if not any(pending):
                break
            groups = [
                (
                    [prompts[k][j] for j in pending[k]],
                    seed if attempt == 0 else round_seed(seed, attempt),
                )
                for k, seed in enumerate(seeds)
            ]
            decoded = complete_groups(engine, groups, choices)
            for k, (r, rows) in enumerate(zip(indices, decoded, strict=True)):
                made = [
                    self._candidate(ids, slots[k][j], r, j)
                    for j, ids in zip(pending[k], rows, strict=True)
                ]
                still = []
                checked = self.check(made, [slots[k][j] for j in pending[k]]) if made else []
                for j, cand in zip(pending[k], checked, strict=True):
                    key = sample_key(cand.parsed) if cand.parsed.ok else None
                    if key is not None and key not in taken[k]:
                        taken[k].add(key)
                        per_row[k][j].append(cand)
                        continue
                    (per_row[k][j] if key is None else repeats[k]).append(cand)
                    still.append(j)
                pending[k] = still
        return [
            RoundOutput([c for row in rows for c in row] + extra)
            for rows, extra in zip(per_row, repeats, strict=True)
        ]

    def _candidate(self, ids: list[int], slot: Slot, round_index: int, row: int) -> Candidate:
        parsed = parse_output(ids, self.tokenizer, self.fmt, special_ids=self.special)
        if parsed.ok:
            parsed.premise = slot.premise.premise  # as given, not as decoded
        meta = {"premise_id": slot.premise.id, "row": row}
        return Candidate(parsed, self.tokenizer.decode(ids) if not parsed.ok else "", meta)


def premise_counts(records: Sequence[Record], plan: PremisePlan, batch_size: int) -> dict[str, Any]:
    """How a finished run covered its premise draws: ``n_draws`` (draws with a sample),
    ``n_short`` (draws, before the last one, with fewer rows than the plan asks per draw) and
    rows per label."""
    per_draw: dict[int, int] = {}
    per_label: dict[str, int] = {}
    for r in records:
        draw = (int(r.meta["round"]) * batch_size + int(r.meta["row"])) // plan.per_premise
        per_draw[draw] = per_draw.get(draw, 0) + 1
        per_label[r.label] = per_label.get(r.label, 0) + 1
    last = max(per_draw, default=-1)
    short = sum(1 for d in range(last) if per_draw.get(d, 0) < plan.per_premise)
    return {"n_draws": len(per_draw), "n_short": short, "per_label": per_label}


__all__ = [
    "Completer",
    "ConditionedRounds",
    "fitting_premises",
    "premise_counts",
    "premises_digest",
]
