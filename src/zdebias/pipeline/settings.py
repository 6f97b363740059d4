"""Settings of the pipeline's operations: how ``zdebias run`` treats a recipe.

Light to import (no stage kind, no runner), so the commands can declare their options from it
at start-up.
"""

from __future__ import annotations

from zdebias.settings import Settings, setting


class RunSettings(Settings):
    """How ``zdebias run`` treats a recipe: where, what to redo, whether to report."""

    out: str | None = setting(
        None, "Run folder (default: the recipe's `out`, else runs/NAME).", short="-o"
    )
    dry_run: bool = setting(False, "Print the resolved recipe and what would run; run nothing.")
    force: bool = setting(False, "Redo every stage, even those that are done.")
    redo: list[str] = setting(
        default_factory=list, help="Redo this stage (repeatable).", repeat=True
    )
    report: bool = setting(True, "Write RUN/report.html at the end.")

    @property
    def forced(self) -> bool | list[str]:
        """What the runner redoes: everything, or the named stages."""
        return True if self.force else list(self.redo)
