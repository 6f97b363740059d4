"""The Gardner plot (Gardner et al. 2021, Fig. 1; docs/design.md §3) and the data map of dataset
cartography (:func:`data_map_plot`, docs/design.md §12) as PNG and interactive HTML.

Every feature seen in more than ``min_n`` examples is a point at (n, p̂(l|x)) for the label l it
favours most (its highest z), coloured by that label; n is on a log axis. The curve
p = p0 + z_c·sqrt(p0(1 − p0)/n) marks one-sided significance at α Bonferroni-corrected by the
number of features: points above it are statistically significant artifacts, and the plot says
how many there are. The strongest points above the curve are named, as in Gardner et al.'s
figure (``nobody`` → contradiction). :func:`gardner_plot` returns the figure, for notebooks.

matplotlib (Agg canvas, no GUI backend) and plotly are imported only when a plot is drawn.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from zdebias.data.writers import write_together
from zdebias.errors import ConfigError

#: Colours per label index (matplotlib tab10, so PNG and HTML match).
COLORS = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
]


def method_colors(n: int) -> list[str]:
    """One colour per method of a bar chart: tab10 up to 10 methods, tab20 up to 20 (so two
    methods never share a colour), tab10 repeated beyond that."""
    if n <= len(COLORS) or n > 20:
        return [COLORS[i % len(COLORS)] for i in range(n)]
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    cmap = colormaps["tab20"]
    return [to_hex(cmap(i)) for i in range(n)]


def plot_paths(out: str | Path) -> tuple[Path, Path]:
    """``--plot OUT`` → (PNG path, HTML path): ``x.png``/``x.html`` beside each other."""
    out = Path(out)
    if out.suffix.lower() in (".png", ".html", ".htm"):
        stem = out.with_suffix("")
    else:
        stem = out
    return stem.with_name(stem.name + ".png"), stem.with_name(stem.name + ".html")


def gardner_points(
    z: np.ndarray, n: np.ndarray, p_hat: np.ndarray, *, min_n: int = 20
) -> dict[str, np.ndarray]:
    """The plotted points: features with n > ``min_n``, each at its highest-z label.

    Returns arrays ``feature`` (index), ``label``, ``n``, ``p``, ``z``.
    """
    z = np.asarray(z)
    keep = np.flatnonzero(np.asarray(n) > min_n)
    label = z[keep].argmax(axis=1) if len(keep) else np.zeros(0, dtype=np.int64)
    return {
        "feature": keep,
        "label": label,
        "n": np.asarray(n)[keep],
        "p": np.asarray(p_hat)[keep, label],
        "z": z[keep, label],
    }


def _curve(
    n_min: float, n_max: float, num_labels: int, z_c: float
) -> tuple[np.ndarray, np.ndarray]:
    from zdebias.stats.zstats import significance_curve

    xs = np.logspace(np.log10(max(n_min, 1.0)), np.log10(max(n_max, 2 * n_min, 10.0) * 1.5), 200)
    return xs, np.minimum(significance_curve(xs, num_labels, z_c), 1.05)


def gardner_summary(
    labels: Sequence[str],
    z: np.ndarray,
    n: np.ndarray,
    p_hat: np.ndarray,
    *,
    z_c: float,
    min_n: int = 20,
) -> dict[str, Any]:
    """``{"n_points", "n_above_curve", "n_above_curve_per_label"}`` of the Gardner plot; a
    point is above the curve exactly when its z exceeds ``z_c``."""
    pts = gardner_points(z, n, p_hat, min_n=min_n)
    above = pts["z"] > z_c
    return {
        "n_points": len(pts["n"]),
        "n_above_curve": int(above.sum()),
        "n_above_curve_per_label": {
            name: int((above & (pts["label"] == i)).sum()) for i, name in enumerate(labels)
        },
    }


def prior_of(report: dict[str, Any]) -> list[float] | None:
    """The null share of each label a stats report tested against, in label order, when it
    used the empirical label prior (docs/design.md §14); None for 1/L."""
    if report.get("label_prior") != "empirical" or not report.get("p0"):
        return None
    return [float(report["p0"][label]) for label in report["labels"]]


def outliers(
    pts: dict[str, np.ndarray],
    z_c: float,
    num_labels: int,
    top: int,
    p0: Sequence[float] | None = None,
) -> np.ndarray:
    """Indices into ``pts`` of the ``top`` points furthest above the curve: significant
    (z > ``z_c``), ranked by how far p̂ lies above the curve at their n (ties by feature
    index). Like Gardner et al.'s labels, this favours features that almost always mean one
    label (``nobody``), not only the most frequent ones."""
    from zdebias.stats.zstats import significance_curve

    above = np.flatnonzero(pts["z"] > z_c)
    null = None if p0 is None else np.asarray(p0, dtype=np.float64)[pts["label"][above]]
    gap = pts["p"][above] - significance_curve(pts["n"][above], num_labels, z_c, null)
    order = np.lexsort((pts["feature"][above], -gap))
    return above[order][: max(top, 0)]


def gardner_plot(
    names: Sequence[str],
    labels: Sequence[str],
    z: np.ndarray,
    n: np.ndarray,
    p_hat: np.ndarray,
    *,
    z_c: float,
    png: str | Path | None = None,
    html: str | Path | None = None,
    min_n: int = 20,
    title: str | None = None,
    label_top: int = 10,
    backend: Literal["matplotlib", "plotly"] = "matplotlib",
    p0: Sequence[float] | None = None,
) -> Any:
    """The Gardner plot as a matplotlib ``Figure`` (``backend="plotly"``: a plotly figure),
    the ``label_top`` strongest significant features named beside their points, as in
    Gardner et al.'s figure. ``png`` / ``html``: also write it there (the HTML is the
    interactive plotly version, every point's feature shown on hover, the same bytes for the
    same plot). ``p0``: each label's null share when z was tested against the label shares
    (:func:`prior_of`): one curve per label, in its colour; None: one curve at 1/L. Both are
    written in full under temporary names, then renamed, the HTML last: a killed run leaves
    the old pair, or the new PNG beside the old HTML, never half a file.

    >>> fig = gardner_plot(m.names, m.labels, m.z, m.n, m.p_hat, z_c=4.96)  # doctest: +SKIP
    """
    if backend not in ("matplotlib", "plotly"):
        raise ConfigError(f"unknown plot backend {backend!r}; expected matplotlib or plotly")
    pts = gardner_points(z, n, p_hat, min_n=min_n)
    above = pts["z"] > z_c
    num_labels = len(labels)
    nulls = (1.0 / num_labels,) if p0 is None else tuple(float(v) for v in p0)
    headline = (
        f"{int(above.sum()):,} of {len(pts['n']):,} features (n > {min_n}) above the curve "
        f"(z > {z_c:.2f})"
    )
    title = f"{title}: {headline}" if title else headline
    n_max = float(pts["n"].max()) if len(pts["n"]) else 100.0
    xs, ys = _curve(max(min_n, 1) * 0.8, n_max, num_labels, z_c)
    if p0 is not None:
        from zdebias.stats.zstats import significance_curve

        ys = np.stack([np.minimum(significance_curve(xs, num_labels, z_c, v), 1.05) for v in nulls])
    named = outliers(pts, z_c, num_labels, label_top, p0)
    plot = _Plot(pts, names, labels, xs, ys, nulls, z_c, title, named)
    return _draw(lambda: _figure(plot), lambda: _plotly(plot), png, html, backend, "gardner")


def _draw(
    matplotlib: Callable[[], Any],
    plotly: Callable[[], Any],
    png: str | Path | None,
    html: str | Path | None,
    backend: str,
    kind: str,
) -> Any:
    """The figure of ``backend``, drawn by ``matplotlib`` or ``plotly``; ``png`` / ``html``:
    also written there, both in full and then renamed, the PNG first, the HTML last."""
    files: dict[str | Path, str | bytes] = {}
    fig = None
    if png is not None or backend == "matplotlib":
        fig = matplotlib()
        if png is not None:
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png")
            files[Path(png)] = buffer.getvalue()
    plotly_fig = None
    if html is not None or backend == "plotly":
        plotly_fig = plotly()
        if html is not None:
            files[Path(html)] = plotly_fig.to_html(
                include_plotlyjs=True, full_html=True, div_id=_div_id(Path(html), kind)
            )
    write_together(files)
    return plotly_fig if backend == "plotly" else fig


def _div_id(html: Path, kind: str) -> str:
    """The plot's HTML element id, from the file's name (plotly's own is random), so that the
    same plot gives the same bytes."""
    return f"{kind}-" + re.sub(r"[^A-Za-z0-9_-]", "-", html.stem)


@dataclass(frozen=True)
class _Plot:
    """What both backends draw: the points (:func:`gardner_points`), the feature and label
    names, the significance curve (``xs``, ``ys``: one curve, or one per label ``[L, X]``
    under the empirical prior) for ``z_c``, the p0 lines, the title and the points to name."""

    pts: dict[str, np.ndarray]
    names: Sequence[str]
    labels: Sequence[str]
    xs: np.ndarray
    ys: np.ndarray
    p0: tuple[float, ...]
    z_c: float
    title: str
    named: np.ndarray


def _figure(plot: _Plot) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 5.5), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for i, name in enumerate(plot.labels):
        sel = plot.pts["label"] == i
        ax.scatter(
            plot.pts["n"][sel],
            plot.pts["p"][sel],
            s=6,
            alpha=0.5,
            color=COLORS[i % len(COLORS)],
            label=f"{name} ({int(sel.sum()):,})",
            linewidths=0,
        )
    if plot.ys.ndim == 1:
        ax.plot(plot.xs, plot.ys, color="black", lw=1.2, label="significance (Bonferroni α)")
        ax.axhline(plot.p0[0], color="grey", lw=0.8, ls="--", label=f"p0 = 1/{len(plot.labels)}")
    else:  # the empirical prior: each label against its own share
        for i, name in enumerate(plot.labels):
            colour = COLORS[i % len(COLORS)]
            ax.plot(plot.xs, plot.ys[i], color=colour, lw=1.2, label=f"significance, {name}")
            ax.axhline(plot.p0[i], color=colour, lw=0.8, ls="--", label=f"p0 = {plot.p0[i]:.2f}")
    ax.set_xscale("log")
    ax.set_xlim(plot.xs[0], plot.xs[-1])
    ax.set_ylim(0, 1.02)
    _name_points(fig, ax, plot)
    ax.set_xlabel("n (examples with the feature)")
    ax.set_ylabel("p̂(label | feature)")
    ax.set_title(plot.title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8, markerscale=2)
    fig.tight_layout()
    return fig


#: where a point's name may go, in points from the point: right, left, above, below, ...
_OFFSETS = [(5, 4), (5, -11), (-5, 4), (-5, -11), (5, 14), (5, -21), (-5, 14), (-5, -21)]


def _name_points(fig: Any, ax: Any, plot: _Plot) -> None:
    """Mark and name the ``named`` points, each name at the first offset where it overlaps
    no earlier name (the last offset tried when none is free)."""
    renderer = fig.canvas.get_renderer()
    placed: list[Any] = []
    for i in plot.named.tolist():
        x, y = float(plot.pts["n"][i]), float(plot.pts["p"][i])
        colour = COLORS[int(plot.pts["label"][i]) % len(COLORS)]
        ax.scatter([x], [y], s=18, color=colour, zorder=3, edgecolors="black", linewidths=0.4)
        for dx, dy in _OFFSETS:
            text = ax.annotate(
                plot.names[int(plot.pts["feature"][i])],
                (x, y),
                xytext=(dx, dy),
                textcoords="offset points",
                ha="left" if dx > 0 else "right",
                fontsize=7,
                color=colour,
            )
            box = text.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed) or (dx, dy) == _OFFSETS[-1]:
                placed.append(box)
                break
            text.remove()


def _plotly(plot: _Plot) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, name in enumerate(plot.labels):
        sel = np.flatnonzero(plot.pts["label"] == i)
        text = [
            f"{plot.names[f]}<br>label={name}<br>z={zv:.2f}<br>n={nv:,}<br>p̂={pv:.3f}"
            for f, zv, nv, pv in zip(
                plot.pts["feature"][sel].tolist(),
                plot.pts["z"][sel].tolist(),
                plot.pts["n"][sel].tolist(),
                plot.pts["p"][sel].tolist(),
                strict=True,
            )
        ]
        fig.add_trace(
            go.Scattergl(
                x=plot.pts["n"][sel],
                y=plot.pts["p"][sel],
                mode="markers",
                name=name,
                text=text,
                hoverinfo="text",
                marker={"size": 5, "opacity": 0.6, "color": COLORS[i % 10]},
            )
        )
    if plot.ys.ndim == 1:
        fig.add_trace(
            go.Scatter(
                x=plot.xs,
                y=plot.ys,
                mode="lines",
                name=f"z = {plot.z_c:.2f}",
                line={"color": "black"},
            )
        )
        fig.add_hline(y=plot.p0[0], line_dash="dash", line_color="grey")
    else:  # the empirical prior: each label against its own share
        for i, name in enumerate(plot.labels):
            colour = COLORS[i % 10]
            fig.add_trace(
                go.Scatter(
                    x=plot.xs,
                    y=plot.ys[i],
                    mode="lines",
                    name=f"z = {plot.z_c:.2f}, {name}",
                    line={"color": colour},
                )
            )
            fig.add_hline(y=plot.p0[i], line_dash="dash", line_color=colour)
    if len(plot.named):
        fig.add_trace(
            go.Scatter(
                x=plot.pts["n"][plot.named],
                y=plot.pts["p"][plot.named],
                mode="text",
                text=[plot.names[int(f)] for f in plot.pts["feature"][plot.named].tolist()],
                textposition="top right",
                textfont={"size": 10},
                name="strongest",
                hoverinfo="skip",
            )
        )
    fig.update_layout(
        title=plot.title,
        xaxis={"type": "log", "title": "n (examples with the feature)"},
        yaxis={"title": "p̂(label | feature)", "range": [0, 1.02]},
        template="plotly_white",
    )
    return fig


def gardner_files(
    m: Any, out: str | Path, *, z_c: float, min_n: int = 20, title: str | None = None
) -> dict[str, Any]:
    """Write the Gardner plot of the measurement ``m`` (a
    :class:`~zdebias.stats.measure.Measurement`) as OUT.png and OUT.html (:func:`plot_paths`);
    what ``zdebias stats --plot OUT`` reports of it: :func:`gardner_summary` and the paths."""
    png, html = plot_paths(out)
    kept = getattr(m, "kept", None)  # keep_features: the task's own, named "(kept)"
    names = list(m.names)
    if kept is not None:
        names = [f"{x} (kept)" if k else x for x, k in zip(names, kept.tolist(), strict=True)]
    arrays = (names, m.labels, m.z, m.n, m.p_hat)
    prior = prior_of(m.report)
    gardner_plot(*arrays, z_c=z_c, png=png, html=html, min_n=min_n, title=title, p0=prior)
    summary = gardner_summary(*arrays[1:], z_c=z_c, min_n=min_n)
    return {**summary, "png": str(png), "html": str(html)}


# --------------------------------------------------------------------------- data map

#: at most this many examples are drawn on a data map (a seeded subsample beyond it)
DATA_MAP_POINTS = 25_000


@dataclass(frozen=True)
class DataMap:
    """A drawn data map: the figure (matplotlib or plotly) and what it shows."""

    figure: Any
    summary: dict[str, Any]


def _correctness_colours(values: np.ndarray) -> list[tuple[float, str]]:
    """Each distinct correctness (rounded to 3 digits) with its colour, low to high (RdYlBu,
    so that PNG and HTML agree)."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    levels = sorted({round(float(v), 3) for v in values.tolist()})
    cmap = colormaps["RdYlBu"]
    return [(level, to_hex(cmap(0.05 + 0.9 * level))) for level in levels]


def evaluation_bars(table: dict[str, Any], *, title: str | None = None) -> bytes:
    """An evaluate stage's summary table (:func:`zdebias.evaluation.tables.summary_table`)
    as a PNG: one group of bars per suite, one bar per method, the mean accuracy in % with
    the standard deviation over seeds as an error bar (same table, same bytes)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    columns, rows = list(table["columns"]), list(table["rows"])
    width = 0.8 / max(1, len(rows))
    fig = Figure(figsize=(max(6.0, 1.1 * len(columns) * max(1, len(rows)) ** 0.5), 4.2), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(columns))
    colors = method_colors(len(rows))
    for i, row in enumerate(rows):
        cells = [row["cells"].get(c) or {} for c in columns]
        mean = [100 * c["mean"] if c.get("mean") is not None else np.nan for c in cells]
        std = [100 * (c.get("std") or 0.0) for c in cells]
        ax.bar(
            x - 0.4 + width * (i + 0.5),
            mean,
            width,
            yerr=std,
            capsize=2,
            color=colors[i],
            label=row["name"],
            error_kw={"linewidth": 0.8},
        )
    ax.set_xticks(x, columns, fontsize=8)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.grid(axis="y", linewidth=0.3)
    if title:
        ax.set_title(title, fontsize=10)
    # beside the axes, where it hides no bar
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def data_map_plot(
    confidence: np.ndarray,
    variability: np.ndarray,
    correctness: np.ndarray,
    *,
    png: str | Path | None = None,
    html: str | Path | None = None,
    title: str | None = None,
    max_points: int = DATA_MAP_POINTS,
    seed: int = 0,
    backend: Literal["matplotlib", "plotly"] = "matplotlib",
) -> DataMap:
    """The data map of dataset cartography (Swayamdipta et al. 2020, Fig. 1): each training
    example at (variability, confidence), coloured by correctness. More than ``max_points``
    examples: a seeded random subsample of them is drawn (the same for the same data). ``png``
    / ``html``: also written there, together (:func:`gardner_plot`'s way; same bytes for the
    same map)."""
    if backend not in ("matplotlib", "plotly"):
        raise ConfigError(f"unknown plot backend {backend!r}; expected matplotlib or plotly")
    conf = np.asarray(confidence, dtype=np.float64)
    var = np.asarray(variability, dtype=np.float64)
    corr = np.asarray(correctness, dtype=np.float64)
    n = len(conf)
    shown = np.arange(n)
    if n > max_points:
        shown = np.sort(np.random.default_rng(seed).choice(n, max_points, replace=False))
    conf, var, corr = conf[shown], var[shown], corr[shown]
    drawn = f"{len(shown):,} of {n:,} examples" if len(shown) < n else f"{n:,} examples"
    title = f"{title}: {drawn}" if title else f"data map: {drawn}"
    colours = _correctness_colours(corr)
    groups = [
        (level, colour, np.flatnonzero(np.round(corr, 3) == level)) for level, colour in colours
    ]
    figure = _draw(
        lambda: _data_map_figure(conf, var, groups, title),
        lambda: _data_map_plotly(conf, var, groups, title),
        png,
        html,
        backend,
        "data-map",
    )
    summary = {"n_examples": n, "n_plotted": len(shown), "title": title}
    if png is not None:
        summary["png"] = str(png)
    if html is not None:
        summary["html"] = str(html)
    return DataMap(figure, summary)


def _data_map_figure(
    conf: np.ndarray, var: np.ndarray, groups: list[tuple[float, str, np.ndarray]], title: str
) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 6), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for level, colour, sel in groups:
        ax.scatter(
            var[sel],
            conf[sel],
            s=6,
            alpha=0.6,
            color=colour,
            label=f"{level:g} ({len(sel):,})",
            linewidths=0,
        )
    ax.set_xlim(0, max(0.5, float(var.max()) * 1.05) if len(var) else 0.5)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("variability (std of p(gold) over epochs)")
    ax.set_ylabel("confidence (mean p(gold) over epochs)")
    ax.set_title(title, fontsize=10)
    ax.legend(title="correctness", loc="lower right", fontsize=7, markerscale=2)
    fig.tight_layout()
    return fig


def _data_map_plotly(
    conf: np.ndarray, var: np.ndarray, groups: list[tuple[float, str, np.ndarray]], title: str
) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for level, colour, sel in groups:
        fig.add_trace(
            go.Scattergl(
                x=var[sel],
                y=conf[sel],
                mode="markers",
                name=f"correctness {level:g}",
                marker={"size": 4, "opacity": 0.6, "color": colour},
            )
        )
    fig.update_layout(
        title=title,
        xaxis={"title": "variability (std of p(gold) over epochs)"},
        yaxis={"title": "confidence (mean p(gold) over epochs)", "range": [0, 1.02]},
        template="plotly_white",
    )
    return fig


def data_map_files(
    dynamics: str | Path, out: str | Path, *, title: str | None = None
) -> dict[str, Any]:
    """Write the data map of a classifier folder's training dynamics (or of the file) as
    OUT.png and OUT.html (:func:`plot_paths`); what ``zdebias data-map`` reports."""
    from zdebias.stats.dynamics import read_dynamics

    dyn = read_dynamics(dynamics)
    png, html = plot_paths(out)
    shown = title or Path(dyn.path).parent.name
    drawn = data_map_plot(
        dyn.confidence, dyn.variability, dyn.correctness, png=png, html=html, title=shown
    )
    return {"dynamics": dyn.path, "epochs": dyn.n_epochs, **drawn.summary}
