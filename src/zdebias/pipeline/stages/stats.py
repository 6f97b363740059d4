"""Statistics stages: z-statistics, z-filtering and the dataset recipes (SPEC §3-§5).

Each stage config is its operation's settings (``zdebias.stats.settings``) plus references.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import Field

from zdebias.data.schema import Record
from zdebias.data.writers import write_json
from zdebias.features.settings import FeatureSettings
from zdebias.pipeline.config import StageConfig
from zdebias.pipeline.registry import Inputs, StageContext, StageResult, register_stage
from zdebias.pipeline.stages._common import (
    SPLIT_OUTPUTS,
    OptModelRef,
    OptRecordsRef,
    RecordsRef,
    _count_types,
    _labels,
    _split_result,
    _write_examples,
    settings_for,
)
from zdebias.stats.settings import CombineSettings, StatsSettings, ZFilterSettings

# --------------------------------------------------------------------------- statistics


F = TypeVar("F", bound=FeatureSettings)
_HYPO_ONLY_HELP = (
    "hypothesis-only classifier for the hypo-only feature: a train-classifier stage (with "
    "input_kind hypothesis-only; with cross_fit its training records get their out-of-fold "
    "predictions) or a classifier folder (default: the fast cross-fitted linear model)"
)


def feature_settings(cls: type[F], cfg: StageConfig, inputs: Inputs, ctx: StageContext) -> F:
    """The operation's settings with ``hypo_only_model`` resolved to a classifier folder."""
    settings = settings_for(cls, cfg, ctx)
    return settings.model_copy(update={"hypo_only_model": inputs.path("hypo_only_model")})


def with_model_predictions(records: list[Record], cfg: FeatureSettings, ctx: StageContext) -> Any:
    """``records`` with a trained hypothesis-only model's predictions (``hypo_only_model``,
    resolved by :func:`feature_settings`)."""
    from zdebias.classify.hypo_only import apply_hypo_only_model

    return apply_hypo_only_model(records, cfg, _labels(ctx), progress=ctx.progress)


class StatsConfig(StatsSettings, StageConfig):
    """z-statistics of a dataset (SPEC §3): top features per label and Gardner-plot points."""

    input: RecordsRef
    hypo_only_model: OptModelRef = Field(None, description=_HYPO_ONLY_HELP)


@register_stage("stats", config=StatsConfig, outputs={"stats": "json"})
def stats_stage(cfg: StatsConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """z-statistics report of one dataset, with the Gardner-plot points."""
    from zdebias.stats.measure import measure

    settings = feature_settings(StatsSettings, cfg, inputs, ctx)
    records = with_model_predictions(inputs.records("input"), settings, ctx)
    m = measure(records, settings, labels=_labels(ctx))
    report = m.report
    report["gardner"] = m.gardner_points(cfg.min_n)
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


class FilterConfig(ZFilterSettings, StageConfig):
    """z-filtering (SPEC §4): Z(input), or Z(input | seed_data) when ``seed_data`` is set."""

    input: RecordsRef
    seed_data: OptRecordsRef = None
    hypo_only_model: OptModelRef = Field(None, description=_HYPO_ONLY_HELP)


@register_stage("filter", config=FilterConfig, outputs=SPLIT_OUTPUTS)
def filter_stage(cfg: FilterConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Z (kept) and Z⁻ (rejected, each with the features that rejected it)."""
    from zdebias.stats.measure import stats_of_kept
    from zdebias.stats.zfilter import z_filter

    settings = feature_settings(ZFilterSettings, cfg, inputs, ctx)
    records = with_model_predictions(inputs.records("input"), settings, ctx)
    seed = inputs.records("seed_data") if "seed_data" in inputs else None
    seed = with_model_predictions(seed, settings, ctx) if seed else seed
    result = z_filter(
        records,
        settings,
        seed_records=seed,
        labels=_labels(ctx),
        progress=ctx.progress,
    )
    result.summary["stats_of_kept"] = stats_of_kept(result.kept, settings, labels=_labels(ctx))
    return _split_result(
        ctx,
        result.kept,
        result.rejected,
        result.summary,
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


# --------------------------------------------------------------------------- dataset recipes


class CombineConfig(CombineSettings, StageConfig):
    """Z-Aug, Par-Z or Seq-Z (SPEC §5) of the original and the generated data."""

    original: RecordsRef
    generated: RecordsRef
    hypo_only_model: OptModelRef = Field(None, description=_HYPO_ONLY_HELP)


@register_stage("combine", config=CombineConfig, outputs=SPLIT_OUTPUTS)
def combine_stage(cfg: CombineConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Build the debiased dataset with one of the GD-NLI recipes."""
    from zdebias.stats.recipes import combine

    settings = feature_settings(ZFilterSettings, cfg, inputs, ctx)
    result = combine(
        cfg.recipe,
        with_model_predictions(inputs.records("original"), settings, ctx),
        with_model_predictions(inputs.records("generated"), settings, ctx),
        settings,
        labels=_labels(ctx),
        progress=ctx.progress,
    )
    records = result.records
    kinds = _count_types(records)
    _write_examples(ctx, [r for r in records if r.meta.get("type") == "generated"])
    return _split_result(
        ctx,
        records,
        result.rejected,
        result.summary,
        data="data.jsonl",
        rows_out={"total": len(records), **kinds, "rejected": len(result.rejected)},
        metrics={"recipe": cfg.recipe, **kinds},
    )
