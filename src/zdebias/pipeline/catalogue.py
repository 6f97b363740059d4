"""The stage catalogue: every stage kind a recipe can name, looked up and described.

Importing this module registers the built-in stage kinds (:mod:`zdebias.pipeline.stages`); a
recipe's ``plugins:`` modules register their own kinds when :func:`load_plugins` imports them.
The registry (:mod:`zdebias.pipeline.registry`) and the recipe settings
(:mod:`zdebias.pipeline.config`) know no stage module: whoever needs the kinds (the loader, the
runner, ``zdebias stages``) goes through here.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

import zdebias.pipeline.stages  # noqa: F401 - registers the built-in stage kinds
from zdebias.errors import ConfigError
from zdebias.pipeline.config import field_refs
from zdebias.pipeline.registry import STAGES, StageSpec


def load_plugins(modules: Iterable[Any], *, source: str = "recipe") -> None:
    """Import a recipe's plug-in modules (each registers its stage kinds when imported)."""
    for module in modules:
        try:
            importlib.import_module(str(module))
        except ImportError as err:
            raise ConfigError(f"{source}: plugin {module!r} cannot be imported: {err}") from None


def get_stage(kind: str) -> StageSpec:
    """The registered stage kind, failing with the list of kinds."""
    if kind not in STAGES:
        raise ConfigError(f"unknown stage kind {kind!r}; kinds are {', '.join(sorted(STAGES))}")
    return STAGES[kind]


def describe_stages() -> dict[str, Any]:
    """Every stage kind: its doc line, outputs, and settings (required? reference kind?)."""
    out: dict[str, Any] = {}
    for kind in sorted(STAGES):
        spec = STAGES[kind]
        refs = field_refs(spec.config)
        fields = {n: i for n, i in spec.config.model_fields.items() if n != "stage"}
        out[kind] = {
            "doc": spec.doc,
            "outputs": spec.outputs,
            "settings": {
                n: {"required": i.is_required(), "ref": refs[n].kind if n in refs else None}
                for n, i in fields.items()
            },
        }
    return out
