"""AutoCAD counterfactual stages (SPEC §10)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from zdebias.data.writers import write_json, write_records
from zdebias.pipeline.config import StageConfig
from zdebias.pipeline.registry import (
    Inputs,
    StageContext,
    StageResult,
    register_stage,
)
from zdebias.pipeline.stages._common import (
    N_EXAMPLES,
    ModelRef,
    OptModelRef,
    OptRecordsRef,
    RecordsRef,
    _examples,
    _labels,
    _pick,
)

# --------------------------------------------------------------------------- counterfactuals


class RationalesConfig(StageConfig):
    """AutoCAD step 1: rationale spans by gradient saliency (SPEC §10)."""

    classifier: ModelRef
    input: RecordsRef
    method: str = "gradient-norm"
    ratio: float = Field(0.3, gt=0, le=1, description="π, share of words picked")
    min_score: float = Field(0.3, ge=0, le=1)
    min_confidence: float = Field(0.8, ge=0, le=1)
    require_correct: bool = True
    fields: Literal["both", "premise", "hypothesis"] = "both"
    batch_size: int = Field(16, ge=1)


@register_stage(
    "counterfactual-rationales",
    config=RationalesConfig,
    outputs={"data": "records", "dropped": "records"},
)
def rationales_stage(cfg: RationalesConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Pick rationale spans for correctly and confidently predicted examples."""
    from zdebias.classify.predict import load_classifier
    from zdebias.counterfactual.rationales import extract_rationales

    records = inputs.records("input")
    clf = load_classifier(inputs.path("classifier") or cfg.classifier)
    kept, dropped = extract_rationales(
        clf,
        records,
        method=cfg.method,
        ratio=cfg.ratio,
        min_score=cfg.min_score,
        min_confidence=cfg.min_confidence,
        require_correct=cfg.require_correct,
        fields=cfg.fields,
        batch_size=cfg.batch_size,
        progress=ctx.progress,
    )
    write_records(kept, ctx.out_dir / "rationales.jsonl")
    write_records(dropped, ctx.out_dir / "dropped.jsonl")
    return StageResult(
        {"data": "rationales.jsonl", "dropped": "dropped.jsonl"},
        rows_out={"kept": len(kept), "dropped": len(dropped)},
    )


class InfillerConfig(StageConfig):
    """AutoCAD step 2: label-controlled infiller, MLE + α·UL on rationale tokens."""

    model: ModelRef
    train: RecordsRef
    dev: OptRecordsRef = None
    alpha: float | None = Field(None, description="default 1.0 (pairs) / 0.3 (single text)")
    arch: Literal["auto", "seq2seq", "causal"] = "auto"
    epochs: float = Field(10, gt=0)
    batch_size: int = Field(8, ge=1)
    learning_rate: float = Field(1e-5, gt=0)
    weight_decay: float = 0.1
    patience: int = Field(3, ge=1)
    max_source_length: int = Field(256, ge=8)
    max_target_length: int = Field(64, ge=4)


@register_stage("counterfactual-train", config=InfillerConfig, outputs={"model": "model"})
def infiller_stage(cfg: InfillerConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Fine-tune the infiller on rationale-masked records."""
    from zdebias.counterfactual.rationales import read_spans
    from zdebias.counterfactual.trainer import train_infiller

    train = inputs.records("train")
    dev = inputs.records("dev") if "dev" in inputs else None
    summary = train_infiller(
        train,
        inputs.path("model") or cfg.model,
        ctx.out_dir / "model",
        labels=_labels(ctx),
        spans=[read_spans(r) for r in train],
        alpha=cfg.alpha,
        arch=cfg.arch,
        dev=(dev, [read_spans(r) for r in dev]) if dev else None,
        epochs=cfg.epochs,
        batch_size=cfg.batch_size,
        lr=cfg.learning_rate,
        weight_decay=cfg.weight_decay,
        patience=cfg.patience,
        seed=ctx.seed,
        max_source_length=cfg.max_source_length,
        max_target_length=cfg.max_target_length,
        progress=ctx.progress,
    )
    return StageResult({"model": "model"}, metrics=_pick(summary, "n_train", "n_skipped"))


class CounterfactualGenerateConfig(StageConfig):
    """AutoCAD steps 3-4: infill each rationale for every other label, then post-select."""

    infiller: ModelRef
    classifier: ModelRef
    input: RecordsRef
    spans: Literal["rationale", "random"] = "rationale"
    n: int = Field(1, ge=1, description="samples per (example, target label)")
    top_p: float = Field(0.9, gt=0, le=1)
    temperature: float = Field(0.7, gt=0)
    min_prob: float = Field(0.0, ge=0, le=1)
    max_filler_tokens: int = Field(8, ge=1)
    batch_size: int = Field(16, ge=1)


@register_stage(
    "counterfactual-generate",
    config=CounterfactualGenerateConfig,
    outputs={"data": "records", "rejected": "records", "summary": "json"},
)
def counterfactual_generate_stage(
    cfg: CounterfactualGenerateConfig, inputs: Inputs, ctx: StageContext
) -> StageResult:
    """Generate counterfactuals and keep those the classifier assigns the target label."""
    from zdebias.classify.predict import load_classifier
    from zdebias.counterfactual.model import load_infiller
    from zdebias.counterfactual.select import generate_counterfactuals

    records = inputs.records("input")
    infiller = load_infiller(inputs.path("infiller") or cfg.infiller)
    clf = load_classifier(inputs.path("classifier") or cfg.classifier)
    kept, rejected, summary = generate_counterfactuals(
        infiller,
        clf,
        records,
        spans=cfg.spans,
        n=cfg.n,
        top_p=cfg.top_p,
        temperature=cfg.temperature,
        seed=ctx.seed,
        min_prob=cfg.min_prob,
        max_filler_tokens=cfg.max_filler_tokens,
        batch_size=cfg.batch_size,
        progress=ctx.progress,
    )
    write_records(kept, ctx.out_dir / "counterfactuals.jsonl")
    write_records(rejected, ctx.out_dir / "rejected.jsonl")
    write_json(summary, ctx.out_dir / "summary.json")
    originals = {r.id: r for r in records}
    examples = []
    for r in kept[:N_EXAMPLES]:
        src = originals.get(str(r.meta.get("source_id")))
        examples.append(
            {"original": src.to_dict() if src else None, "counterfactual": _examples([r], 1)[0]}
        )
    write_json({"counterfactuals": examples}, ctx.out_dir / "examples.json")
    return StageResult(
        {"data": "counterfactuals.jsonl", "rejected": "rejected.jsonl", "summary": "summary.json"},
        rows_out={"kept": len(kept), "rejected": len(rejected)},
        metrics=_pick(summary, "flip_rate", "keep_rate", "n_outputs"),
    )


class CounterfactualMetricsConfig(StageConfig):
    """AutoCAD step 5: flip rate, distinct-n and (with ``lm``) perplexity of counterfactuals."""

    input: RecordsRef
    classifier: OptModelRef = None
    lm: OptModelRef = None
    batch_size: int = Field(16, ge=1)


@register_stage(
    "counterfactual-metrics", config=CounterfactualMetricsConfig, outputs={"metrics": "json"}
)
def counterfactual_metrics_stage(
    cfg: CounterfactualMetricsConfig, inputs: Inputs, ctx: StageContext
) -> StageResult:
    """Quality metrics of generated counterfactuals."""
    from zdebias.counterfactual.metrics import counterfactual_metrics

    records = inputs.records("input")
    clf = None
    if "classifier" in inputs:
        from zdebias.classify.predict import load_classifier

        clf = load_classifier(inputs.path("classifier"))
    result = counterfactual_metrics(
        records,
        classifier=clf,
        lm=inputs.path("lm"),
        batch_size=cfg.batch_size,
        progress=ctx.progress,
    )
    write_json(result, ctx.out_dir / "metrics.json")
    return StageResult({"metrics": "metrics.json"}, metrics=result)
