"""Shortcut-breaking cells (docs/design.md §12): where Z-Aug needs rows, and how many.

A biased feature f (z above the threshold, docs/design.md §3) favours the label y_f with the highest
z. Its shortcut-breaking cells are (f, y) for every y ≠ y_f: rows that contain f but carry
another label. Adding m such rows leaves f's count c of label y_f and raises its n, so

    z(f, y_f) = (c / (n + m) − p0) / sqrt(p0 (1 − p0) / (n + m))

falls with m. With x = sqrt(n + m) and s = sqrt(p0 (1 − p0)), z ≤ t is
p0·x² + t·s·x − c ≥ 0, so n + m ≥ x*² with x* = (−t·s + sqrt(t²·s² + 4·p0·c)) / (2·p0):
:func:`rows_needed` is the smallest whole m (0 when z is already ≤ t). The m rows are spread
over the other labels by water-filling (:func:`spread`): the label with the fewest rows of f
gets the next row, never above c, so no other label's z rises above y_f's and every label of
f ends at z ≤ t.

p0 is 1/L throughout, by design: the cells serve the paper's Z-Aug, whose recipes keep the
uniform prior (docs/design.md §14); a cell plan under ``--label-prior empirical`` would need
p0(l) per label here, and is not offered.

Pure functions over counts; :func:`cells_of` takes a measurement
(:class:`~zdebias.stats.measure.Measurement`), :func:`cells_from_report` a saved
``zdebias stats --out`` report (its Gardner points: features seen more than ``min_n``
times).

>>> rows_needed(c=30, n=40, num_labels=3, threshold=3.0)  # z 5.59 → 2.97 at n = 58
18
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.errors import DataError

if TYPE_CHECKING:
    from zdebias.data.schema import Record
    from zdebias.stats.measure import Measurement


@dataclass(frozen=True)
class Cell:
    """One shortcut-breaking cell (f, y): ``feature`` f favours ``favoured`` (its z there,
    ``n`` rows with f); ``rows`` of them have label ``label`` now; Z-Aug needs ``needed``
    more rows with f and ``label`` (with the other cells of f filled as listed)."""

    feature: str
    favoured: str
    label: str
    z: float
    n: int
    rows: int
    needed: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def key(self) -> str:
        """``FEATURE→LABEL``: the cell's name in records (``meta.cell``) and reports."""
        return f"{self.feature}→{self.label}"


def z_value(c: int, n: int, num_labels: int) -> float:
    """z of a label that ``c`` of a feature's ``n`` rows carry (docs/design.md §3)."""
    p0 = 1.0 / num_labels
    return (c / n - p0) / math.sqrt(p0 * (1 - p0) / n) if n else 0.0


def rows_needed(*, c: int, n: int, num_labels: int, threshold: float) -> int:
    """The fewest rows with the feature and another label that bring the favoured label's
    z (``c`` of ``n`` rows) to ``threshold`` or below; 0 when it already is."""
    if z_value(c, n, num_labels) <= threshold:
        return 0
    p0 = 1.0 / num_labels
    ts = threshold * math.sqrt(p0 * (1 - p0))
    x = (-ts + math.sqrt(ts * ts + 4 * p0 * c)) / (2 * p0)
    total = max(n, math.ceil(x * x))
    while z_value(c, total, num_labels) > threshold:  # float rounding at the boundary
        total += 1
    while total - 1 > n and z_value(c, total - 1, num_labels) <= threshold:
        total -= 1
    return total - n


def spread(rows: Sequence[int], total: int, cap: int) -> list[int]:
    """``total`` rows added to cells holding ``rows`` now, the fewest first (ties: first
    cell), none above ``cap``: the additions per cell. Fails when the cells cannot take
    ``total`` below ``cap``."""
    have = list(rows)
    if sum(max(0, cap - h) for h in have) < total:
        raise ValueError(f"cells {list(rows)} cannot take {total} rows below {cap}")
    left = total
    while left > 0:
        low = min(have)
        at_low = [i for i, h in enumerate(have) if h == low]
        higher = [h for h in have if h > low]
        step = min((min(higher) if higher else cap) - low, cap - low)
        if step * len(at_low) >= left:
            each, extra = divmod(left, len(at_low))
            for k, i in enumerate(at_low):
                have[i] += each + (1 if k < extra else 0)
            left = 0
        else:
            for i in at_low:
                have[i] += step
            left -= step * len(at_low)
    return [h - r for h, r in zip(have, rows, strict=True)]


def shortcut_cells(
    counts: np.ndarray,
    names: Sequence[str],
    labels: Sequence[str],
    *,
    threshold: float,
    min_n: int = 1,
) -> list[Cell]:
    """The shortcut-breaking cells of every feature whose z exceeds ``threshold`` for some
    label (``counts``: ``[F, L]`` rows per feature and label; features seen in fewer than
    ``min_n`` rows skipped), most biased feature first; per feature, one cell per other
    label, in label order."""
    counts = np.asarray(counts, dtype=np.int64)
    num_labels = len(labels)
    n = counts.sum(axis=1)
    p0 = 1.0 / num_labels
    safe = np.maximum(n, 1)[:, None]
    z = (counts / safe - p0) / np.sqrt(p0 * (1 - p0) / safe)
    z[n == 0] = 0.0
    favoured = z.argmax(axis=1)
    top = z[np.arange(len(z)), favoured]
    biased = np.flatnonzero((top > threshold) & (n >= min_n))
    order = biased[np.lexsort((biased, -top[biased]))]
    out: list[Cell] = []
    for j in order.tolist():
        f, row = int(favoured[j]), counts[j]
        others = [i for i in range(num_labels) if i != f]
        need = rows_needed(c=int(row[f]), n=int(n[j]), num_labels=num_labels, threshold=threshold)
        added = spread([int(row[i]) for i in others], need, int(row[f]))
        out += [
            Cell(names[j], labels[f], labels[i], float(top[j]), int(n[j]), int(row[i]), a)
            for i, a in zip(others, added, strict=True)
        ]
    return out


def cells_of(m: Measurement, *, threshold: float | None = None) -> list[Cell]:
    """:func:`shortcut_cells` of a measurement; ``threshold`` defaults to its report's
    ``z_critical`` (α Bonferroni-corrected, the significance ``zdebias stats`` counts)."""
    t = float(m.report["z_critical"]) if threshold is None else threshold
    counts = np.rint(np.asarray(m.p_hat) * np.asarray(m.n)[:, None]).astype(np.int64)
    return shortcut_cells(counts, m.names, m.labels, threshold=t)


def cells_from_report(report: dict[str, Any], *, threshold: float | None = None) -> list[Cell]:
    """:func:`shortcut_cells` from a saved ``zdebias stats --out`` report: its Gardner points
    (features seen more than ``min_n`` times; p̂ kept to 5 decimals, so the counts are exact
    below 100,000 rows a feature). ``threshold`` defaults to the report's ``z_critical``."""
    points = report.get("gardner")
    if not points:
        raise ValueError("the report has no Gardner points; write it with `zdebias stats --out`")
    labels = list(report["labels"])
    n = np.asarray(points["n"], dtype=np.float64)
    p = np.stack([np.asarray(points["p"][lab], dtype=np.float64) for lab in labels], axis=1)
    counts = np.rint(p * n[:, None]).astype(np.int64)
    t = float(report["z_critical"]) if threshold is None else threshold
    return shortcut_cells(counts, points["features"], labels, threshold=t)


def cells_report(cells: Sequence[Cell], *, threshold: float, labels: Sequence[str]) -> dict:
    """What ``cells.json`` holds: the threshold, totals and every cell."""
    return {
        "threshold": threshold,
        "labels": list(labels),
        "n_features": len({c.feature for c in cells}),
        "n_cells": len(cells),
        "rows_needed": sum(c.needed for c in cells),
        "cells": [c.to_dict() for c in cells],
    }


def load_cells(source: str | Path | Mapping[str, Any]) -> list[Cell]:
    """The cells of a ``zdebias stats --cells`` file (its ``cells``), or of a saved stats
    report (``zdebias stats --out``, a recipe's stats stage: its Gardner points, at its
    ``z_critical``); a path or the loaded JSON. A bad file fails with its path and field."""
    where = str(source) if isinstance(source, str | Path) else "cells"
    if isinstance(source, str | Path):
        try:
            data = json.loads(Path(source).read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise DataError(f"not a readable JSON file ({err})", path=where) from None
    else:
        data = source
    if not isinstance(data, Mapping) or ("cells" not in data and "gardner" not in data):
        raise DataError(
            "expected `zdebias stats --cells` output (a 'cells' list) or a stats report "
            "(`zdebias stats --out`, with 'gardner' points)",
            path=where,
            field="cells",
        )
    if "cells" not in data:
        try:
            return cells_from_report(dict(data))
        except (KeyError, ValueError) as err:
            raise DataError(f"not a usable stats report ({err})", path=where) from None
    names = [f.name for f in fields(Cell)]
    out = []
    for i, row in enumerate(data["cells"]):
        if not isinstance(row, Mapping) or any(k not in row for k in names):
            raise DataError(
                f"cell {i}: expected the keys {', '.join(names)}", path=where, field="cells"
            )
        out.append(Cell(**{k: row[k] for k in names}))
    return out


def cell_report(
    d0_records: Sequence[Record],
    samples: Sequence[Record],
    cells: Sequence[Cell],
    *,
    labels: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Per cell, the shortcut before and after adding ``samples`` to ``d0_records``: the z of
    its feature for the favoured label (:func:`z_value`) on D0 (``z_before``, ``n_before``)
    and on D0 ∪ samples (``z_after``, ``n_after``), and the rows of the cell's label
    (``rows_before``, ``rows_after``). Features are recomputed on the rows with the default
    settings (:func:`~zdebias.features.extract.feature_presence`); a feature not computable
    from the rows alone (hypothesis-only, custom) gets None."""
    from zdebias.data.labels import infer_task
    from zdebias.features.extract import feature_presence

    labels = list(labels) if labels is not None else list(infer_task(d0_records).labels)
    names = [c.feature for c in cells]
    before = feature_presence(d0_records, names, labels=labels)
    added = feature_presence(samples, names, labels=labels)
    y0 = np.array([r.label for r in d0_records], dtype=object)
    y1 = np.array([r.label for r in samples], dtype=object)
    out = []
    for cell in cells:
        row: dict[str, Any] = {
            "cell": cell.key,
            "feature": cell.feature,
            "label": cell.label,
            "favoured": cell.favoured,
        }
        has0, has1 = before[cell.feature], added[cell.feature]
        if has0 is None or has1 is None:
            out.append({**row, "z_before": None, "z_after": None})
            continue
        n0, n1 = int(has0.sum()), int(has1.sum())
        fav0 = int((y0[has0] == cell.favoured).sum())
        fav1 = fav0 + int((y1[has1] == cell.favoured).sum())
        mine0 = int((y0[has0] == cell.label).sum())
        out.append(
            {
                **row,
                "z_before": round(z_value(fav0, n0, len(labels)), 4),
                "z_after": round(z_value(fav1, n0 + n1, len(labels)), 4),
                "n_before": n0,
                "n_after": n0 + n1,
                "rows_before": mine0,
                "rows_after": mine0 + int((y1[has1] == cell.label).sum()),
            }
        )
    return out


def cells_filled(
    records: Sequence[Record], cells: Sequence[Cell], *, labels: Sequence[str]
) -> list[Cell | None]:
    """Per record, the first of ``cells`` (in order: the most biased feature first) that it
    fills: it has the cell's feature (recomputed with the default settings,
    :func:`~zdebias.features.extract.feature_presence`) and the cell's label; None for a
    record that fills none. Features not computable from the rows alone are passed over."""
    from zdebias.features.extract import feature_presence

    has = feature_presence(records, [c.feature for c in cells], labels=labels)
    out: list[Cell | None] = [None] * len(records)
    for cell in cells:
        present = has[cell.feature]
        if present is None:
            continue
        for i in np.flatnonzero(present).tolist():
            if out[i] is None and records[i].label == cell.label:
                out[i] = cell
    return out


__all__ = [
    "Cell",
    "cell_report",
    "cells_filled",
    "cells_from_report",
    "cells_of",
    "cells_report",
    "load_cells",
    "rows_needed",
    "shortcut_cells",
    "spread",
    "z_value",
]
