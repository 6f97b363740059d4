"""The sampling backends there are, one line each: the one place their names live (issue 54).

A backend is a class that samples for ``zdebias sample``: a *trained* one turns a round's seed
into token-id rows of a trained generator folder (:mod:`zdebias.generation.trained`, the
shape of :class:`~zdebias.generation.trained.HFBackend`); a *prompted* one asks an instruction
model for hypotheses (:mod:`zdebias.generation.prompted`, the shape of
:class:`~zdebias.generation.prompted.OpenAIBackend`). :data:`CATALOGUE` names each with where
its class lives (``module:Class``, imported only when the backend is chosen), whether it
prompts and what it needs; the ``--backend`` choices and help (:data:`BackendName`,
:func:`backend_help`), :data:`PROMPTED` and the two dispatch tables
(``trained.BACKENDS``, ``prompted.PROMPT_BACKENDS``, :class:`Backends`) derive from it.

Importing this module loads no torch (the settings read it).

>>> [spec.name for spec in CATALOGUE], PROMPTED
(['hf', 'vllm', 'openai', 'local'], ('openai', 'local'))
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class BackendSpec:
    """A sampling backend: its ``--backend`` name, its class (``module:Class``), whether it
    prompts an instruction model (premises in, no trained generator), what it samples and
    what it needs beyond the base install (said in the help)."""

    name: str
    target: str
    prompted: bool
    help: str
    needs: str = ""

    def load(self) -> type[Any]:
        """The backend's class, its module imported."""
        module, _, attr = self.target.partition(":")
        klass: type[Any] = getattr(importlib.import_module(module), attr)
        return klass


CATALOGUE: tuple[BackendSpec, ...] = (
    BackendSpec("hf", "zdebias.generation.trained:HFBackend", False, "a trained generator folder"),
    BackendSpec(
        "vllm",
        "zdebias.generation.trained:VllmBackend",
        False,
        "a trained generator folder, sampled by vLLM",
        needs="vLLM and a CUDA GPU",
    ),
    BackendSpec(
        "openai",
        "zdebias.generation.prompted:OpenAIBackend",
        True,
        "prompt the model --generator served at --base-url",
    ),
    BackendSpec(
        "local",
        "zdebias.generation.prompted:LocalChatBackend",
        True,
        "prompt an instruct model in-process with its chat template (e.g. smollm2)",
    ),
)

#: every backend name, in catalogue order (the ``--backend`` choices)
NAMES: tuple[str, ...] = tuple(spec.name for spec in CATALOGUE)
#: the backends that prompt an instruction model (:mod:`zdebias.generation.prompted`)
PROMPTED: tuple[str, ...] = tuple(spec.name for spec in CATALOGUE if spec.prompted)
#: the ``backend`` field's type: one of :data:`NAMES`
BackendName = Literal[NAMES]  # type: ignore[valid-type]


def backend_help() -> str:
    """The ``--backend`` help: each backend, what it samples and what it needs."""
    parts = [f"{s.name}{f' (needs {s.needs})' if s.needs else ''}: {s.help}" for s in CATALOGUE]
    return "; ".join(parts) + "."


class Backends(dict[str, type[Any]]):
    """A dispatch table of backend classes by name, filled from :data:`CATALOGUE` when a
    name is first asked for (so a backend's module loads only when it is used); entries set
    by hand (tests, plugins) take precedence."""

    def __init__(self, *, prompted: bool) -> None:
        super().__init__()
        self.prompted = prompted

    def __missing__(self, name: str) -> type[Any]:
        for spec in CATALOGUE:
            if spec.name == name and spec.prompted == self.prompted:
                klass = self[name] = spec.load()
                return klass
        raise KeyError(name)

    def builtin(self) -> dict[str, type[Any]]:
        """The catalogue's classes of this kind, by name (loaded)."""
        return {s.name: s.load() for s in CATALOGUE if s.prompted == self.prompted}


__all__ = [
    "CATALOGUE",
    "NAMES",
    "PROMPTED",
    "BackendName",
    "BackendSpec",
    "Backends",
    "backend_help",
]
