"""`zdebias stats`, `filter` and `inspect` must start fast: the CLI imports no heavy library."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "transformers", "datasets", "sklearn", "scipy", "matplotlib", "plotly")


def test_cli_import_pulls_no_heavy_module() -> None:
    probe = (
        "import sys; from zdebias import cli; "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_command_has_help() -> None:
    from typer.testing import CliRunner

    from zdebias.cli import app

    runner = CliRunner()
    top = runner.invoke(app, ["--help"])
    assert top.exit_code == 0
    import typer.main

    group = typer.main.get_command(app)
    names = list(group.commands)  # type: ignore[attr-defined]
    assert "inspect" in names and "convert" in names
    for name in names:
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, (name, result.output)
        assert "Usage" in result.output


def test_command_modules_name_every_command_once() -> None:
    import typer.main

    from zdebias import cli

    every = set(typer.main.get_command(cli.app).commands)  # type: ignore[attr-defined]
    assert every == set(cli.COMMAND_MODULES)
    for module in cli.MODULES:
        alone = typer.main.get_command(cli.build_app([module]))
        names = {n for n, m in cli.COMMAND_MODULES.items() if m == module}
        assert set(alone.commands) == names, module  # type: ignore[attr-defined]


def test_a_command_loads_only_its_own_module() -> None:
    probe = (
        "import sys; from zdebias.cli import main\n"
        "try:\n    main(['-q', 'filter', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('zdebias.commands.')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "Usage: zdebias filter" in out.stdout
    assert (
        out.stdout.strip().splitlines()[-1] == "['zdebias.commands._cli', 'zdebias.commands.stats']"
    )
