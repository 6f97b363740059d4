"""Reports for every result, not only runs: ``zdebias report PATH`` on a ``stats`` JSON file, an
``evaluate`` results file, a ``filter`` or ``combine`` output folder, or a run folder.

One self-contained HTML page (CSS inline, figures as ``data:`` PNGs), laid out by the
template ``zdebias/resources/results.html.j2``; a run folder gets the run report
(:mod:`zdebias.report.html`). For a filter or combine folder the page shows:

- kept and rejected counts per label (and per ``meta.type`` for combine);
- the top features per label before filtering (all rows read: kept + rejected, plus the seed),
  with their z, n and rank after (the kept rows) — recomputed from the folder's files;
- the Gardner plots before and after, the strongest significant features named;
- the rejection reasons ranked (how many rejected rows each biased feature rejected);
- example rows, rejected (with their reasons) and kept.

>>> write_result_report("out/filtered")        # doctest: +SKIP
PosixPath('out/filtered/report.html')
"""

from __future__ import annotations

import base64
import io
import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from zdebias.data.documents import checked, read_document
from zdebias.data.writers import atomic_open
from zdebias.errors import ConfigError
from zdebias.evaluation.cells import format_number
from zdebias.pipeline.run_folder import MANIFEST
from zdebias.report.text import artifact_lines, filter_notes, prior_lines

#: the ``kind`` of a ``zdebias evaluate`` results document
EVALUATION_KIND = "zdebias-evaluation"

REPORT = "report.html"
TEMPLATE = "results.html.j2"
#: how many top features per label, rejection reasons and example rows the page shows
TOP_N = 5
REASONS = 20
EXAMPLES = 8
#: the settings a filter or combine report shows, under today's option names
SETTINGS_SHOWN = (
    "recipe",
    "biased_k",
    "zfilter_batch_size",
    "shuffle",
    "seed",
    "min_z",
    "features",
)
#: the names a summary of zdebias 0.2 gave them
OLD_SUMMARY_KEYS = {"top_k": "biased_k", "batch_size": "zfilter_batch_size", "shuffle_seed": "seed"}

Kind = Literal["run", "filter", "combine", "stats", "evaluation"]
#: the files that make a folder a filter / combine output (``zdebias filter`` / ``combine``)
_FOLDERS: dict[str, tuple[str, ...]] = {
    "filter": ("kept.jsonl", "rejected.jsonl", "summary.json"),
    "combine": ("combined.jsonl", "rejected.jsonl", "summary.json"),
}


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Side(_Loose):
    z: float
    n: int
    p: float


class _Tracked(_Side):
    rank: int


class _Top(_Side):
    feature: str


class _Gardner(_Loose):
    min_n: int
    features: list[str]
    n: list[int]
    z: dict[str, list[float]]
    p: dict[str, list[float]]


class _Imbalance(_Loose):
    label_shares: dict[str, float]
    n_only_label_shares: int
    n_significant_uniform: int


class _Stats(_Loose):
    """The fields of a ``zdebias stats --out FILE`` document that the report reads."""

    labels: Annotated[list[str], Field(min_length=1)]
    top: dict[str, list[_Top]]
    z_critical: float
    n_examples: int
    n_significant: int
    n_features: int
    top_n: int = 20
    path: str | None = None
    tracked: dict[str, dict[str, _Tracked | None] | None] | None = None
    gardner: _Gardner | None = None
    label_counts: dict[str, int] | None = None
    label_prior: str | None = None
    p0: dict[str, float] | None = None
    imbalance: _Imbalance | None = None

    @model_validator(mode="after")
    def _per_label(self) -> _Stats:
        g = self.gardner
        if g is not None and g.features:
            for name in ("z", "p"):
                for label in self.labels:
                    values = getattr(g, name).get(label)
                    if values is None or len(values) != len(g.features):
                        raise ValueError(
                            f"gardner.{name}.{label}: expected {len(g.features)} values, one "
                            "per gardner feature"
                        )
            if len(g.n) != len(g.features):
                raise ValueError(f"gardner.n: expected {len(g.features)} values")
        if self.label_prior == "empirical" and self.p0 is not None:
            missing = [lab for lab in self.labels if lab not in self.p0]
            if missing:
                raise ValueError(f"p0: no share for label {missing[0]!r}")
        return self


class _BeforeAfter(_Loose):
    feature: str
    z_before: float
    n_before: int
    p_before: float
    z_after: float | None = None
    n_after: int | None = None
    p_after: float | None = None
    rank_after: int | None = None


class _FilterSummary(_Loose):
    """The fields of a filter or combine ``summary.json`` that the report reads."""

    labels: list[str] | None = None
    features: list[str] | str | None = None
    z_critical: float | None = None
    top_before_after: dict[str, list[_BeforeAfter]] | None = None
    seed: int | None = None
    shuffle_seed: int | None = None  # zdebias 0.2's name of seed
    path: str | None = None
    original: str | None = None
    generated: str | None = None

    @model_validator(mode="after")
    def _critical(self) -> _FilterSummary:
        if self.top_before_after and self.z_critical is None:
            raise ValueError("z_critical: missing beside top_before_after")
        return self


STATS_WHAT = "a zdebias stats JSON file (zdebias stats --out FILE)"


def result_kind(path: str | Path) -> Kind:
    """What ``path`` holds: a run folder, a filter or combine output folder, or a stats JSON
    file; a :class:`ConfigError` naming the accepted inputs otherwise."""
    p = Path(path)
    if p.is_dir():
        if (p / MANIFEST).is_file():
            return "run"
        for kind, files in _FOLDERS.items():
            if all((p / f).is_file() for f in files):
                return kind  # type: ignore[return-value]
    elif p.is_file() and p.suffix == ".json":
        doc = read_document(p, missing=f"{p}: no such file")
        if isinstance(doc, dict) and "top" in doc and "z_critical" in doc and "labels" in doc:
            return "stats"
        if isinstance(doc, dict) and doc.get("kind") == EVALUATION_KIND:
            return "evaluation"
        raise ConfigError(
            f"{p}: not a zdebias stats JSON (no top / z_critical / labels) nor a zdebias "
            "evaluate results file (kind zdebias-evaluation)"
        )
    raise ConfigError(
        f"{p}: not a report input; expected a run folder (manifest.json), a filter or combine "
        "output folder (summary.json, kept.jsonl or combined.jsonl, rejected.jsonl), a "
        "stats JSON file (zdebias stats --out FILE) or an evaluate results file (zdebias "
        "evaluate --out FILE)"
    )


def default_out(path: str | Path, kind: Kind) -> Path:
    """Where the report goes by default: ``DIR/report.html``; beside a stats or evaluate
    results file, ``NAME.html``."""
    p = Path(path)
    return p.with_suffix(".html") if kind in ("stats", "evaluation") else p / REPORT


# --------------------------------------------------------------------------- numbers


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _z(value: float) -> str:
    return format_number(value, digits=1, thousands="")


def _measure(records: list[Any], labels: list[str], summary: dict[str, Any]) -> Any:
    """The z-statistics of ``records`` with the features the filter used."""
    from zdebias.stats.measure import measure
    from zdebias.stats.settings import StatsSettings

    features = summary.get("features")
    settings = StatsSettings(
        features=features if isinstance(features, list) else None,
        seed=settings_of(summary).get("seed") or 0,
    )
    return measure(records, settings, labels=labels)


def settings_of(summary: dict[str, Any]) -> dict[str, Any]:
    """The z-filter settings a filter or combine ``summary`` records, by today's option names
    (a summary of zdebias 0.2 recorded ``top_k``, ``batch_size`` and ``shuffle_seed``)."""
    named = {OLD_SUMMARY_KEYS.get(key, key): value for key, value in summary.items()}
    if "shuffle_seed" in summary:
        named.setdefault("shuffle", summary["shuffle_seed"] is not None)
    return {key: named[key] for key in SETTINGS_SHOWN if key in named}


def _gardner(m: Any, caption: str, min_n: int = 20) -> dict[str, Any]:
    from zdebias.report.plots import gardner_plot, gardner_summary, prior_of

    z_c = float(m.report["z_critical"])
    arrays = (m.names, m.labels, m.z, m.n, m.p_hat)
    fig = gardner_plot(*arrays, z_c=z_c, min_n=min_n, title=caption, p0=prior_of(m.report))
    points = gardner_summary(*arrays[1:], z_c=z_c, min_n=min_n)
    return {
        "caption": caption,
        "png": _png(fig),
        "n_examples": format_number(m.report["n_examples"]),
        "n_significant": format_number(m.report["n_significant"]),
        "n_features": format_number(m.report["n_features"]),
        "n_above": format_number(points["n_above_curve"]),
        "n_points": format_number(points["n_points"]),
        "z_critical": format_number(z_c, digits=2, thousands=""),
        "min_n": min_n,
        "prior_lines": prior_lines(m.report),
        "artifact_lines": artifact_lines(m.report.get("artifact_model")),
    }


def before_after_rows(before: Any, after: Any, top_n: int = TOP_N) -> list[dict[str, Any]]:
    """Per label, its ``top_n`` features before with z, n, p̂ and rank before and after
    (``after`` may lack a feature: n = 0, no z)."""
    import numpy as np

    index = {name: j for j, name in enumerate(after.names)}
    rows = []
    present_a = np.asarray(after.n) > 0
    for i, label in enumerate(before.labels):
        for rank, row in enumerate(before.report["top"].get(label, [])[:top_n], start=1):
            j = index.get(row["feature"])
            cell = {"label": label if rank == 1 else None, "feature": row["feature"]}
            cell["before"] = {"z": row["z"], "n": row["n"], "p": row["p"], "rank": rank}
            if j is None or after.n[j] == 0:
                cell["after"] = None
            else:
                z = float(after.z[j, i])
                cell["after"] = {
                    "z": z,
                    "n": int(after.n[j]),
                    "p": float(after.p_hat[j, i]),
                    "rank": int((after.z[present_a, i] > z).sum()) + 1,
                }
            rows.append(cell)
    return rows


def summary_rows(table: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """:func:`before_after_rows`'s rows from a filter summary's ``top_before_after``."""
    rows = []
    for label, items in table.items():
        for rank, item in enumerate(items, start=1):
            after = None
            if item.get("z_after") is not None:
                after = {
                    "z": item["z_after"],
                    "n": item["n_after"],
                    "p": item["p_after"],
                    "rank": item["rank_after"],
                }
            rows.append(
                {
                    "label": label if rank == 1 else None,
                    "feature": item["feature"],
                    "before": {
                        "z": item["z_before"],
                        "n": item["n_before"],
                        "p": item["p_before"],
                        "rank": rank,
                    },
                    "after": after,
                }
            )
    return rows


def _format_side(side: dict[str, Any] | None) -> list[str]:
    if side is None:
        return ["—", "0", "—", "—"]
    return [
        _z(side["z"]),
        format_number(side["n"]),
        format_number(side["p"], digits=2, thousands=""),
        f"#{side['rank']}",
    ]


def label_rows(kept: list[Any], rejected: list[Any], labels: list[str]) -> list[dict[str, Any]]:
    """Per label: rows before (kept + rejected), kept, rejected, kept share; the last row
    (label None) is the total."""
    k = Counter(r.label for r in kept)
    j = Counter(r.label for r in rejected)
    rows = []
    for label in [*labels, None]:
        nk = sum(k.values()) if label is None else k[label]
        nr = sum(j.values()) if label is None else j[label]
        total = nk + nr
        rows.append(
            {
                "label": label,
                "before": format_number(total),
                "kept": format_number(nk),
                "rejected": format_number(nr),
                "share": f"{100 * nk / total:.1f}%" if total else "—",
                "raw": (total, nk, nr),
            }
        )
    return rows


def reason_rows(rejected: list[Any], top: int = REASONS) -> list[dict[str, Any]]:
    """The biased features that rejected rows, most rejections first (ties by name)."""
    counts = Counter(f for r in rejected for f in r.meta.get("rejected_by") or [])
    first = Counter(
        (r.meta.get("rejected_by") or [None])[0] for r in rejected if r.meta.get("rejected_by")
    )
    n = len(rejected)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return [
        {
            "rank": i,
            "feature": feature,
            "rows": format_number(c),
            "share": f"{100 * c / n:.1f}%" if n else "—",
            "strongest": format_number(first[feature]),
            "raw": c,
        }
        for i, (feature, c) in enumerate(ranked, start=1)
    ]


def _example(r: Any) -> dict[str, Any]:
    return {
        "id": r.id,
        "premise": r.premise if r.is_pair else None,
        "text": r.hypothesis if r.is_pair else r.text,
        "label": r.label,
        "type": r.meta.get("type"),
        "reasons": ", ".join(r.meta.get("rejected_by") or []),
    }


# --------------------------------------------------------------------------- contexts


def folder_context(folder: str | Path, kind: Kind) -> dict[str, Any]:
    """What the page shows for a filter or combine output folder."""
    from zdebias.data.readers import read_records

    folder = Path(folder)
    file = folder / "summary.json"
    summary = read_document(file, missing=f"{file}: no such file")
    checked(summary, _FilterSummary, file, what=f"a zdebias {kind} summary")
    kept_file = "kept.jsonl" if kind == "filter" else "combined.jsonl"
    kept = read_records(folder / kept_file)
    rejected = read_records(folder / "rejected.jsonl")
    labels = list(summary.get("labels") or [])
    if not labels:
        from zdebias.data.labels import infer_task

        labels = list(infer_task(kept + rejected).labels)
    before = _measure(kept + rejected, labels, summary)
    after = _measure(kept, labels, summary)
    exact = summary.get("top_before_after")
    if exact:  # the filter's own numbers, on the features as it computed them
        table, z_c_after, origin = summary_rows(exact), summary["z_critical"], "filter"
    else:
        table = before_after_rows(before, after)
        z_c_after, origin = after.report["z_critical"], "recomputed"
    rows = [
        {
            "label": r["label"],
            "feature": r["feature"],
            "before": _format_side(r["before"]),
            "after": _format_side(r["after"]),
            "gone": r["after"] is None or r["after"]["z"] <= z_c_after,
        }
        for r in table
    ]
    z_c_before = summary["z_critical"] if exact else before.report["z_critical"]
    types = None
    if kind == "combine":
        tk = Counter(r.meta.get("type", "?") for r in kept)
        tr = Counter(r.meta.get("type", "?") for r in rejected)
        types = [
            {"type": t, "kept": format_number(tk[t]), "rejected": format_number(tr[t])}
            for t in sorted(set(tk) | set(tr))
        ]
    settings = settings_of(summary)
    source = summary.get("path") or summary.get("original")
    return {
        "title": f"zdebias {kind}: {folder.name}",
        "kind": kind,
        "source": source,
        "generated": summary.get("generated"),
        "settings": json.dumps(settings),
        "n_before": format_number(len(kept) + len(rejected)),
        "n_kept": format_number(len(kept)),
        "n_rejected": format_number(len(rejected)),
        "labels": label_rows(kept, rejected, labels),
        "types": types,
        "top": rows,
        "top_n": TOP_N,
        "top_origin": origin,
        "z_critical": {
            "before": format_number(z_c_before, digits=2, thousands=""),
            "after": format_number(z_c_after, digits=2, thousands=""),
        },
        "gardner": [
            _gardner(before, f"before ({len(kept) + len(rejected):,} rows)"),
            _gardner(after, f"after ({len(kept):,} kept)"),
        ],
        "reasons": reason_rows(rejected),
        "notes": filter_notes(summary),
        "rejected_examples": [_example(r) for r in rejected[:EXAMPLES]],
        "kept_examples": [_example(r) for r in kept[:EXAMPLES]],
        "stats": None,
    }


def stats_context(path: str | Path) -> dict[str, Any]:
    """What the page shows for a ``zdebias stats --out FILE`` JSON file."""
    import numpy as np

    path = Path(path)
    stats = read_document(path, missing=f"{path}: no such file")
    checked(stats, _Stats, path, what=STATS_WHAT)
    top = [
        {
            "label": label if rank == 1 else None,
            "feature": row["feature"] + (" (kept)" if row.get("kept") else ""),  # the task's
            "before": _format_side({**row, "rank": rank}),
            "after": None,
            "gone": False,
        }
        for label in stats["labels"]
        for rank, row in enumerate(stats["top"].get(label, [])[: stats.get("top_n", 20)], 1)
    ]
    tracked = []
    for feature, cells in (stats.get("tracked") or {}).items():
        for label in stats["labels"]:
            cell = (cells or {}).get(label)
            tracked.append(
                {
                    "feature": feature,
                    "label": label,
                    "numbers": _format_side(cell) if cell else _format_side(None),
                }
            )
    gardner = []
    g = stats.get("gardner")
    if g and g.get("features"):
        from zdebias.report.plots import gardner_plot, prior_of

        labels = stats["labels"]
        z = np.array([g["z"][lab] for lab in labels], dtype=np.float64).T
        p = np.array([g["p"][lab] for lab in labels], dtype=np.float64).T
        n = np.asarray(g["n"], dtype=np.int64)
        kept = set(g.get("kept") or ())  # keep_features: the task's own, named "(kept)"
        fig = gardner_plot(
            [f"{x} (kept)" if x in kept else x for x in g["features"]],
            labels,
            z,
            n,
            p,
            z_c=stats["z_critical"],
            min_n=int(g["min_n"]),
            p0=prior_of(stats),
        )
        gardner.append(
            {
                "caption": Path(str(stats.get("path", path))).name,
                "png": _png(fig),
                "n_examples": format_number(stats["n_examples"]),
                "n_significant": format_number(stats["n_significant"]),
                "n_features": format_number(stats["n_features"]),
                "n_above": format_number(int((z.max(axis=1) > stats["z_critical"]).sum())),
                "n_points": format_number(len(n)),
                "z_critical": format_number(stats["z_critical"], digits=2, thousands=""),
                "min_n": int(g["min_n"]),
                "prior_lines": prior_lines(stats),
                "artifact_lines": artifact_lines(stats.get("artifact_model")),
            }
        )
    counts = stats.get("label_counts") or {}
    return {
        "title": f"zdebias stats: {Path(str(stats.get('path', path))).name}",
        "kind": "stats",
        "source": stats.get("path"),
        "generated": None,
        "settings": json.dumps({"features": stats.get("features", "default")}),
        "n_before": format_number(stats["n_examples"]),
        "n_kept": None,
        "n_rejected": None,
        "labels": [
            {"label": label, "before": format_number(counts.get(label, 0))}
            for label in stats["labels"]
        ],
        "types": None,
        "top": top,
        "top_n": None,
        "top_origin": "stats",
        "z_critical": {
            "before": format_number(stats["z_critical"], digits=2, thousands=""),
            "after": None,
        },
        "gardner": gardner,
        "reasons": [],
        "rejected_examples": [],
        "kept_examples": [],
        "stats": {"tracked": tracked, "n_significant": format_number(stats["n_significant"])},
    }


def evaluation_context(path: str | Path) -> dict[str, Any]:
    """What the run report's page shows for a ``zdebias evaluate --out FILE`` results file:
    its evaluation section only (summary table and bar chart, macro-F1 and per-label tables,
    heuristic tables, the reliance table of a shortcut split with its warnings)."""
    from zdebias.evaluation.reliance import reliance_table
    from zdebias.evaluation.suites import read_results
    from zdebias.evaluation.tables import group_table, suite_names, summary_table
    from zdebias.report.html import evaluation_tables

    path = Path(path)
    doc = read_results(path)
    name = str(doc.get("name", path.stem))
    suites = suite_names([doc])
    groups = [
        {"method": name, **table}
        for suite in suites
        if (table := group_table(doc, suite)) is not None
    ]
    results = {
        "table": summary_table([doc]),
        "groups": groups,
        "documents": [doc],
        "reliance": reliance_table([doc]),  # empty without a shortcut split
    }
    n_runs = len(doc.get("runs", []))
    return {
        "header": {
            "title": f"zdebias evaluate: {name}",
            "description": None,
            "results": f"{path.name}: {n_runs} run{'' if n_runs == 1 else 's'} on "
            f"{', '.join(suites)}",
        },
        "artifacts": None,
        "tracked": None,
        "gardner": [],
        "top": None,
        "sizes": [],
        "significance": [],
        "data_maps": [],
        "cells": [],
        "evaluation": [evaluation_tables(name, results)],
        "examples": None,
        "stages": [],
    }


# --------------------------------------------------------------------------- rendering


def build_result_report(path: str | Path) -> str:
    """The report of a stats file, an evaluate results file or a filter / combine folder,
    as one HTML string."""
    from zdebias.report.html import build_report, load_template

    kind = result_kind(path)
    if kind == "run":
        return build_report(path)
    if kind == "evaluation":  # the run report's page, with its evaluation section only
        return load_template().render(evaluation_context(path))
    context = stats_context(path) if kind == "stats" else folder_context(path, kind)
    return load_template(TEMPLATE).render(context)


def write_result_report(path: str | Path, out: str | Path | None = None) -> Path:
    """Write the report of any result (default: ``DIR/report.html``, or ``NAME.html``
    beside a stats file) atomically; returns its path."""
    kind = result_kind(path)
    target = Path(out) if out is not None else default_out(path, kind)
    text = build_result_report(path)
    with atomic_open(target) as fh:
        fh.write(text)
    return target


__all__ = [
    "before_after_rows",
    "build_result_report",
    "label_rows",
    "reason_rows",
    "result_kind",
    "write_result_report",
]
