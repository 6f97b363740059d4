"""Generator stages: train, debias and sample the generator (SPEC §6)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from zdebias.errors import ConfigError
from zdebias.pipeline.config import StageConfig
from zdebias.pipeline.registry import (
    Inputs,
    StageContext,
    StageResult,
    register_stage,
)
from zdebias.pipeline.stages._common import (
    ModelRef,
    RecordsRef,
    _pick,
    _write_examples,
    fast_bf16,
)

# --------------------------------------------------------------------------- generator


class _GeneratorTraining(StageConfig):
    epochs: float = Field(5.0, gt=0)
    learning_rate: float = Field(1e-5, gt=0)
    batch_size: int = Field(24, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    max_length: int = Field(128, ge=8)
    max_steps: int = Field(-1, description="stop after this many steps (-1: use epochs)")
    precision: Literal["fp32", "bf16", "auto"] = Field(
        "fp32", description="bf16: bfloat16 autocast; auto: bf16 where the hardware has it"
    )
    extra: dict[str, Any] = Field(
        default_factory=dict, description="any other GeneratorTrainingArguments field"
    )

    def overrides(self, seed: int, progress: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "num_train_epochs": self.epochs,
            "learning_rate": self.learning_rate,
            "per_device_train_batch_size": self.batch_size,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
            "max_length": self.max_length,
            "max_steps": self.max_steps,
            "seed": seed,
            "disable_tqdm": not progress,
        }
        if self.precision == "bf16" or (self.precision == "auto" and fast_bf16()):
            import torch

            out["bf16"] = True
            if not torch.cuda.is_available():
                out["use_cpu"] = True  # HF refuses CPU bf16 unless told the run is on CPU
        return {**out, **self.extra}


class TrainGeneratorConfig(_GeneratorTraining):
    """Generator G: L_MLE + λ·L_consistency on D0 (GD-NLI §2, Table 7)."""

    model: ModelRef
    train: RecordsRef
    consistency_weight: float = Field(0.5, ge=0, description="λ")


@register_stage("train-generator", config=TrainGeneratorConfig, outputs={"model": "model"})
def train_generator_stage(
    cfg: TrainGeneratorConfig, inputs: Inputs, ctx: StageContext
) -> StageResult:
    """Fine-tune a causal LM on (premise, label, hypothesis) sequences."""
    from zdebias.generation.trainer import train_generator

    records = inputs.records("train")
    summary = train_generator(
        records,
        inputs.path("model") or cfg.model,
        ctx.out_dir / "model",
        task=ctx.task,
        consistency_weight=cfg.consistency_weight,
        **cfg.overrides(ctx.seed, ctx.progress),
    )
    return StageResult(
        {"model": "model"},
        metrics=_pick(
            summary, "steps", "train_loss", "train_seconds", "n_trained", "n_dropped_too_long"
        ),
    )


class DebiasGeneratorConfig(_GeneratorTraining):
    """G*: L_MLE on Z(D0) + α·masked L_UL on Z⁻(D0) (GD-NLI §4.1), from a filter stage."""

    generator: ModelRef
    kept: RecordsRef
    rejected: RecordsRef
    alpha: float = Field(1.0, ge=0, description="α, weight of the unlikelihood loss")
    consistency_weight: float = Field(0.0, ge=0, description="λ (off by default here)")


@register_stage("debias-generator", config=DebiasGeneratorConfig, outputs={"model": "model"})
def debias_generator_stage(
    cfg: DebiasGeneratorConfig, inputs: Inputs, ctx: StageContext
) -> StageResult:
    """Fine-tune a generator (or a base LM) on Z(D0) with unlikelihood on Z⁻(D0)."""
    from zdebias.generation.trainer import train_generator

    kept = inputs.records("kept")
    rejected = inputs.records("rejected")
    missing = [r.id for r in rejected if "rejected_by" not in r.meta]
    if missing:
        raise ConfigError(
            f"stage {ctx.name!r}: 'rejected' records need meta.rejected_by (the output "
            f"'rejected' of a filter stage); {len(missing)} lack it, e.g. {missing[0]!r}"
        )
    summary = train_generator(
        kept,
        inputs.path("generator") or cfg.generator,
        ctx.out_dir / "model",
        task=ctx.task,
        negatives=rejected,
        debias_alpha=cfg.alpha,
        consistency_weight=cfg.consistency_weight,
        extra_info={"objective": "debias"},
        **cfg.overrides(ctx.seed, ctx.progress),
    )
    return StageResult(
        {"model": "model"},
        metrics=_pick(
            summary,
            "steps",
            "train_loss",
            "train_seconds",
            "n_trained",
            "n_negatives",
            "n_dropped_too_long",
        ),
    )


class SampleConfig(StageConfig):
    """Sample (P, l, H) from a generator (SPEC §6), in resumable shards."""

    generator: ModelRef
    n: int = Field(..., ge=1, description="unique well-formed samples wanted")
    batch_size: int = Field(64, ge=1)
    top_p: float = Field(0.9, gt=0, le=1)
    top_k: int = Field(0, ge=0)
    temperature: float = Field(1.0, gt=0)
    shard_size: int = Field(10_000, ge=1)
    backend: Literal["hf", "vllm"] = "hf"
    dtype: Literal["float32", "bfloat16", "float16", "auto"] | None = Field(
        None,
        description="default: bfloat16 on CUDA, float32 elsewhere; auto: bfloat16 "
        "where the hardware has it",
    )
    patience_rounds: int = Field(200, ge=1)


@register_stage(
    "sample",
    config=SampleConfig,
    outputs={"data": "records", "summary": "json"},
)
def sample_stage(cfg: SampleConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Sample the generator; an interrupted stage continues from its last shard."""
    from zdebias.data.readers import read_records
    from zdebias.generation.sample import MERGED, SUMMARY, sample_generator

    state = ctx.out_dir / "state.json"
    before = json.loads(state.read_text())["n_written"] if ctx.resumed and state.exists() else 0
    summary = sample_generator(
        inputs.path("generator") or cfg.generator,
        ctx.out_dir,
        cfg.n,
        batch_size=cfg.batch_size,
        top_p=cfg.top_p,
        top_k=cfg.top_k,
        temperature=cfg.temperature,
        seed=ctx.seed,
        shard_size=cfg.shard_size,
        backend=cfg.backend,
        patience_rounds=cfg.patience_rounds,
        dtype=("bfloat16" if fast_bf16() else "float32") if cfg.dtype == "auto" else cfg.dtype,
        progress=ctx.progress,
    )
    if not summary.get("complete"):
        raise ConfigError(f"stage {ctx.name!r}: sampling stopped before {cfg.n} samples")
    if before:
        ctx.note(f"resumed sampling: {before} of {cfg.n} samples were already written")
    records = read_records(ctx.out_dir / MERGED, format="jsonl", task=ctx.task)
    _write_examples(ctx, records)
    return StageResult(
        {"data": MERGED, "summary": SUMMARY},
        rows_out={"samples": len(records)},
        metrics=_pick(
            summary, "n_generated", "n_malformed", "n_duplicates", "n_shards", "malformed"
        ),
    )
