"""Group accuracy on a shortcut split (docs/design.md §13): accuracy per group = gold label × the
shortcut's verdict, and the worst group (Sagawa et al. 2020, group DRO; WILDS' ``eval``).

A test row of a ``zdebias shortcut-split`` folder carries its verdict in
``meta.shortcut.label`` (None: free). Its group is ``(gold, verdict)``: ``(neutral,
neutral)`` is aligned, ``(neutral, contradiction)`` conflicting, ``(neutral, free)`` free.
:class:`GroupAccuracy` scores right/wrong outcomes of a model on those rows: every group's
size and accuracy, aligned / conflicting / free accuracy, the gap aligned − conflicting, and
its primary value, the **worst-group accuracy**: the lowest accuracy over the groups with at
least ``min_size`` rows (a group of 3 rows says little; how many groups qualify is kept).

:func:`shortcut_view` is HANS's per-heuristic view for any dataset: for each of the split's
top training shortcuts, accuracy on the test rows that carry it, where it points to the gold
label and where it points elsewhere. :func:`aligned_loss` says whether a gap that shrank did
so mostly because the aligned accuracy fell.

>>> g = GroupAccuracy(min_size=2)
>>> out = g(["a", "a", "b", "b", "b"], ["a", "a", "a", "b", None], [1, 1, 0, 1, 1])
>>> out["worst_group"]["group"], out["worst_group_accuracy"], out["n_qualifying"]
('a × a', 1.0, 1)
>>> g(["a", "b"], ["a", "a"], [1, 0], )["slices"]["conflicting"]["accuracy"]
0.0
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

#: groups with fewer rows take no part in the worst-group accuracy
MIN_GROUP_SIZE = 20
#: the verdict name of a row no shortcut decides
FREE = "free"
#: the verdict name of a conflicting row whose verdict label was not recorded (older splits)
OTHER = "other"
#: the flat metric key of the worst-group accuracy (a run's ``metrics``)
WORST = "worst-group"
SLICE_NAMES = ("aligned", "conflicting", "free")


def _cell(n: int, correct: int) -> dict[str, Any]:
    return {"n": n, "n_correct": correct, "accuracy": correct / n if n else None}


def group_name(gold: str, verdict: str) -> str:
    """``gold × verdict``, how tables and flat keys name a group."""
    return f"{gold} × {verdict}"


def slice_of(gold: str, verdict: str) -> str:
    """aligned, conflicting or free, from a group's gold label and verdict."""
    if verdict == FREE:
        return "free"
    return "aligned" if verdict == gold else "conflicting"


@dataclass(frozen=True)
class GroupAccuracy:
    """Accuracy per gold label × verdict and the worst group (module doc); a metric with a
    primary value, as evaluators are (:data:`primary_metric`, :meth:`flat`), registered
    with scope ``split`` (:mod:`zdebias.evaluation.catalogue`): it scores a shortcut split's
    rows together, not one suite."""

    #: the registry's view (:class:`~zdebias.evaluation.registry.Metric`)
    scope: ClassVar[str] = "split"
    primary: ClassVar[str] = WORST
    tested: ClassVar[bool] = False

    min_size: int = MIN_GROUP_SIZE
    name: str = "groups"
    primary_metric: str = WORST
    greater_is_better: bool = True

    def __call__(
        self,
        gold: Sequence[str],
        verdicts: Sequence[str | None],
        correct: Sequence[bool | int] | np.ndarray,
        *,
        labels: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Score ``correct`` (one per row) of rows with ``gold`` labels and ``verdicts``
        (None: free). Returns ``groups`` (name → gold, verdict, slice, n, n_correct,
        accuracy; gold labels in ``labels`` order, then each label's verdicts: itself, the
        other labels, free), ``slices`` (aligned / conflicting / free cells), ``gap``,
        ``min_size``, ``n_groups``, ``n_qualifying``, ``worst_group`` (the group, or None
        when none qualifies) and ``worst_group_accuracy``."""
        if not len(gold) == len(verdicts) == len(correct):
            raise ValueError(
                f"{len(gold)} gold labels, {len(verdicts)} verdicts, {len(correct)} outcomes"
            )
        return self.score(grouping(gold, verdicts, labels=labels), correct)

    def score(
        self,
        groups: tuple[list[tuple[str, str]], np.ndarray],
        correct: Sequence[bool | int] | np.ndarray,
    ) -> dict[str, Any]:
        """:meth:`__call__` from the rows' :func:`grouping`, computed once for many runs."""
        keys, codes = groups
        index = {k: i for i, k in enumerate(keys)}
        if len(codes) != len(correct):
            raise ValueError(f"{len(codes)} rows, {len(correct)} outcomes")
        ok = np.asarray(correct, dtype=np.int64)
        n = np.bincount(codes, minlength=len(index))
        right = np.bincount(codes, weights=ok, minlength=len(index)).astype(np.int64)
        cells = {
            group_name(g, v): {
                "gold": g,
                "verdict": v,
                "slice": slice_of(g, v),
                **_cell(int(n[i]), int(right[i])),
            }
            for (g, v), i in index.items()
        }
        slices = {name: [0, 0] for name in SLICE_NAMES}
        for cell in cells.values():
            slices[cell["slice"]][0] += cell["n"]
            slices[cell["slice"]][1] += cell["n_correct"]
        slice_cells = {name: _cell(*v) for name, v in slices.items()}
        a, c = slice_cells["aligned"]["accuracy"], slice_cells["conflicting"]["accuracy"]
        qualifying = [(name, cell) for name, cell in cells.items() if cell["n"] >= self.min_size]
        worst = min(qualifying, key=lambda kv: (kv[1]["accuracy"], -kv[1]["n"]), default=None)
        return {
            "groups": cells,
            "slices": slice_cells,
            "gap": a - c if a is not None and c is not None else None,
            "min_size": self.min_size,
            "n_groups": len(cells),
            "n_qualifying": len(qualifying),
            "worst_group": None if worst is None else {"group": worst[0], **worst[1]},
            "worst_group_accuracy": None if worst is None else worst[1]["accuracy"],
        }

    def flat(self, result: dict[str, Any], prefix: str = "shortcut") -> dict[str, float]:
        """``{PREFIX worst-group: acc, PREFIX group GOLD × VERDICT: acc, ...}``: the flat,
        prefixed dict a metric gives (empty groups and an unqualified worst left out)."""
        out: dict[str, float] = {}
        if result["worst_group_accuracy"] is not None:
            out[f"{prefix} {WORST}"] = float(result["worst_group_accuracy"])
        for name, cell in result["groups"].items():
            if cell["accuracy"] is not None:
                out[f"{prefix} group {name}"] = float(cell["accuracy"])
        return out


def grouping(
    gold: Sequence[str], verdicts: Sequence[str | None], *, labels: Sequence[str] | None = None
) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The groups ``(gold, verdict)`` in table order (gold labels in ``labels`` order, then
    first seen; per gold label its own verdict, the others, free last) and each row's
    group index ``[N]``."""
    verdict = [FREE if v is None else str(v) for v in verdicts]
    keys = list(zip(map(str, gold), verdict, strict=True))
    unique = list(dict.fromkeys(keys))
    order = list(labels) if labels is not None else []
    for g, v in unique:
        for lab in (g, v):
            if lab not in order and lab not in (FREE, OTHER):
                order.append(lab)
    rank = {lab: i for i, lab in enumerate([*order, OTHER, FREE])}
    ordered = sorted(unique, key=lambda k: _sort(k, rank))
    index = {k: i for i, k in enumerate(ordered)}
    return ordered, np.fromiter((index[k] for k in keys), dtype=np.int64, count=len(keys))


def _sort(key: tuple[str, str], rank: dict[str, int]) -> tuple[int, int, int]:
    gold, verdict = key
    g = rank.get(gold, len(rank))
    # the label's own verdict first (aligned), then the other labels, free last
    v = -1 if verdict == gold else rank.get(verdict, len(rank))
    return g, v, 0


def shortcut_masks(
    shortcuts: Sequence[dict[str, Any]],
    gold: Sequence[str],
    carries: Sequence[Sequence[str] | None],
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per shortcut, the rows that carry it where its label is the gold label and where it
    is not (boolean ``[N]`` each): what :func:`shortcut_view` scores, computed once for any
    number of runs."""
    index = {str(cut["feature"]): k for k, cut in enumerate(shortcuts)}
    carried = np.zeros((len(gold), len(shortcuts)), dtype=bool)
    for i, have in enumerate(carries):
        for name in have or ():
            k = index.get(name)
            if k is not None:
                carried[i, k] = True
    gold_arr = np.asarray(list(gold), dtype=object)
    out = []
    for k, cut in enumerate(shortcuts):
        to_gold = gold_arr == cut["label"]
        out.append((carried[:, k] & to_gold, carried[:, k] & ~to_gold))
    return out


def view_of(
    shortcuts: Sequence[dict[str, Any]],
    masks: Sequence[tuple[np.ndarray, np.ndarray]],
    correct: Sequence[bool | int] | np.ndarray,
) -> list[dict[str, Any]]:
    """:func:`shortcut_view` from :func:`shortcut_masks`."""
    ok = np.asarray(correct, dtype=bool)
    out = []
    for cut, (to_gold, elsewhere) in zip(shortcuts, masks, strict=True):
        a = (int(to_gold.sum()), int((to_gold & ok).sum()))
        b = (int(elsewhere.sum()), int((elsewhere & ok).sum()))
        out.append(
            {
                "feature": cut["feature"],
                "label": cut["label"],
                "to_gold": _cell(*a),
                "elsewhere": _cell(*b),
                "all": _cell(a[0] + b[0], a[1] + b[1]),
            }
        )
    return out


def shortcut_view(
    shortcuts: Sequence[dict[str, Any]],
    gold: Sequence[str],
    carries: Sequence[Sequence[str] | None],
    correct: Sequence[bool | int],
) -> list[dict[str, Any]]:
    """Per shortcut (``{"feature", "label"}``: the label it points to), accuracy on the rows
    that carry it (``carries``: each row's shortcut names; None: not recorded, the row is
    left out), split by where it points: ``to_gold`` (its label is the row's gold label) and
    ``elsewhere``, each ``{n, n_correct, accuracy}``; ``all`` both together."""
    return view_of(shortcuts, shortcut_masks(shortcuts, gold, carries), correct)


def aligned_loss(
    base: dict[str, float | None], other: dict[str, float | None]
) -> dict[str, Any] | None:
    """Whether ``other``'s gap (aligned − conflicting, fractions; ``{"aligned",
    "conflicting"}`` means) shrank against ``base``'s mostly through aligned loss.

    The gap's decrease is −Δgap = −Δaligned + Δconflicting; the aligned side's share of it
    is −Δaligned / −Δgap. It is *mostly aligned loss* when the gap shrank, the aligned
    accuracy fell and that share is above one half (−Δaligned > Δconflicting: the aligned
    side lost more than the conflicting side gained). Returns ``{d_aligned,
    d_conflicting, d_gap, share, mostly_aligned_loss}``, None when a side is missing.

    >>> r = aligned_loss({"aligned": .90, "conflicting": .60}, {"aligned": .80, "conflicting": .62})
    >>> round(r["share"], 4), r["mostly_aligned_loss"]
    (0.8333, True)
    """
    values = [base.get("aligned"), base.get("conflicting")]
    values += [other.get("aligned"), other.get("conflicting")]
    if any(v is None for v in values):
        return None
    a0, c0, a1, c1 = (float(v) for v in values)  # type: ignore[arg-type]
    d_a, d_c = a1 - a0, c1 - c0
    d_gap = d_a - d_c
    share = (-d_a / -d_gap) if d_gap < 0 else None
    return {
        "d_aligned": d_a,
        "d_conflicting": d_c,
        "d_gap": d_gap,
        "share": share,
        "mostly_aligned_loss": bool(d_gap < 0 and d_a < 0 and share is not None and share > 0.5),
    }


def aligned_loss_line(name: str, baseline: str, result: dict[str, Any] | None) -> str | None:
    """The sentence the tables print when ``result`` (:func:`aligned_loss`) is mostly
    aligned loss; None otherwise."""
    if not result or not result["mostly_aligned_loss"]:
        return None
    return (
        f"{name}: the gap shrank mostly through aligned loss, not robustness gained: against "
        f"{baseline}, gap {100 * result['d_gap']:+.2f} points = aligned "
        f"{100 * result['d_aligned']:+.2f} − conflicting {100 * result['d_conflicting']:+.2f} "
        f"({100 * result['share']:.0f}% of the decrease is aligned loss)"
    )


__all__ = [
    "FREE",
    "MIN_GROUP_SIZE",
    "WORST",
    "GroupAccuracy",
    "aligned_loss",
    "aligned_loss_line",
    "group_name",
    "grouping",
    "shortcut_masks",
    "shortcut_view",
    "slice_of",
    "view_of",
]
