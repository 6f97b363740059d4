"""Generator stages: train, debias and sample the generator (docs/design.md §6).

Each stage config is its operation's settings (``zdebias.generation.settings``) plus
references; the stage's seed is the recipe's unless the stage sets its own.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from zdebias.errors import ConfigError
from zdebias.generation.settings import (
    DebiasSettings,
    GeneratorSettings,
    PromptSettings,
    SampleSettings,
)
from zdebias.generation.transforms import TransformSettings
from zdebias.pipeline.config import Ref, StageConfig
from zdebias.pipeline.registry import (
    Inputs,
    OutputInput,
    StageContext,
    StageResult,
    register_stage,
)
from zdebias.pipeline.stages._common import (
    ModelRef,
    OptRecordsRef,
    RecordsRef,
    note_resumed,
    pick_keys,
    settings_for,
    write_examples,
)

# --------------------------------------------------------------------------- generator


class TrainGeneratorConfig(GeneratorSettings, StageConfig):
    """Generator G: L_MLE + λ·L_consistency on D0 (GD-NLI §2, Table 7)."""

    model: ModelRef
    train: RecordsRef


class DebiasGeneratorConfig(DebiasSettings, StageConfig):
    """G*: L_MLE on Z(D0) + α·masked L_UL on Z⁻(D0) (GD-NLI §4.1), from a filter stage."""

    generator: ModelRef
    kept: RecordsRef
    rejected: RecordsRef


_TRAINED = ("steps", "train_loss", "train_seconds", "n_trained", "compute")


def _model_result(ctx: StageContext, summary: dict[str, Any], *shown: str) -> StageResult:
    """A training stage's output ``model``: its metrics, and a note when it resumed."""
    note_resumed(ctx, summary)
    return StageResult({"model": "model"}, metrics=pick_keys(summary, *_TRAINED, *shown))


@register_stage("train-generator", config=TrainGeneratorConfig, outputs={"model": "model"})
def train_generator_stage(
    cfg: TrainGeneratorConfig, inputs: Inputs, ctx: StageContext
) -> StageResult:
    """Fine-tune a causal LM on (premise, label, hypothesis) sequences."""
    from zdebias.generation.trainer import train_generator

    summary = train_generator(
        inputs.records("train"),
        inputs.path("model") or cfg.model,
        ctx.out_dir / "model",
        settings_for(GeneratorSettings, cfg, ctx),
        task=ctx.task,
        progress=ctx.progress,
    )
    return _model_result(ctx, summary, "n_dropped_too_long")


@register_stage("debias-generator", config=DebiasGeneratorConfig, outputs={"model": "model"})
def debias_generator_stage(
    cfg: DebiasGeneratorConfig, inputs: Inputs, ctx: StageContext
) -> StageResult:
    """Fine-tune a generator (or a base LM) on Z(D0) with unlikelihood on Z⁻(D0)."""
    from zdebias.generation.trainer import debias_generator

    try:
        summary = debias_generator(
            inputs.path("generator") or cfg.generator,
            inputs.records("kept"),
            inputs.records("rejected"),
            ctx.out_dir / "model",
            settings_for(DebiasSettings, cfg, ctx),
            task=ctx.task,
            progress=ctx.progress,
        )
    except ConfigError as err:
        raise ConfigError(f"stage {ctx.name!r}: {err}") from None
    return _model_result(ctx, summary, "n_negatives", "n_dropped_too_long")


class SampleConfig(SampleSettings, PromptSettings, StageConfig):
    """Sample (P, l, H) from a generator (docs/design.md §6), in resumable shards; with
    ``premises``, a trained generator writes the label (or, with ``per_premise``, the hypothesis of
    each forced label) after each premise; with ``backend`` openai / local, prompt an instruction
    model with ``premises`` (few-shot ``examples``); with ``premises`` and ``cells`` (a stats
    stage, or a ``zdebias stats --cells`` file), fill those shortcut-breaking cells, each
    cell's z before and after measured on ``measure_with`` (D0)."""

    generator: ModelRef
    premises: OptRecordsRef = None
    examples: OptRecordsRef = None
    cells: Annotated[str | None, Ref("json", external=True)] = None
    measure_with: OptRecordsRef = None


@register_stage(
    "sample",
    config=SampleConfig,
    outputs={"data": "records", "summary": "json"},
)
def sample_stage(cfg: SampleConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Sample the generator; an interrupted stage continues from its last shard."""
    from zdebias.data.readers import read_records
    from zdebias.generation.sample import sample_generator
    from zdebias.generation.store import MERGED, STATE, SUMMARY

    if not cfg.merge:
        raise ConfigError(f"stage {ctx.name!r}: merge: false; the stage's output is {MERGED}")
    if cfg.worker is not None:
        raise ConfigError(
            f"stage {ctx.name!r}: worker: {cfg.worker} samples one part; a stage runs them "
            "all with workers: N"
        )
    state = ctx.out_dir / STATE
    before = json.loads(state.read_text())["n_written"] if ctx.resumed and state.exists() else 0
    summary = sample_generator(
        inputs.path("generator") or cfg.generator,
        ctx.out_dir,
        settings_for(SampleSettings, cfg, ctx),
        prompt=PromptSettings.take(cfg),
        premises=inputs.records("premises") if "premises" in inputs else None,
        examples=inputs.records("examples") if "examples" in inputs else None,
        cells=_cells_input(inputs),
        measure_with=inputs.records("measure_with") if "measure_with" in inputs else None,
        progress=ctx.progress,
    )
    if not summary.get("complete"):
        raise ConfigError(f"stage {ctx.name!r}: sampling stopped before {cfg.n} samples")
    if before:
        ctx.note(f"resumed sampling: {before} of {cfg.n} samples were already written")
    records = read_records(ctx.out_dir / MERGED, format="jsonl", task=ctx.task)
    write_examples(ctx, records)
    if cells := summary.get("cells"):
        ctx.note(
            f"cells: {cells['fired']} of {cells['asked']} rows with their feature in "
            f"{cells['n_cells']} cells, {cells['short']} short; {cells['n_skipped']} cells "
            "skipped (summary.json)"
        )
    return StageResult(
        {"data": MERGED, "summary": SUMMARY},
        rows_out={"samples": len(records)},
        metrics=pick_keys(
            summary,
            "n_generated",
            "n_malformed",
            "n_duplicates",
            "n_shards",
            "malformed",
            "usage",
            "n_cross_worker_duplicates",
            "compute",
        ),
    )


# --------------------------------------------------------------------------- transforms


def _cells_input(inputs: Inputs) -> Any:
    """The ``cells`` setting: a stats stage's report or a cells file's content (loaded),
    or a path outside the run; None when unset."""
    if "cells" not in inputs:
        return None
    return (
        inputs.json("cells")
        if isinstance(inputs.get("cells"), OutputInput)
        else inputs.path("cells")
    )


class TransformConfig(TransformSettings, StageConfig):
    """Rule-made transforms of the input's premises for the HANS heuristics (inversion,
    passive, drop-modifier, subsequence): a source a ``combine`` stage takes as its
    ``generated`` input, alone or ``concat``-ed with samples; with ``cells`` (a stats stage or
    a cells file), each pair that fills a shortcut-breaking cell gets ``meta.cell``."""

    input: RecordsRef
    cells: Annotated[str | None, Ref("json", external=True)] = None


@register_stage("transform", config=TransformConfig, outputs={"data": "records", "summary": "json"})
def transform_stage(cfg: TransformConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Write ``data.jsonl`` (the transformed pairs) and ``summary.json`` (per rule: tried,
    applied, skipped by reason)."""
    from zdebias.data.writers import write_files
    from zdebias.generation.transforms import transform_records
    from zdebias.stats.cells import load_cells

    cells = _cells_input(inputs)
    result = transform_records(
        inputs.records("input"),
        settings_for(TransformSettings, cfg, ctx),
        cells=load_cells(cells) if cells is not None else None,
    )
    write_files(ctx.out_dir, {"data.jsonl": result.records, "summary.json": result.summary})
    write_examples(ctx, result.records)
    rules = result.summary["rules"]
    return StageResult(
        {"data": "data.jsonl", "summary": "summary.json"},
        rows_out={"total": len(result.records), **{r: v["written"] for r, v in rules.items()}},
        metrics={"labels": result.summary["labels"]},
    )
