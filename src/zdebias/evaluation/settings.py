"""Settings of the evaluation operations: evaluating classifiers on suites (``zdebias
evaluate``) and testing results against a baseline (``zdebias compare``).

Each is declared once here and shared by the library, the recipe stage (``evaluate``'s config
subclasses :class:`EvaluateSettings` and :class:`CompareScope`) and the CLI. Importing this
module loads no torch.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import model_validator

from zdebias.classify.settings import InferenceSettings
from zdebias.settings import Settings, setting


class EvaluateSettings(InferenceSettings):
    """Evaluation on suites (docs/design.md §9)."""

    help_panel: ClassVar[str] = "Evaluation"

    average: bool = setting(False, "Add an Avg. column (Table 5 style).")
    shortcut_split: str | None = setting(
        None,
        "A zdebias shortcut-split folder: also accuracy on its aligned, conflicting and free "
        "rows and the reliance gap aligned − conflicting.",
    )
    min_group_size: int = setting(
        20,
        "With --shortcut-split: the rows a gold label × verdict group needs to count in the "
        "worst-group accuracy.",
        ge=1,
        exclude_if=lambda value: value == 20,  # the default: stage hashes as before it
    )
    metrics: list[str] | None = setting(
        None,
        "Comma-separated metrics run beside the built-in ones: a registered name or a dotted "
        "path pkg.module:Class (a zdebias.evaluation.registry.Metric); compare t-tests the "
        "primary value of those marked tested.",
        exclude_if=lambda value: not value,  # unset: stage hashes as before the setting
    )


class CompareScope(Settings):
    """What the t-tests cover beyond each suite: the groups of a grouped suite and the primary
    Holm family; ``zdebias compare``'s and the ``evaluate`` stage's."""

    help_panel: ClassVar[str] = "Comparison"

    family: list[str] | None = setting(
        None,
        "Comma-separated metrics of the primary Holm family (default: each suite's accuracy); "
        "every other tested metric is Holm-adjusted in a secondary family.",
        exclude_if=lambda value: value is None,  # unset: stage hashes as before the setting
    )
    detail: bool = setting(
        False,
        "Also test per-heuristic sub-results (HANS).",
        exclude_if=lambda value: not value,  # unset: stage hashes as before the setting
    )


class CompareSettings(CompareScope):
    """Tests of evaluation results against a baseline (``zdebias compare``): paired t over
    shared seeds, Welch's t otherwise, McNemar over rows for single runs; Holm-adjusted."""

    help_panel: ClassVar[str] = "Comparison"

    alpha: float = setting(0.05, "Significance level (of the Holm-adjusted p).", gt=0, lt=1)
    welch: bool = setting(False, "Welch's t-test even where the runs' seeds pair.")
    student: bool = setting(
        False, "Student's t-test everywhere (the paper's: unpaired, equal variances)."
    )
    average: bool = setting(False, "Also test the per-run average.")

    @model_validator(mode="after")
    def _one_test(self) -> CompareSettings:
        if self.welch and self.student:
            raise ValueError("welch and student exclude each other: choose one test")
        return self


__all__ = ["CompareScope", "CompareSettings", "EvaluateSettings"]
