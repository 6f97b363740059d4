"""Every shipped recipe that ``extends`` another repeats the stages it shares with it exactly
(same kind, settings and seed, same datasets), so that in the other recipe's run folder those
stages are reused, not redone."""

from __future__ import annotations

from pathlib import Path

import pytest

from zdebias.pipeline.digests import stage_hash
from zdebias.pipeline.loader import load_recipe

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
EXTENDING = sorted(
    p for p in CONFIGS.glob("*.yaml") if "\nextends:" in p.read_text(encoding="utf-8")
)


def test_the_recipes_that_extend_others() -> None:
    assert [p.name for p in EXTENDING] == [
        "mnli-poe-z-aug.yaml",
        "snli-poe-seq-z.yaml",
        "snli20k-filters-cpu.yaml",
    ]


@pytest.mark.parametrize("path", EXTENDING, ids=lambda p: p.stem)
def test_shared_stages_are_the_base_recipe_s(path: Path) -> None:
    recipe = load_recipe(path)
    assert recipe.extends, path
    for name in recipe.extends:
        base = load_recipe(CONFIGS / f"{name}.yaml")
        shared = [s for s in recipe.stages if s in base.stages]
        assert shared, f"{path.name} shares no stage with {name}"
        for stage in shared:
            ours, theirs = recipe.stages[stage], base.stages[stage]
            assert stage_hash(recipe, stage, ours, {}) == stage_hash(base, stage, theirs, {}), (
                f"{path.name}: stage {stage} differs from {name}'s"
            )
            for ref in ours.model_dump().values():  # the datasets it reads are the same
                if isinstance(ref, str) and ref in recipe.data:
                    assert recipe.data[ref] == base.data[ref], f"{stage}: data {ref}"
