"""One version: ``zdebias.__version__``, which pyproject.toml reads, ``--version`` prints and
the installed metadata carries."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

import zdebias
from helpers.cli_main import run_main

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_pyproject_reads_the_package_version() -> None:
    from setuptools.config.pyprojecttoml import read_configuration

    project = tomllib.loads(PYPROJECT.read_text())
    assert project["project"]["dynamic"] == ["version"] and "version" not in project["project"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "zdebias.__version__"
    assert read_configuration(PYPROJECT)["project"]["version"] == zdebias.__version__


def test_version_flag_and_metadata_agree(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["--version"]) == 0
    assert capsys.readouterr().out == f"zdebias {zdebias.__version__}\n"
    assert version("zdebias") == zdebias.__version__  # main: 0.1.0 here, 0.2.0 installed


def test_python_dash_m_runs_the_cli() -> None:
    """``python -m zdebias`` is the ``zdebias`` command (HF tools answer both ways)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "zdebias", "--version"], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout) == (0, f"zdebias {zdebias.__version__}\n")
