"""``manifest.json``: what a run records, written again after every change.

Provenance (the recipe file, its overrides, the resolved config, seeds, package versions),
every invocation of the run (one whose process is gone while still marked running, killed or
its machine lost, is recorded as ``killed`` with the stage it was in), and each stage's
status, reason, timings, rows in and out, metrics, outputs and notes.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from zdebias.data.writers import write_json
from zdebias.pipeline.config import Recipe
from zdebias.pipeline.run_folder import MANIFEST, read_json

_PACKAGES = (
    "zdebias",
    "torch",
    "transformers",
    "datasets",
    "accelerate",
    "numpy",
    "scipy",
    "scikit-learn",
    "pydantic",
    "pyyaml",
)


def utc_now() -> str:
    """The time as the manifest and markers write it (UTC, ISO 8601, seconds)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def versions() -> dict[str, str]:
    """Python, platform and the installed versions of the packages a run depends on.

    zdebias's own is the version of the code that runs (``zdebias.__version__``), also when
    that code is not installed (``PYTHONPATH=src``) or differs from what is.
    """
    from importlib.metadata import PackageNotFoundError, version

    # the package's __init__ ran before this module; read, not imported (layer 6 is above)
    running = getattr(sys.modules.get("zdebias"), "__version__", None)
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in _PACKAGES:
        with contextlib.suppress(PackageNotFoundError):
            out[name] = running if name == "zdebias" and running else version(name)
    out["cpu_count"] = str(os.cpu_count())
    return out


def _record_killed(old: dict[str, Any]) -> None:
    """An earlier invocation still marked running (called under the run lock, so its process
    is gone: killed, or its machine lost) is recorded as ``killed``, with the stage it was in."""
    invocations = old.get("invocations") or []
    if old.get("status") != "running" and not (
        invocations and invocations[-1].get("status") == "running"
    ):
        return
    stage = next((e["name"] for e in old.get("stages", []) if e.get("status") == "running"), None)
    if invocations and invocations[-1].get("status") == "running":
        invocations[-1].update(status="killed", stage=stage, detected=utc_now())
    old["status"] = "killed"


class Manifest:
    """The manifest of one run folder: :attr:`data` in memory, :meth:`save` writes it."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / MANIFEST
        self.data: dict[str, Any] = {}

    def start(self, recipe: Recipe, *, recipe_path: str | None, overrides: list[str]) -> None:
        """Begin an invocation: keep the earlier ones (a dead one marked killed), every stage
        pending."""
        old = read_json(self.path) or {}
        _record_killed(old)
        now = utc_now()
        self.data = {
            "name": recipe.name,
            "recipe": recipe_path,
            "overrides": overrides,
            "seed": recipe.seed,
            "task": recipe.task,
            "status": "running",
            "created": old.get("created", now),
            "started": now,
            "finished": None,
            "seconds": None,
            "versions": versions(),
            "config": recipe.to_dict(),
            "invocations": [
                *old.get("invocations", []),
                {
                    "started": now,
                    "status": "running",
                    "pid": os.getpid(),
                    "host": platform.node(),
                },
            ],
            "stages": [
                {
                    "name": n,
                    "stage": c.stage,
                    "status": "pending",
                    "seed": recipe.stage_seed(n),
                }
                for n, c in recipe.stages.items()
            ],
        }
        self.save()

    def stage(self, name: str) -> dict[str, Any]:
        """A stage's entry (updated in place; :meth:`save` writes it)."""
        return next(e for e in self.data["stages"] if e["name"] == name)

    def save(self) -> None:
        write_json(self.data, self.path)

    def finish(self, status: str, seconds: float) -> None:
        """End the invocation with its status (complete, failed, interrupted)."""
        self.data["status"] = status
        self.data["finished"] = utc_now()
        self.data["seconds"] = seconds
        self.data["invocations"][-1].update(
            status=status, finished=self.data["finished"], seconds=seconds
        )
        self.save()

    def brief(self) -> dict[str, Any]:
        """The run in short, as ``zdebias run --json`` prints it: the run folder, its seconds
        and each stage's entry (without settings)."""
        stages = [{k: v for k, v in e.items() if k != "settings"} for e in self.data["stages"]]
        return {"run_dir": str(self.run_dir), "seconds": self.data["seconds"], "stages": stages}
