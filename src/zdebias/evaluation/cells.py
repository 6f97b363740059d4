"""How numbers and result cells print: one formatter for the Markdown tables, the HTML report
and the terminal summary, so the three always show the same digits.

A result cell is ``{"mean", "std", "n_runs", "significant"?}`` with accuracies as fractions
(see :func:`zdebias.evaluation.suites.summarize`); it prints in percent, ``mean±std`` when it
has several runs, and ``–`` when it is missing.

>>> format_cell({"mean": 0.8034, "std": 0.0046, "n_runs": 2, "significant": True})
'80.34±0.46*'
>>> format_cell({"mean": 0.8034, "std": 0.0046, "n_runs": 2}, std=False)
'80.34'
>>> format_number(12345.678), format_number(12345), format_number(None)
('12,345.7', '12,345', '–')
"""

from __future__ import annotations

from typing import Any

#: What a missing number or cell prints as.
MISSING = "–"

#: Marks a cell that differs significantly from the baseline row (the paper underlines it): its
#: Holm-adjusted p is below α (:mod:`zdebias.evaluation.significance`), in every table.
SIGNIFICANT = "*"


def format_number(value: Any, *, digits: int = 1, thousands: str = ",") -> str:
    """A float with ``digits`` decimals, an int as it is, both grouped by ``thousands``
    (``""``: no separator); ``–`` for None; anything else as ``str(value)``."""
    if value is None:
        return MISSING
    if isinstance(value, float):
        return f"{value:{thousands}.{digits}f}"
    if isinstance(value, int):
        return f"{value:{thousands}}"
    return str(value)


def format_percent(value: float | None, *, digits: int = 2) -> str:
    """A fraction in percent, without the sign: ``0.9045`` → ``90.45``; ``–`` for None."""
    if value is None:
        return MISSING
    return f"{100 * value:.{digits}f}"


def format_cell(
    cell: dict[str, Any] | None,
    *,
    digits: int = 2,
    std: bool = True,
    mark: str = SIGNIFICANT,
) -> str:
    """``80.34±0.46`` (percent; the ``±std`` only with several runs and ``std=True``), then
    ``mark`` when the cell is significant; ``–`` when the cell is missing."""
    if cell is None:
        return MISSING
    text = format_percent(cell["mean"], digits=digits)
    if std and cell.get("n_runs", 1) > 1:
        text += "±" + format_percent(cell["std"], digits=digits)
    if cell.get("significant"):
        text += mark
    return text
