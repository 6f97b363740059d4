"""The end-of-run summary on the terminal: planted artifacts found and gone, and each
evaluation table (accuracy %), read from the run's saved JSON like the HTML report.

>>> from rich.console import Console
>>> print_run_summary(Console(), "runs/demo")   # doctest: +SKIP
planted artifacts (z for the label they give away):
  sleeping@hypothesis    → contradiction  z   12.3 →    1.2  (found, gone)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from zdebias.evaluation.cells import format_cell, format_number
from zdebias.evaluation.tables import unlearned_lines
from zdebias.report.html import RunData, artifact_summary, load_run, write_report

if TYPE_CHECKING:
    from rich.console import Console


def _z(cell: dict[str, Any] | None) -> str:
    return format_number(cell["z"] if cell else None, digits=1, thousands="")


def _artifact_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["[bold]planted artifacts[/bold] (z for the label they give away):"]
    for r in rows:
        b, a = r.get("before"), r.get("after")
        verdict = ("found" if r["found"] else "NOT found") + (
            ", gone" if r["gone"] else ", still significant" if a else ""
        )
        lines.append(
            f"  {r['feature']:<22} → {r['label']:<14} z {_z(b):>6} → {_z(a):>6}  ({verdict})"
        )
    return lines


def _evaluation_lines(name: str, table: dict[str, Any]) -> list[str]:
    cols = table["columns"]
    width = max([len("method"), *(len(str(r["name"])) for r in table["rows"])])
    widths = [max(7, len(c)) for c in cols]
    lines = [
        f"[bold]{name}[/bold] (accuracy %):",
        "  "
        + "method".ljust(width)
        + "".join("  " + c.rjust(w) for c, w in zip(cols, widths, strict=True)),
    ]
    for row in table["rows"]:
        cells = "".join(
            "  " + format_cell(row["cells"].get(c) or None, std=False, mark="").rjust(w)
            for c, w in zip(cols, widths, strict=True)
        )
        lines.append("  " + str(row["name"]).ljust(width) + cells)
    return lines + [f"  [yellow]{line}[/yellow]" for line in unlearned_lines(table)]


def summary_lines(run: RunData) -> list[str]:
    """The summary's lines, with rich markup (``[bold]``) for the titles."""
    lines: list[str] = []
    rows = artifact_summary(run)
    if rows:
        lines += _artifact_lines(rows)
    for stage in run.of_kind("evaluate"):
        table = (run.json_output(stage, "results") or {}).get("table")
        if table:
            lines += _evaluation_lines(stage["name"], table)
    return lines


def print_run_summary(console: Console, run_dir: str | Path) -> None:
    """Print the summary of a run folder: one ``console.print`` per line."""
    for line in summary_lines(load_run(run_dir)):
        console.print(line)


def finish_run_report(console: Console, run_dir: str | Path) -> Path:
    """The end of ``zdebias run``: write ``RUN_DIR/report.html``, print the summary; the
    report's path."""
    path = write_report(run_dir)
    print_run_summary(console, run_dir)
    return path
