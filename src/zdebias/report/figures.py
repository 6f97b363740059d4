"""Small figures for the HTML report, drawn from saved JSON only, returned as PNG bytes.

:func:`gardner_png` draws Gardner et al.'s plot from the ``gardner`` block a ``stats`` stage
saves: one point per (feature, label) with n > min_n at (n, p̂(l|x)), n on a log axis, and the
significance curve p0 + z_c·sqrt(p0(1−p0)/n). Points above the curve are artifacts.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

LABEL_COLOURS = {
    "entailment": "#2f9e44", "neutral": "#868e96", "contradiction": "#e03131",
    "non-entailment": "#e8590c", "positive": "#1c7ed6", "negative": "#e03131",
}
_FALLBACK = ("#1c7ed6", "#e8590c", "#7048e8", "#0ca678", "#f08c00", "#d6336c")


def label_colour(label: str, index: int = 0) -> str:
    """The report's colour of a label."""
    return LABEL_COLOURS.get(label, _FALLBACK[index % len(_FALLBACK)])


def gardner_png(
    gardner: dict[str, Any],
    labels: Sequence[str],
    z_critical: float,
    *,
    title: str = "",
    annotate: Sequence[str] = (),
    y_max: float | None = None,
) -> bytes:
    """PNG of the Gardner plot of one dataset; ``annotate`` names features to label."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    n = np.asarray(gardner.get("n", []), dtype=np.float64)
    names = list(gardner.get("features", []))
    p0 = 1.0 / len(labels)
    fig, ax = plt.subplots(figsize=(6.0, 4.2), dpi=110)
    wanted = set(annotate)
    for i, label in enumerate(labels):
        p = np.asarray(gardner.get("p", {}).get(label, []), dtype=np.float64)
        if len(p) == 0:
            continue
        curve = p0 + z_critical * np.sqrt(p0 * (1 - p0) / n)
        above = p > curve
        colour = label_colour(label, i)
        ax.scatter(n[~above], p[~above], s=7, alpha=0.25, color=colour, linewidths=0)
        ax.scatter(n[above], p[above], s=14, alpha=0.9, color=colour, linewidths=0,
                   label=f"{label} ({int(above.sum())} above)")
        for j in np.flatnonzero(above):
            if names[j] in wanted:
                ax.annotate(names[j], (n[j], p[j]), fontsize=7, xytext=(3, 3),
                            textcoords="offset points", color=colour)
    lo = max(1.0, float(n.min()) if len(n) else float(gardner.get("min_n", 20)))
    hi = max(lo * 10, float(n.max()) * 1.5 if len(n) else 1000.0)
    xs = np.logspace(np.log10(lo), np.log10(hi), 200)
    ax.plot(xs, p0 + z_critical * np.sqrt(p0 * (1 - p0) / xs), color="black", lw=1.2,
            label=f"significance curve (z = {z_critical:.2f})")
    ax.axhline(p0, color="black", lw=0.6, ls=":")
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(0, y_max if y_max is not None else 1.02)
    ax.set_xlabel("n (examples with the feature)")
    ax.set_ylabel("p̂(label | feature)")
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper right", frameon=False)
    ax.grid(alpha=0.2, which="both")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
