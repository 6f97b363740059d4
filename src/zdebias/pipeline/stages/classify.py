"""Classifier stages: confidence filter, training and evaluation (SPEC §7-§9)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field

from zdebias.data.writers import write_json, write_records
from zdebias.pipeline.config import Ref, StageConfig
from zdebias.pipeline.registry import (
    Inputs,
    OutputInput,
    StageContext,
    StageResult,
    as_path,
    register_stage,
)
from zdebias.pipeline.stages._common import (
    ModelRef,
    OptModelRef,
    OptRecordsRef,
    RecordsRef,
    _pick,
    _write_examples,
)

# --------------------------------------------------------------------------- classifiers


class ConfidenceFilterConfig(StageConfig):
    """Keep a sample only if a classifier trained on D0 gives p(label) > τ (SPEC §7)."""

    input: RecordsRef
    classifier: ModelRef
    threshold: float = Field(0.95, ge=0, le=1, description="τ")
    batch_size: int = Field(64, ge=1)


@register_stage(
    "confidence-filter",
    config=ConfidenceFilterConfig,
    outputs={"data": "records", "rejected": "records", "summary": "json"},
)
def confidence_filter_stage(
    cfg: ConfidenceFilterConfig, inputs: Inputs, ctx: StageContext
) -> StageResult:
    """Split samples by the classifier's confidence in their label."""
    from zdebias.classify.confidence import confidence_filter, write_partition

    records = inputs.records("input")
    kept, rejected, summary = confidence_filter(
        records,
        inputs.path("classifier"),
        tau=cfg.threshold,
        batch_size=cfg.batch_size,
        progress=ctx.progress,
    )
    write_partition(kept, rejected, summary, ctx.out_dir)
    _write_examples(ctx, kept)
    return StageResult(
        {"data": "kept.jsonl", "rejected": "rejected.jsonl", "summary": "summary.json"},
        rows_out={"kept": len(kept), "rejected": len(rejected)},
        metrics=_pick(summary, "tau", "kept_share"),
    )


class TrainClassifierConfig(StageConfig):
    """Fine-tune a classifier (SPEC §8, Table 9 defaults); ``seeds`` trains one per seed."""

    model: ModelRef
    train: RecordsRef
    dev: OptRecordsRef = None
    input: Literal["pair", "hypothesis-only", "text"] | None = None
    loss: str = "ce"
    bias_model: OptModelRef = None
    teacher_model: OptModelRef = None
    beta: float = Field(1.0, description="PoE β")
    gamma: float = Field(0.0, description="PoE γ")
    entropy_weight: float | None = None
    learning_rate: float = Field(1e-5, gt=0)
    batch_size: int = Field(32, ge=1)
    epochs: float = Field(5.0, gt=0)
    max_steps: int = -1
    warmup_steps: int = Field(2000, ge=0)
    max_length: int = Field(128, ge=8)
    patience: int = Field(3, ge=1)
    eval_steps: int | None = None
    seeds: list[int] | None = Field(None, description="one run per seed (default: [seed])")


@register_stage(
    "train-classifier",
    config=TrainClassifierConfig,
    outputs={"model": "model", "runs": "json"},
)
def train_classifier_stage(
    cfg: TrainClassifierConfig, inputs: Inputs, ctx: StageContext
) -> StageResult:
    """Train one classifier per seed; ``model`` is the first, ``runs`` lists them all."""
    from zdebias.classify.train import train_classifier

    train = inputs.records("train")
    dev = inputs.records("dev") if "dev" in inputs else None
    seeds = cfg.seeds or [ctx.seed]
    runs = []
    for seed in seeds:
        folder = f"seed-{seed}"
        metrics = train_classifier(
            train,
            dev,
            ctx.out_dir / folder,
            model=inputs.path("model") or cfg.model,
            task=ctx.task,
            input=cfg.input,
            loss=cfg.loss,
            bias_model=inputs.path("bias_model"),
            teacher_model=inputs.path("teacher_model"),
            beta=cfg.beta,
            gamma=cfg.gamma,
            entropy_weight=cfg.entropy_weight,
            seed=seed,
            learning_rate=cfg.learning_rate,
            batch_size=cfg.batch_size,
            epochs=cfg.epochs,
            max_steps=cfg.max_steps,
            warmup_steps=cfg.warmup_steps,
            max_length=cfg.max_length,
            patience=cfg.patience,
            eval_steps=cfg.eval_steps,
            progress=ctx.progress,
            overwrite=True,
        )
        runs.append(
            {
                "seed": seed,
                "folder": folder,
                **_pick(metrics, "steps", "train_loss", "best", "wall_time_s"),
            }
        )
    write_json({"runs": runs}, ctx.out_dir / "runs.json")
    return StageResult({"model": f"seed-{seeds[0]}", "runs": "runs.json"}, metrics={"runs": runs})


def classifier_runs(value: Any) -> list[str]:
    """The classifier folders of a model reference: every seed of a train-classifier stage."""
    if isinstance(value, OutputInput):
        runs_file = value.path.parent / "runs.json"
        if runs_file.is_file():
            runs = json.loads(runs_file.read_text(encoding="utf-8"))["runs"]
            return [str(value.path.parent / r["folder"]) for r in runs]
    return [as_path(value)]


class EvaluateConfig(StageConfig):
    """Accuracy of classifiers on suites (SPEC §9), as GD-NLI Tables 2-5 shaped tables."""

    classifiers: Annotated[dict[str, str], Ref("model", external=True)] = Field(
        ..., description="method name → classifier (a train-classifier stage or a folder)"
    )
    suites: Annotated[dict[str, str], Ref("records")] = Field(
        ..., description="suite name → dataset"
    )
    average: bool = Field(False, description="add an Avg. column (Table 5)")
    batch_size: int = Field(64, ge=1)


@register_stage(
    "evaluate",
    config=EvaluateConfig,
    outputs={"results": "json", "table": "file"},
)
def evaluate_stage(cfg: EvaluateConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Evaluate every method (all its seeds) on every suite; t-test against the first."""
    from zdebias.evaluation.significance import compare_results
    from zdebias.evaluation.suites import evaluate_models
    from zdebias.evaluation.tables import (
        group_markdown,
        group_table,
        summary_table,
        table_markdown,
    )

    suites = []
    for name, value in inputs.get("suites").items():
        suites.append(_suite(name, value, inputs, ctx))
    docs = []
    for method, value in inputs.get("classifiers").items():
        doc = evaluate_models(
            classifier_runs(value),
            suites,
            name=method,
            batch_size=cfg.batch_size,
            progress=ctx.progress,
        )
        docs.append(doc)
    comparison = compare_results(docs, average=cfg.average) if len(docs) > 1 else None
    table = summary_table(docs, average=cfg.average, comparison=comparison)
    groups = []
    for doc in docs:
        for suite in suites:
            g = group_table(doc, suite.name)
            if g is not None:
                groups.append({"method": doc["name"], **g})
    markdown = [table_markdown(table)]
    for g in groups:
        markdown += ["", f"{g['method']} on {g['suite']}:", "", group_markdown(g)]
    results = {"table": table, "groups": groups, "comparison": comparison, "documents": docs}
    write_json(results, ctx.out_dir / "results.json")
    (ctx.out_dir / "table.md").write_text("\n".join(markdown) + "\n", encoding="utf-8")
    flat = {
        row["name"]: {c: (cell["mean"] if cell else None) for c, cell in row["cells"].items()}
        for row in table["rows"]
    }
    return StageResult({"results": "results.json", "table": "table.md"}, metrics={"accuracy": flat})


def _suite(name: str, value: Any, inputs: Inputs, ctx: StageContext) -> Any:
    """A :class:`zdebias.evaluation.suites.Suite` for a dataset reference."""
    from zdebias.evaluation.suites import Suite

    if isinstance(value, OutputInput):
        return Suite(name, str(value.path), format="jsonl", task=ctx.task.name)
    spec = value.spec
    if spec.columns or spec.label_map or spec.limit:
        records = inputs.read(value)
        path = ctx.out_dir / "suites" / f"{name}.jsonl"
        write_records(records, path)
        return Suite(name, str(path), format="jsonl", task=spec.task)
    return Suite(
        name,
        spec.path,
        format=spec.format,
        task=spec.task,
        split=spec.split,
        on_error=spec.on_error,
    )
