"""Every command's --help reads as prose (issue 39.6: help showed `DEFAULT_FOLDS, 5` and
``` ``datasets`` ```): no reST literals, no Python constant names."""

from __future__ import annotations

import re

import typer
from typer.testing import CliRunner

from zdebias.cli import app
from zdebias.features.hypothesis_only import DEFAULT_FOLDS

#: names in capitals the help may show: metavars and environment variables, not constants
#: (paper notation such as L_MLE or D_G has a one-letter head and is not matched)
ALLOWED = {"MODEL_DIR", "RUN_DIR", "OPENAI_API_KEY", "HF_TOKEN"}


def test_no_command_help_shows_code_markup_or_constant_names() -> None:
    runner = CliRunner()
    commands = list(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert {"stats", "filter", "convert", "evaluate", "report"} <= set(commands)
    seen = {}
    found: set[str] = set()
    for name in commands:
        result = runner.invoke(app, [name, "--help"], env={"COLUMNS": "300", "NO_COLOR": "1"})
        assert result.exit_code == 0, (name, result.output)
        seen[name] = result.output
        assert "``" not in result.output, name
        constants = (
            set(re.findall(r"\b[A-Z]{2,}[A-Z0-9]*(?:_[A-Z0-9]+)+\b", result.output)) - ALLOWED
        )
        found.update(constants)
    assert not found, found
    assert (
        f"Cross-fitting folds of the hypothesis-only model (default: {DEFAULT_FOLDS})"
        in (seen["stats"])
    )
    assert "Hugging Face datasets folder" in seen["convert"]


def _helps(runner: CliRunner, group: object, words: list[str]) -> dict[str, str]:
    """The --help of the app and of every command and subcommand under ``group``, by name."""
    env = {"COLUMNS": "300", "NO_COLOR": "1"}
    out = {" ".join(words): runner.invoke(app, [*words, "--help"], env=env).output}
    for name, command in getattr(group, "commands", {}).items():
        out.update(_helps(runner, command, [*words, name]))
    return out


def test_no_help_cites_the_spec() -> None:
    """Users have the papers, not the design notes: no help text names a SPEC section
    (issue 53.5); the paper's own sections and tables may be named."""
    helps = _helps(CliRunner(), typer.main.get_command(app), [])
    assert len(helps) > 25 and {"shortcut-split", "confidence-filter"} <= set(helps)
    assert {name: "SPEC" in text for name, text in helps.items() if "SPEC" in text} == {}
    assert "GD-NLI §2.2.2" in helps["confidence-filter"]
