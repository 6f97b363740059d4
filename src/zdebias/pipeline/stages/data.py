"""Data stages: the built-in demo corpus, concatenation and seeded random subsets."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from zdebias.data.demo import DemoDataSettings
from zdebias.data.schema import Record
from zdebias.data.subset import SubsetSettings, draw_subset
from zdebias.data.writers import write_records
from zdebias.errors import ConfigError
from zdebias.pipeline.config import Ref, StageConfig
from zdebias.pipeline.registry import (
    Inputs,
    StageContext,
    StageResult,
    register_stage,
)
from zdebias.pipeline.stages._common import (
    OptRecordsRef,
    RecordsRef,
    count_types,
    settings_for,
)

# --------------------------------------------------------------------------- demo data


class DemoDataConfig(DemoDataSettings, StageConfig):
    """The built-in synthetic corpus (see :mod:`zdebias.data.demo`)."""


@register_stage(
    "demo-data",
    config=DemoDataConfig,
    outputs={
        "train": "records",
        "dev": "records",
        "test": "records",
        "test_hard": "records",
        "test_easy": "records",
        "artifacts": "json",
    },
)
def demo_data_stage(cfg: DemoDataConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Write the synthetic NLI corpus with planted artifacts (train/dev) and a clean test."""
    from zdebias.data.demo import write_demo_corpus

    if ctx.task.name != "nli":
        raise ConfigError(f"demo-data makes an nli corpus; the recipe's task is {ctx.task.name!r}")
    info = write_demo_corpus(ctx.out_dir, settings_for(DemoDataSettings, cfg, ctx))
    return StageResult(
        {
            "train": "train.jsonl",
            "dev": "dev.jsonl",
            "test": "test.jsonl",
            "test_hard": "test_hard.jsonl",
            "test_easy": "test_easy.jsonl",
            "artifacts": "artifacts.json",
        },
        rows_out=dict(info["sizes"]),
        metrics={"planted": {p["feature"]: p["label"] for p in info["planted"]}},
    )


class ConcatConfig(StageConfig):
    """Concatenate datasets in order (e.g. original + counterfactuals for AutoCAD)."""

    inputs: Annotated[list[str], Ref("records")] = Field(..., min_length=1)


@register_stage("concat", config=ConcatConfig, outputs={"data": "records"})
def concat_stage(cfg: ConcatConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """All records of the inputs, in order; ids must stay unique."""
    records: list[Record] = []
    seen: set[str] = set()
    for i, value in enumerate(inputs.get("inputs")):
        part = inputs.read(value)
        ctx.rows_in[f"inputs.{i}"] = len(part)
        for r in part:
            if r.id in seen:
                raise ConfigError(f"stage {ctx.name!r}: record id {r.id!r} occurs twice")
            seen.add(r.id)
            records.append(r)
    write_records(records, ctx.out_dir / "data.jsonl")
    return StageResult(
        {"data": "data.jsonl"}, rows_out={"total": len(records), **count_types(records)}
    )


class SubsetConfig(SubsetSettings, StageConfig):
    """A seeded random subset: N records, or as many as another dataset has (a same-size
    random baseline for a filtered set), optionally stratified; kept in file order."""

    input: RecordsRef = Field(..., description="the dataset to draw from")
    like: OptRecordsRef = Field(None, description="draw as many records as this dataset has")
    like_type: str | None = Field(
        None,
        description="with like: count only its records of this meta type (e.g. generated: "
        "as many as a Z-Aug stage added, the same-size random control of seeded filtering)",
        exclude_if=lambda value: value is None,  # unset: stage hashes as before the setting
    )

    @model_validator(mode="after")
    def _one_size(self) -> SubsetConfig:
        if (self.n is None) == (self.like is None):
            raise ValueError("give exactly one of n (a count) and like (a dataset)")
        if self.like_type is not None and self.like is None:
            raise ValueError("like_type counts records of like: give like")
        return self

    def hash_excluded(self) -> set[str]:
        """``like_type`` while unset: subset stages hash as before the setting."""
        return super().hash_excluded() | ({"like_type"} if self.like_type is None else set())


@register_stage("subset", config=SubsetConfig, outputs={"data": "records", "rest": "records"})
def subset_stage(cfg: SubsetConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Write a seeded random subset of the input (``data.jsonl``) and the records left out
    (``rest.jsonl``, e.g. a candidate pool beside a seed set), both in file order."""
    records = inputs.records("input")
    settings = settings_for(SubsetSettings, cfg, ctx)
    if cfg.like is not None:
        like = inputs.records("like")
        if cfg.like_type is not None:
            like = [r for r in like if r.meta.get("type") == cfg.like_type]
            if not like:
                raise ConfigError(
                    f"stage {ctx.name!r}: {cfg.like} has no records of meta type "
                    f"{cfg.like_type!r} to count"
                )
        settings = settings.model_copy(update={"n": len(like)})
    chosen = draw_subset(records, settings)
    kept = [records[i] for i in chosen]
    taken = set(chosen)
    rest = [r for i, r in enumerate(records) if i not in taken]
    write_records(kept, ctx.out_dir / "data.jsonl")
    write_records(rest, ctx.out_dir / "rest.jsonl")
    return StageResult(
        {"data": "data.jsonl", "rest": "rest.jsonl"},
        rows_out={"total": len(kept), "left_out": len(rest)},
    )
