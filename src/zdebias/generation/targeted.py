"""Sampling toward shortcut-breaking cells (``zdebias sample --cells``, docs/design.md §12).

A cell (f, y) of ``zdebias stats --cells`` asks for ``needed`` rows that have the biased
feature f and the label y it does not favour. :class:`TargetPlan` turns the cells into
*slots*, cell after cell (the most biased feature first), ``needed`` slots each: slot g of
the run is row j of round r with g = r · batch_size + j. A slot's label is forced to y, its
premise is premise g of the cell's premises in a seeded order (cycled; so the cells go on
through the premises where the one before stopped), and the feature is steered by its kind:

- ``prefix`` (an n-gram of the hypothesis): the n-gram's words are forced at the start of
  the hypothesis, right after the label token (first letter upper-cased), and the model
  writes on from there;
- ``premise`` (an n-gram of the premise): only the premises that have it are drawn;
- ``copy`` (high lexical overlap: ``lex-overlap>t``, ``full-lex-overlap``): the hypothesis
  starts with the premise's first words (:func:`copy_prefix`: 70 % of them, 3 to 10), so
  that most of what it holds is the premise's; the model writes on from there;
- ``checked`` (hypothesis length, length ratio, no lexical overlap): premises as they are,
  the rule checked on the output;
- ``label`` (``<null>``: every row has it): the forced label is the whole steering.

Every output is checked with the feature extractor itself
(:func:`~zdebias.features.extract.feature_presence`, default settings): a well-formed row
without its feature is dropped as ``feature_missing`` and decoded again, like a malformed
one, up to ``attempts`` decodes (:class:`~zdebias.generation.conditioned.ConditionedRounds`).
So each cell stops at its quota, or below it when a slot used all its decodes (the cap); the
run ends after the last slot (:attr:`RoundOutput.last`). Hypothesis-only and user features,
cells of a label the generator lacks, cells needing no row and cells beyond ``n`` are listed
as skipped with their reason and counted, never dropped silently. Rounds are a pure function
of the seed and their index, so a stopped run resumes byte for byte.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from zdebias.data.schema import Record
from zdebias.data.writers import write_json
from zdebias.errors import ConfigError
from zdebias.features.extract import feature_presence
from zdebias.features.keys import FeatureKey
from zdebias.features.tokenize import tokenize
from zdebias.generation.conditioned import ConditionedRounds
from zdebias.generation.format import GeneratorFormat, ParsedSample, encode_prompt
from zdebias.generation.premises import Slot
from zdebias.generation.rounds import Candidate, RoundOutput
from zdebias.generation.settings import SampleSettings
from zdebias.generation.store import SUMMARY, read_samples
from zdebias.stats.cells import Cell, cell_report

#: how each kind of feature is steered (kinds missing here are skipped)
STEERING = {"length": "checked", "ratio": "checked", "overlap": "copy", "null": "label"}
#: the share of a premise's words a ``copy``-steered hypothesis starts with, and its bounds
COPY_SHARE, COPY_MIN, COPY_MAX = 0.7, 3, 10
#: the malformed reason of a well-formed row without its cell's feature
MISSING = "feature_missing"
#: the malformed reason of a prefix-steered row that is the forced n-gram and nothing else
PREFIX_ONLY = "prefix_only"


@dataclass(frozen=True)
class CellTarget:
    """One cell to fill: the cell, how it is steered, the hypothesis prefix (``prefix``
    steering) and its premises in their seeded order."""

    cell: Cell
    steer: str
    prefix: str
    premises: tuple[Record, ...]

    @property
    def key(self) -> str:
        return self.cell.key


@dataclass(frozen=True)
class CellSlot(Slot):
    """A slot of a targeted run: its cell."""

    target: CellTarget | None = None


def steering(cell: Cell, labels: Sequence[str]) -> tuple[str, str] | tuple[None, str]:
    """``(steering, prefix)`` of a cell, or ``(None, reason)`` when it is skipped."""
    if cell.label not in labels:
        return None, f"label {cell.label!r} is not one of the generator's labels"
    if cell.needed <= 0:
        return None, "needs no rows"
    key = FeatureKey.from_name(cell.feature)
    if key.kind == "ngram" and key.field == "hypothesis":
        words = " ".join(key.tokens)
        return "prefix", words[:1].upper() + words[1:]
    if key.kind == "ngram" and key.field == "premise":
        return "premise", ""
    if key.kind == "overlap" and cell.feature == "no-lex-overlap":
        return "checked", ""  # copying the premise is the opposite of what it needs
    if key.kind in STEERING:
        return STEERING[key.kind], ""
    return None, f"a {key.kind} feature cannot be steered"


def copy_prefix(premise: str) -> str:
    """The start of a ``copy``-steered hypothesis: the premise's first ceil(0.7·L) of its L
    words (at least 3, at most 10, all of a shorter premise), final punctuation dropped.

    >>> copy_prefix("A man in a blue shirt is sitting on a bench.")
    'A man in a blue shirt is sitting'
    """
    words = premise.split()
    k = min(len(words), max(COPY_MIN, min(COPY_MAX, -(-len(words) * 7 // 10))))
    return " ".join(words[:k]).rstrip(".,;:!?")


@dataclass(frozen=True)
class TargetPlan:
    """The cells to fill (in order, with their first slot) and those skipped."""

    targets: tuple[CellTarget, ...]
    starts: tuple[int, ...]
    skipped: tuple[dict[str, Any], ...]
    labels: tuple[str, ...]

    @classmethod
    def of(
        cls,
        cells: Sequence[Cell],
        premises: Sequence[Record],
        *,
        seed: int,
        labels: Sequence[str],
        most: int,
        features: int | None = None,
        cap: int | None = None,
    ) -> TargetPlan:
        """The plan of ``cells`` over the (distinct, fitting) ``premises`` for ``seed``;
        cells are taken in order, of the first ``features`` features that can be sampled
        (None: all), while their rows fit in ``most``; a cell asks ``cap`` rows at most."""
        if cap is not None:
            cells = [replace(c, needed=min(c.needed, cap)) for c in cells]
        order = list(premises)
        random.Random(seed).shuffle(order)
        targets, starts, skipped = [], [], []
        taken: set[str] = set()  # the features with a targeted cell
        total = 0
        for cell in cells:
            steer, detail = steering(cell, labels)
            reason = detail if steer is None else None
            pool: list[Record] = order
            if steer == "premise":
                texts = [Record(id=r.id, label="", premise=r.premise, hypothesis="") for r in order]
                has = feature_presence(texts, [cell.feature], labels=labels)[cell.feature]
                assert has is not None
                pool = [r for r, h in zip(order, has.tolist(), strict=True) if h]
                reason = None if pool else "no premise has it"
            fresh = cell.feature not in taken
            if reason is None and fresh and features is not None and len(taken) >= features:
                reason = f"beyond --cells-top {features}"
            if reason is None and total + cell.needed > most:
                reason = f"beyond --n {most}"
            if reason is not None:
                skipped.append({"cell": cell.key, "needed": cell.needed, "reason": reason})
                continue
            assert steer is not None
            taken.add(cell.feature)
            targets.append(CellTarget(cell, steer, detail, tuple(pool)))
            starts.append(total)
            total += cell.needed
        return cls(tuple(targets), tuple(starts), tuple(skipped), tuple(labels))

    @property
    def total(self) -> int:
        """Rows asked of all targeted cells (the run's slots)."""
        return sum(t.cell.needed for t in self.targets)

    def slot(self, index: int) -> CellSlot:
        """Slot ``index``: the cell whose slots hold it, and premise ``index`` of that
        cell's premises (cycled): the cells go on through the premises where the one
        before stopped."""
        i = bisect.bisect_right(self.starts, index) - 1
        target = self.targets[i]
        premise = target.premises[index % len(target.premises)]
        return CellSlot(index, index - self.starts[i], premise, target.cell.label, target)

    def digest(self) -> str:
        """The identity of the plan (cells, steering, premises by id): part of the run."""
        rows = [
            [t.key, t.cell.needed, t.steer, t.prefix, [p.id for p in t.premises]]
            for t in self.targets
        ]
        text = json.dumps([rows, list(self.skipped)], ensure_ascii=False)
        return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


@dataclass
class TargetedRounds(ConditionedRounds):
    """The producer of targeted rounds (see the module doc); ``plan`` is a
    :class:`TargetPlan`."""

    plan: TargetPlan  # type: ignore[assignment]
    _premise_ids: dict[str, list[int]] = field(default_factory=dict, repr=False)
    _prefix_ids: dict[str, list[int]] = field(default_factory=dict, repr=False)

    def choices(self) -> list[int] | None:
        return None  # the label is always forced

    def slots(self, round_index: int) -> list[Slot]:
        first = round_index * self.batch_size
        last = min(first + self.batch_size, self.plan.total)
        return [self.plan.slot(g) for g in range(first, last)]

    @staticmethod
    def prefix_of(slot: Slot) -> str:
        """The words the slot's hypothesis starts with: the n-gram (``prefix``), the
        premise's first words (``copy``), or none."""
        assert isinstance(slot, CellSlot) and slot.target is not None
        if slot.target.steer == "copy":
            return copy_prefix(slot.premise.premise or "")
        return slot.target.prefix

    def prompt(self, slot: Slot) -> list[int]:
        """``P <|label|>`` and, for ``prefix`` / ``copy`` steering, the start of the
        hypothesis."""
        assert isinstance(slot, CellSlot) and slot.target is not None
        text, prefix = slot.premise.premise or "", self.prefix_of(slot)
        if text not in self._premise_ids:
            self._premise_ids[text] = encode_prompt(text, self.tokenizer, self.fmt)[1:]
        if prefix not in self._prefix_ids:
            ids = self.tokenizer(prefix, add_special_tokens=False)["input_ids"] if prefix else []
            self._prefix_ids[prefix] = list(ids)
        label = self.fmt.label_token_ids[slot.target.cell.label]
        return [*self._premise_ids[text], label, *self._prefix_ids[prefix]]

    def __call__(self, engine: Any, round_index: int) -> RoundOutput:
        first = round_index * self.batch_size
        if first >= self.plan.total:
            return RoundOutput([], last=True)
        out = super().__call__(engine, round_index)
        out.last = first + self.batch_size >= self.plan.total
        return out

    def _candidate(self, ids: list[int], slot: Slot, round_index: int, row: int) -> Candidate:
        cand = super()._candidate(ids, slot, round_index, row)
        assert isinstance(slot, CellSlot) and slot.target is not None
        cand.meta.update(cell=slot.target.key, feature=slot.target.cell.feature)
        return cand

    def check(self, candidates: list[Candidate], slots: list[Slot]) -> list[Candidate]:
        """Well-formed rows without their cell's feature become ``feature_missing``; those
        that are the forced prefix alone (``"Nobody."``), ``prefix_only``."""
        rows = [
            (
                i,
                Record(
                    id=str(i),
                    label=c.parsed.label or "",
                    premise=c.parsed.premise,
                    hypothesis=c.parsed.hypothesis,
                ),
            )
            for i, c in enumerate(candidates)
            if c.parsed.ok
        ]
        by_feature: dict[str, list[tuple[int, Record]]] = {}
        for i, record in rows:
            by_feature.setdefault(candidates[i].meta["feature"], []).append((i, record))
        out = list(candidates)
        for feature, group in by_feature.items():
            fired = feature_presence([r for _, r in group], [feature], labels=self.plan.labels)
            has = fired[feature]
            assert has is not None  # the plan holds features computed from the row only
            for (i, _), ok in zip(group, has.tolist(), strict=True):
                p, slot = out[i].parsed, slots[i]
                prefix = self.prefix_of(slot)
                reason = MISSING if not ok else None
                if ok and prefix and tokenize(p.hypothesis or "") == tokenize(prefix):
                    reason = PREFIX_ONLY
                if reason is not None:
                    out[i] = Candidate(
                        ParsedSample(p.premise, p.label, p.hypothesis, reason),
                        p.hypothesis or "",
                        out[i].meta,
                    )
        return out


def cell_rows(plan: TargetPlan, tally: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
    """Per targeted cell: asked, generated (decodes), written (every written row has its
    feature: ``fired``), missed (well-formed without the feature), malformed, duplicates and
    short (asked − written)."""
    out = []
    for t in plan.targets:
        fates = tally.get(t.key, {})
        written = int(fates.get("written", 0))
        rest = {
            k: v
            for k, v in fates.items()
            if k not in ("generated", "written", MISSING, PREFIX_ONLY)
        }
        out.append(
            {
                "cell": t.key,
                "feature": t.cell.feature,
                "label": t.cell.label,
                "favoured": t.cell.favoured,
                "steer": t.steer,
                "asked": t.cell.needed,
                "generated": int(fates.get("generated", 0)),
                "fired": written,
                "missed": int(fates.get(MISSING, 0)),
                "prefix_only": int(fates.get(PREFIX_ONLY, 0)),
                "duplicates": int(rest.pop("duplicate", 0)),
                "malformed": int(sum(rest.values())),
                "short": t.cell.needed - written,
            }
        )
    return out


def cells_summary(plan: TargetPlan, tally: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The summary's ``cells`` block: totals, a row per targeted cell (:func:`cell_rows`)
    and the skipped cells with their reasons."""
    rows = cell_rows(plan, tally)
    return {
        "labels": list(plan.labels),
        "n_cells": len(rows),
        "asked": plan.total,
        "fired": sum(r["fired"] for r in rows),
        "short": sum(r["short"] for r in rows),
        "n_skipped": len(plan.skipped),
        "skipped_rows": sum(s["needed"] for s in plan.skipped),
        "rows": rows,
        "skipped": list(plan.skipped),
    }


def measure_cells(
    summary: dict[str, Any], out: Path, cells: Sequence[Cell], d0: Sequence[Record]
) -> None:
    """Add each targeted cell's z before (``d0``) and after (``d0`` ∪ the run's samples)
    to ``summary['cells']['rows']`` (:func:`~zdebias.stats.cells.cell_report`) and write the
    summary again."""
    by_key = {c.key: c for c in cells}
    targeted = [by_key[row["cell"]] for row in summary["cells"]["rows"]]
    labels = summary["cells"]["labels"]
    report = cell_report(d0, read_samples(out), targeted, labels=labels)
    for row, z in zip(summary["cells"]["rows"], report, strict=True):
        row.update({k: v for k, v in z.items() if k not in row})
    summary["cells"]["measured_with"] = len(d0)
    write_json(summary, out / SUMMARY)


def targeted_rounds(
    cells: Sequence[Cell],
    premises: Sequence[Record],
    tokenizer: Any,
    fmt: GeneratorFormat,
    cfg: SampleSettings,
    special: frozenset[int] = frozenset(),
) -> TargetedRounds:
    """The producer for ``cells`` over the (fitting, distinct) ``premises``: the first
    ``cfg.cells_top`` features that can be sampled, ``cfg.n`` rows at most (``cfg.cells_max`` a
    cell), ``cfg.attempts`` decodes a row; refused when no cell can be sampled."""
    plan = TargetPlan.of(
        cells,
        premises,
        seed=cfg.seed,
        labels=fmt.labels,
        most=cfg.n,
        features=cfg.cells_top,
        cap=cfg.cells_max,
    )
    if not plan.targets:
        reasons = sorted({s["reason"] for s in plan.skipped})
        raise ConfigError(
            f"--cells: none of the {len(cells)} cells can be sampled ({'; '.join(reasons)})"
        )
    return TargetedRounds(plan, tokenizer, fmt, cfg.batch_size, cfg.seed, cfg.attempts, special)


__all__ = [
    "MISSING",
    "PREFIX_ONLY",
    "STEERING",
    "CellSlot",
    "CellTarget",
    "TargetPlan",
    "TargetedRounds",
    "cell_rows",
    "cells_summary",
    "measure_cells",
    "steering",
    "targeted_rounds",
]
