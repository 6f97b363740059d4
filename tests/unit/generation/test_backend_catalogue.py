"""The sampling backends' catalogue is the one place their names live: the CLI offers each
(choices and help), the settings' type accepts each, and each dispatches to its class
through the table of its kind (trained or prompted)."""

from __future__ import annotations

from typing import Any, get_args

import pytest
import typer.main

from zdebias.cli import app
from zdebias.generation import prompted, sample, trained
from zdebias.generation.backends import (
    CATALOGUE,
    NAMES,
    PROMPTED,
    Backends,
    BackendSpec,
    backend_help,
)
from zdebias.generation.settings import SampleSettings


def _backend_option() -> Any:
    """``zdebias sample``'s ``--backend`` option (typer may vendor click: read by duck type)."""
    group = typer.main.get_command(app)
    command = group.commands["sample"]  # type: ignore[attr-defined]
    (option,) = [p for p in command.params if p.name == "backend"]
    return option


def test_the_cli_offers_every_backend_of_the_catalogue_in_its_order() -> None:
    option = _backend_option()
    assert tuple(option.type_descriptor.choices) == NAMES == ("hf", "vllm", "openai", "local")
    assert get_args(SampleSettings.model_fields["backend"].annotation) == NAMES
    help_text = " ".join((option.help or "").split())
    assert help_text.startswith(backend_help()), help_text
    assert "vllm (needs vLLM and a CUDA GPU)" in help_text
    assert sample.PROMPTED_BACKENDS == PROMPTED == ("openai", "local")


@pytest.mark.parametrize("spec", CATALOGUE, ids=lambda s: s.name)
def test_every_backend_dispatches_to_its_class(spec: BackendSpec) -> None:
    table = prompted.PROMPT_BACKENDS if spec.prompted else trained.BACKENDS
    other = trained.BACKENDS if spec.prompted else prompted.PROMPT_BACKENDS
    klass = table[spec.name]
    assert klass is getattr(prompted if spec.prompted else trained, spec.target.split(":")[1])
    with pytest.raises(KeyError):  # a prompted name is no trained backend, and the reverse
        other[spec.name]
    assert SampleSettings(n=1, backend=spec.name).backend == spec.name


def test_a_backend_set_by_hand_takes_precedence_and_unknown_names_are_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Fake:
        pass

    monkeypatch.setitem(trained.BACKENDS, "hf", Fake)
    assert trained.BACKENDS["hf"] is Fake
    assert trained.BACKENDS.builtin() == {"hf": trained.HFBackend, "vllm": trained.VllmBackend}
    with pytest.raises(KeyError):
        Backends(prompted=False)["mlx"]
