"""The built-in stage kinds: each one's settings and a thin adapter to its area's Python API.

Every adapter reads its inputs, calls one public function of ``zdebias.stats``,
``zdebias.classify``, ``zdebias.generation``, ``zdebias.counterfactual`` or
``zdebias.evaluation``, and writes what it returns into the stage folder (atomic writers
only). Heavy libraries are imported inside the functions.

Stage kinds (``stage:`` in a recipe):

=========================  ===============================================================
demo-data                  the built-in synthetic NLI corpus with planted artifacts
stats                      z-statistics, top biased features, Gardner-plot points
filter                     z-filtering Z(D) or Z(D | seed)
train-generator            fine-tune a causal LM into a generator (L_MLE + λ·consistency)
debias-generator           fine-tune it on Z(D0) with α·masked unlikelihood on Z⁻(D0)
sample                     sample the generator (resumable shards)
confidence-filter          keep samples an NLI model gives p(label) > τ
combine                    Z-Aug, Par-Z or Seq-Z
concat                     concatenate datasets (e.g. original + counterfactuals)
train-classifier           fine-tune a classifier (CE, PoE, learned-mixin, conf-reg), 1+ seeds
evaluate                   accuracy tables (GD-NLI Tables 2-5 shape)
counterfactual-rationales  AutoCAD rationale spans by gradient saliency
counterfactual-train       label-controlled infiller training
counterfactual-generate    counterfactuals + post-selection
counterfactual-metrics     flip rate, distinct-n, perplexity
=========================  ===============================================================
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from zdebias.data.schema import Record
from zdebias.data.writers import write_json, write_records
from zdebias.errors import ConfigError
from zdebias.pipeline.config import Ref, StageConfig
from zdebias.pipeline.registry import (
    ExternalInput,
    Inputs,
    OutputInput,
    StageContext,
    StageResult,
    as_path,
    register_stage,
)

RecordsRef = Annotated[str, Ref("records")]
OptRecordsRef = Annotated[str | None, Ref("records")]
ModelRef = Annotated[str, Ref("model", external=True)]
OptModelRef = Annotated[str | None, Ref("model", external=True)]
#: how many examples a stage keeps in ``examples.json`` for the report
N_EXAMPLES = 12


def _examples(records: list[Record], n: int = N_EXAMPLES) -> list[dict[str, Any]]:
    out = []
    for r in records[:n]:
        row = r.to_dict()
        row["meta"] = {
            k: v
            for k, v in r.meta.items()
            if k
            in (
                "type",
                "source_id",
                "original_label",
                "target_label",
                "confidence",
                "rejected_by",
                "construction",
                "planted",
            )
        }
        out.append(row)
    return out


def _write_examples(ctx: StageContext, records: list[Record], **extra: Any) -> None:
    write_json({"examples": _examples(records), **extra}, ctx.out_dir / "examples.json")


def fast_bf16() -> bool:
    """Whether bfloat16 is fast here: a CUDA GPU, or a CPU with AVX-512 BF16 or AMX."""
    import torch

    if torch.cuda.is_available():
        return True
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def _labels(ctx: StageContext) -> list[str]:
    return list(ctx.task.labels)


# --------------------------------------------------------------------------- demo data


class DemoDataConfig(StageConfig):
    """The built-in synthetic corpus (see :mod:`zdebias.pipeline.demo_data`)."""

    n_train: int = Field(1500, ge=30)
    n_dev: int = Field(300, ge=3)
    n_test: int = Field(600, ge=3)


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
    from zdebias.pipeline.demo_data import write_demo_corpus

    if ctx.task.name != "nli":
        raise ConfigError(f"demo-data makes an nli corpus; the recipe's task is {ctx.task.name!r}")
    info = write_demo_corpus(
        ctx.out_dir, seed=ctx.seed, n_train=cfg.n_train, n_dev=cfg.n_dev, n_test=cfg.n_test
    )
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


# --------------------------------------------------------------------------- statistics


class StatsConfig(StageConfig):
    """z-statistics of a dataset (SPEC §3): top features per label and Gardner-plot points."""

    input: RecordsRef
    features: list[str] | None = Field(None, description="feature groups (default: all)")
    feature_settings: dict[str, Any] = Field(default_factory=dict)
    top: int = Field(20, ge=1, description="features per label in the table")
    alpha: float = Field(0.01, gt=0, lt=1)
    min_n: int = Field(20, ge=0, description="Gardner plot: features seen more than this")
    track: list[str] = Field(
        default_factory=list, description="features whose z, n, p̂ and rank are always saved"
    )


def gardner_points(
    names: list[str], labels: list[str], z: Any, n: Any, p_hat: Any, min_n: int
) -> dict[str, Any]:
    """The Gardner-plot data as JSON: every feature with n > min_n, its n, p̂ and z per label."""
    import numpy as np

    keep = np.flatnonzero(np.asarray(n) > min_n)
    return {
        "min_n": min_n,
        "features": [names[j] for j in keep.tolist()],
        "n": [int(v) for v in np.asarray(n)[keep]],
        "p": {lab: [round(float(v), 5) for v in p_hat[keep, i]] for i, lab in enumerate(labels)},
        "z": {lab: [round(float(v), 3) for v in z[keep, i]] for i, lab in enumerate(labels)},
    }


def tracked_features(
    track: list[str], names: list[str], labels: list[str], z: Any, n: Any, p_hat: Any
) -> dict[str, Any]:
    """Per tracked feature and label: z, n, p̂ and its rank by z among the present features."""
    import numpy as np

    index = {name: j for j, name in enumerate(names)}
    present = np.asarray(n) > 0
    out: dict[str, Any] = {}
    for feature in track:
        j = index.get(feature)
        if j is None:
            out[feature] = None
            continue
        out[feature] = {
            lab: {
                "z": float(z[j, i]),
                "n": int(n[j]),
                "p": float(p_hat[j, i]),
                "rank": int((z[present, i] > z[j, i]).sum()) + 1,
            }
            for i, lab in enumerate(labels)
        }
    return out


@register_stage("stats", config=StatsConfig, outputs={"stats": "json"})
def stats_stage(cfg: StatsConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """z-statistics report of one dataset, with the Gardner-plot points."""
    from zdebias.features.registry import extract_features
    from zdebias.stats.zstats import describe, label_ids, z_statistics

    records = inputs.records("input")
    labels = _labels(ctx)
    settings = {"seed": ctx.seed, **cfg.feature_settings}
    fm = extract_features(records, cfg.features, labels=labels, **settings)
    report = describe(records, labels=labels, top=cfg.top, alpha=cfg.alpha, feature_matrix=fm)
    z, n, p_hat = z_statistics(fm.matrix, label_ids(records, labels), len(labels))
    report["features_used"] = cfg.features or "default"
    report["gardner"] = gardner_points(fm.names, labels, z, n, p_hat, cfg.min_n)
    report["tracked"] = tracked_features(cfg.track, fm.names, labels, z, n, p_hat)
    write_json(report, ctx.out_dir / "stats.json")
    return StageResult(
        {"stats": "stats.json"},
        metrics={
            "n_significant": report["n_significant"],
            "max_z": report["max_z"],
            "z_critical": round(report["z_critical"], 4),
        },
    )


# --------------------------------------------------------------------------- z-filter


class _ZFilterSettings(StageConfig):
    """The z-filtering settings shared by the filter and combine stages."""

    top_k: int = Field(20, ge=1)
    batch_size: int = Field(1000, ge=1)
    shuffle_seed: int | None = None
    min_z: float = 0.0
    features: list[str] | None = None
    feature_settings: dict[str, Any] = Field(default_factory=dict)


class FilterConfig(_ZFilterSettings):
    """z-filtering (SPEC §4): Z(input), or Z(input | seed_data) when ``seed_data`` is set."""

    input: RecordsRef
    seed_data: OptRecordsRef = None
    shuffle_seed: int | None = Field(None, description="default: the stage's seed")


@register_stage(
    "filter",
    config=FilterConfig,
    outputs={"data": "records", "rejected": "records", "summary": "json"},
)
def filter_stage(cfg: FilterConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Z (kept) and Z⁻ (rejected, each with the features that rejected it)."""
    from zdebias.stats.zfilter import z_filter

    records = inputs.records("input")
    seed = inputs.records("seed_data") if "seed_data" in inputs else None
    result = z_filter(
        records,
        seed_records=seed,
        top_k=cfg.top_k,
        batch_size=cfg.batch_size,
        shuffle_seed=ctx.seed if cfg.shuffle_seed is None else cfg.shuffle_seed,
        features=cfg.features,
        labels=_labels(ctx),
        min_z=cfg.min_z,
        progress=ctx.progress,
        **{"seed": ctx.seed, **cfg.feature_settings},
    )
    write_records(result.kept, ctx.out_dir / "kept.jsonl")
    write_records(result.rejected, ctx.out_dir / "rejected.jsonl")
    write_json(result.summary, ctx.out_dir / "summary.json")
    return StageResult(
        {"data": "kept.jsonl", "rejected": "rejected.jsonl", "summary": "summary.json"},
        rows_out={"kept": len(result.kept), "rejected": len(result.rejected)},
        metrics={
            k: result.summary.get(k)
            for k in (
                "n_kept",
                "n_rejected",
                "kept_share_of_input",
                "n_significant_before",
                "n_significant_after",
            )
        },
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


# --------------------------------------------------------------------------- dataset recipes


class CombineConfig(_ZFilterSettings):
    """Z-Aug, Par-Z or Seq-Z (SPEC §5) of the original and the generated data."""

    recipe: Literal["z-aug", "par-z", "seq-z"]
    original: RecordsRef
    generated: RecordsRef


@register_stage(
    "combine",
    config=CombineConfig,
    outputs={"data": "records", "rejected": "records", "summary": "json"},
)
def combine_stage(cfg: CombineConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Build the debiased dataset with one of the GD-NLI recipes."""
    from zdebias.stats import recipes

    original = inputs.records("original")
    generated = inputs.records("generated")
    result = recipes.combine(
        cfg.recipe,
        original,
        generated,
        top_k=cfg.top_k,
        batch_size=cfg.batch_size,
        shuffle_seed=ctx.seed if cfg.shuffle_seed is None else cfg.shuffle_seed,
        features=cfg.features,
        labels=_labels(ctx),
        min_z=cfg.min_z,
        progress=ctx.progress,
        **{"seed": ctx.seed, **cfg.feature_settings},
    )
    records = result.records
    write_records(records, ctx.out_dir / "data.jsonl")
    write_records(result.rejected, ctx.out_dir / "rejected.jsonl")
    write_json(result.summary, ctx.out_dir / "summary.json")
    kinds = _count_types(records)
    _write_examples(ctx, [r for r in records if r.meta.get("type") == "generated"])
    return StageResult(
        {"data": "data.jsonl", "rejected": "rejected.jsonl", "summary": "summary.json"},
        rows_out={"total": len(records), **kinds, "rejected": len(result.rejected)},
        metrics={"recipe": cfg.recipe, **kinds},
    )


def _count_types(records: list[Record]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        kind = str(r.meta.get("type", "original"))
        out[kind] = out.get(kind, 0) + 1
    return out


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
        {"data": "data.jsonl"}, rows_out={"total": len(records), **_count_types(records)}
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
    from zdebias.counterfactual.infill import train_infiller
    from zdebias.counterfactual.rationales import read_spans

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
    from zdebias.counterfactual.infill import load_infiller
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


# --------------------------------------------------------------------------- helpers


def _pick(summary: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: summary[k] for k in keys if k in summary}


__all__ = ["ExternalInput", "classifier_runs", "gardner_points"]
