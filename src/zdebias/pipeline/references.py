"""References between a recipe's parts: a stage setting that names a dataset, an earlier
stage's output (``zfilter`` its default output, ``zfilter.rejected`` a named one) or a model
outside the recipe, resolved against the recipe and the stage kinds' declared outputs.

The loader checks every reference before anything runs; the runner resolves them again to
hand each stage its inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from zdebias.errors import ConfigError
from zdebias.pipeline.config import Recipe, Ref, field_refs, iter_ref_values
from zdebias.pipeline.registry import STAGES


@dataclass(frozen=True)
class Target:
    """What a reference points at: a dataset, a stage output, or an external model name."""

    kind: Literal["data", "stage", "external"]
    name: str
    output: str | None = None


def resolve_reference(
    recipe: Recipe, value: str, ref: Ref, earlier: Sequence[str], *, where: str
) -> Target:
    """Resolve one reference string, failing with what would have been valid."""
    head, _, tail = value.partition(".")
    if head in recipe.stages and head not in earlier:
        raise ConfigError(
            f"{where}: {value!r} refers to stage {head!r}, which does not run before this one"
        )
    if head in earlier:
        kind = recipe.stages[head].stage
        outputs = STAGES[kind].outputs
        output = tail or next(iter(outputs))
        if output not in outputs:
            raise ConfigError(
                f"{where}: stage {head!r} ({kind}) has no output {output!r}; its outputs are "
                f"{', '.join(outputs)}"
            )
        if outputs[output] != ref.kind:
            raise ConfigError(
                f"{where}: {value!r} is a {outputs[output]} output but a {ref.kind} is needed"
            )
        return Target("stage", head, output)
    if value in recipe.data:
        if ref.kind != "records":
            raise ConfigError(f"{where}: {value!r} is a dataset but a {ref.kind} is needed")
        return Target("data", value)
    if ref.external:
        return Target("external", value)
    choices = [*recipe.data, *earlier]
    raise ConfigError(
        f"{where}: {value!r} names no dataset or earlier stage; valid names: "
        f"{', '.join(choices) or '(none)'}"
    )


def check_references(recipe: Recipe) -> None:
    """Every reference names a dataset or an earlier stage output of the kind it needs."""
    clash = set(recipe.data) & set(recipe.stages)
    if clash:
        raise ConfigError(f"names used for both a dataset and a stage: {', '.join(sorted(clash))}")
    earlier: list[str] = []
    for name, cfg in recipe.stages.items():
        for fld, ref in field_refs(type(cfg)).items():
            for value in iter_ref_values(getattr(cfg, fld)):
                resolve_reference(recipe, value, ref, earlier, where=f"stages.{name}.{fld}")
        earlier.append(name)
