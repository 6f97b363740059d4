"""Terminal text of command results: what ``zdebias inspect``, ``stats``, ``filter`` and
``combine`` print without ``--json`` (the JSON is the same dict)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def inspect_text(info: dict[str, Any]) -> str:
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    buf = StringIO()
    console = Console(file=buf, width=100, soft_wrap=True)
    console.print(f"[bold]{info['path']}[/bold]  format={info['format']}  task={info['task']}")
    console.print(f"examples: {info['n_examples']:,}")
    table = Table("label", "count", "share")
    total = max(info["n_examples"], 1)
    for name, count in info["label_counts"].items():
        table.add_row(name, f"{count:,}", f"{count / total:.1%}")
    console.print(table)
    console.print(
        f"skipped: {info['n_skipped_unlabelled']:,} without gold label, "
        f"{info['n_skipped_errors']:,} bad rows"
    )
    for line in info["skipped_errors"][:5]:
        console.print(f"  {line}", markup=False)
    lengths = Table("field", "min", "mean", "median", "max", title="length (words)")
    for fld, st in info["length_words"].items():
        lengths.add_row(fld, *(str(st[k]) for k in ("min", "mean", "median", "max")))
    console.print(lengths)
    return buf.getvalue().rstrip("\n")


def stats_text(report: dict[str, Any], top: int) -> str:
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    buf = StringIO()
    console = Console(file=buf, width=100, soft_wrap=True)
    console.print(
        f"examples: {report['n_examples']:,}   features: {report['n_features']:,}   "
        f"z_critical (α={report['alpha']}, Bonferroni): {report['z_critical']:.2f}   "
        f"significant features: {report['n_significant']:,}"
    )
    for label, rows in report["top"].items():
        table = Table("feature", "z", "n", "p̂", title=f"{label} (top {top})", title_justify="left")
        for row in rows:
            table.add_row(row["feature"], f"{row['z']:.1f}", f"{row['n']:,}", f"{row['p']:.3f}")
        console.print(table)
    if "plot" in report:
        p = report["plot"]
        console.print(
            f"Gardner plot: {p['png']}, {p['html']} ({p['n_above_curve']:,} of "
            f"{p['n_points']:,} plotted features above the curve)",
            markup=False,
            highlight=False,
        )
    return buf.getvalue().rstrip("\n")


def filter_text(summary: dict[str, Any], out: Path) -> str:
    lines = [
        f"input {summary['n_input']:,}"
        + (f" + seed {summary['n_seed']:,}" if summary["n_seed"] else "")
        + f": kept {summary['n_kept']:,}, rejected {summary['n_rejected']:,} "
        f"({summary['n_batches']} batches of {summary['batch_size']})",
    ]
    for label in summary["labels"]:
        before = summary["top_z_before"].get(label)
        after = summary["top_z_after"].get(label)
        fmt = lambda r: f"{r['feature']} z={r['z']:.1f}" if r else "-"  # noqa: E731
        lines.append(f"  {label}: top z {fmt(before)}  →  {fmt(after)}")
    lines.append(f"wrote {out / 'kept.jsonl'}, {out / 'rejected.jsonl'}, {out / 'summary.json'}")
    return "\n".join(lines)


def combine_text(s: dict[str, Any], out: Path) -> str:
    lines = [
        f"{s['recipe']}: original {s['n_original']:,} → {s['n_output_original']:,}, generated "
        f"{s['n_generated']:,} → {s['n_output_generated']:,}; output {s['n_output']:,}, "
        f"rejected {s['n_rejected']:,}"
    ]
    for label, row in s["top_z_output"].items():
        if row:
            lines.append(f"  {label}: top z {row['feature']} z={row['z']:.1f}")
    files = ", ".join(
        str(out / name) for name in ("combined.jsonl", "rejected.jsonl", "summary.json")
    )
    lines.append(f"wrote {files}")
    return "\n".join(lines)


__all__ = ["combine_text", "filter_text", "inspect_text", "stats_text"]
