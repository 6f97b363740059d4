"""AutoCAD counterfactual stages (docs/design.md §10).

Each stage config is its operation's settings (``zdebias.counterfactual.settings``) plus
references (classifier, infiller, base model, LM; input / train / dev records).
"""

from __future__ import annotations

from typing import Any

from zdebias.counterfactual.settings import (
    InfillSettings,
    MetricsSettings,
    PromptCounterfactualSettings,
    RationaleSettings,
    SelectSettings,
)
from zdebias.data.schema import Record
from zdebias.data.writers import write_json, write_records
from zdebias.errors import ConfigError
from zdebias.generation.settings import ClientSettings
from zdebias.pipeline.config import StageConfig
from zdebias.pipeline.registry import Inputs, StageContext, StageResult, register_stage
from zdebias.pipeline.stages._common import (
    N_EXAMPLES,
    SPLIT_OUTPUTS,
    ModelRef,
    OptModelRef,
    OptRecordsRef,
    RecordsRef,
    examples_of,
    note_resumed,
    pick_keys,
    settings_for,
    split_result,
    task_labels,
)


def _load_classifier(inputs: Inputs, ref: str | None) -> object:
    from zdebias.classify.predict import load_classifier

    path = inputs.path("classifier") or ref
    if path is None:  # pragma: no cover - called for stages that name one
        raise ConfigError("no classifier given")
    return load_classifier(path)


def _counterfactuals(
    ctx: StageContext,
    kept: list[Record],
    rejected: list[Record],
    summary: dict[str, Any],
    *metrics: str,
) -> StageResult:
    """Write a counterfactual stage's files (``counterfactuals.jsonl``, ``rejected.jsonl``,
    ``summary.json``); its result reports ``metrics``, keys of the summary."""
    return split_result(
        ctx,
        kept,
        rejected,
        summary,
        data="counterfactuals.jsonl",
        metrics=pick_keys(summary, *metrics),
    )


class RationalesConfig(RationaleSettings, StageConfig):
    """AutoCAD step 1: rationale spans by gradient saliency (docs/design.md §10)."""

    classifier: ModelRef
    input: RecordsRef


@register_stage(
    "counterfactual-rationales",
    config=RationalesConfig,
    outputs={"data": "records", "dropped": "records"},
)
def rationales_stage(cfg: RationalesConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Pick rationale spans for correctly and confidently predicted examples."""
    from zdebias.counterfactual.rationales import extract_rationales

    clf = _load_classifier(inputs, cfg.classifier)
    kept, dropped = extract_rationales(
        clf,
        inputs.records("input"),
        settings_for(RationaleSettings, cfg, ctx),
        progress=ctx.progress,
    )
    write_records(kept, ctx.out_dir / "rationales.jsonl")
    write_records(dropped, ctx.out_dir / "dropped.jsonl")
    return StageResult(
        {"data": "rationales.jsonl", "dropped": "dropped.jsonl"},
        rows_out={"kept": len(kept), "dropped": len(dropped)},
    )


class InfillerConfig(InfillSettings, StageConfig):
    """AutoCAD step 2: label-controlled infiller, MLE + α·UL on rationale tokens."""

    model: ModelRef
    train: RecordsRef
    dev: OptRecordsRef = None


@register_stage("counterfactual-train", config=InfillerConfig, outputs={"model": "model"})
def infiller_stage(cfg: InfillerConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Fine-tune the infiller on rationale-masked (or randomly masked) records."""
    from zdebias.counterfactual.trainer import train_infiller

    model = inputs.path("model") or cfg.model
    summary = train_infiller(
        inputs.records("train"),
        ctx.out_dir / "model",
        InfillSettings.take(cfg, seed=ctx.seed, model=str(model)),
        labels=task_labels(ctx),
        dev=inputs.records("dev") if "dev" in inputs else None,
        progress=ctx.progress,
    )
    note_resumed(ctx, summary)
    return StageResult(
        {"model": "model"}, metrics=pick_keys(summary, "n_train", "n_skipped", "compute")
    )


class CounterfactualGenerateConfig(SelectSettings, StageConfig):
    """AutoCAD steps 3-4: infill each rationale for every other label, then post-select."""

    infiller: ModelRef
    classifier: ModelRef
    input: RecordsRef


@register_stage(
    "counterfactual-generate", config=CounterfactualGenerateConfig, outputs=SPLIT_OUTPUTS
)
def counterfactual_generate_stage(
    cfg: CounterfactualGenerateConfig, inputs: Inputs, ctx: StageContext
) -> StageResult:
    """Generate counterfactuals and keep those the classifier assigns the target label."""
    from zdebias.counterfactual.model import load_infiller
    from zdebias.counterfactual.select import generate_counterfactuals

    records = inputs.records("input")
    infiller = load_infiller(inputs.path("infiller") or cfg.infiller)
    clf = _load_classifier(inputs, cfg.classifier)
    kept, rejected, summary = generate_counterfactuals(
        infiller, clf, records, settings_for(SelectSettings, cfg, ctx), progress=ctx.progress
    )
    originals = {r.id: r for r in records}
    examples = []
    for r in kept[:N_EXAMPLES]:
        src = originals.get(str(r.meta.get("source_id")))
        examples.append(
            {"original": src.to_dict() if src else None, "counterfactual": examples_of([r], 1)[0]}
        )
    write_json({"counterfactuals": examples}, ctx.out_dir / "examples.json")
    return _counterfactuals(ctx, kept, rejected, summary, "flip_rate", "keep_rate", "n_outputs")


class CounterfactualPromptConfig(PromptCounterfactualSettings, ClientSettings, StageConfig):
    """Prompted counterfactuals: an instruction model makes the minimal edit, then the same
    post-selection (an alternative to AutoCAD steps 2-4)."""

    generator: ModelRef
    classifier: ModelRef
    input: RecordsRef


@register_stage("counterfactual-prompt", config=CounterfactualPromptConfig, outputs=SPLIT_OUTPUTS)
def prompt_stage(cfg: CounterfactualPromptConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Ask an instruction model for counterfactuals; keep those the classifier agrees with."""
    from zdebias.counterfactual.prompted import prompt_counterfactuals

    kept, rejected, summary = prompt_counterfactuals(
        inputs.path("generator") or cfg.generator,
        _load_classifier(inputs, cfg.classifier),
        inputs.records("input"),
        settings_for(PromptCounterfactualSettings, cfg, ctx),
        client=ClientSettings.take(cfg),
        progress=ctx.progress,
    )
    metrics = ("flip_rate", "n_kept", "n_outputs", "mean_edit_distance", "usage")
    return _counterfactuals(ctx, kept, rejected, summary, *metrics)


class CounterfactualMetricsConfig(MetricsSettings, StageConfig):
    """AutoCAD step 5: flip rate, distinct-n and (with ``lm``) perplexity of counterfactuals."""

    input: RecordsRef
    classifier: OptModelRef = None
    lm: OptModelRef = None


@register_stage(
    "counterfactual-metrics", config=CounterfactualMetricsConfig, outputs={"metrics": "json"}
)
def counterfactual_metrics_stage(
    cfg: CounterfactualMetricsConfig, inputs: Inputs, ctx: StageContext
) -> StageResult:
    """Quality metrics of generated counterfactuals."""
    from zdebias.counterfactual.metrics import counterfactual_metrics

    clf = _load_classifier(inputs, cfg.classifier) if "classifier" in inputs else None
    lm = inputs.path("lm")
    result = counterfactual_metrics(
        inputs.records("input"),
        MetricsSettings.take(cfg, lm=None if lm is None else str(lm)),
        classifier=clf,
        progress=ctx.progress,
    )
    write_json(result, ctx.out_dir / "metrics.json")
    return StageResult({"metrics": "metrics.json"}, metrics=result)
