"""Statistics stages: z-statistics, z-filtering and the dataset recipes (docs/design.md §3-§5).

Each stage config is its operation's settings (``zdebias.stats.settings``) plus references.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import Field, model_validator

from zdebias.data.options import ReadOptions
from zdebias.data.schema import Record
from zdebias.data.writers import write_json
from zdebias.errors import ConfigError
from zdebias.features.settings import FeatureSettings
from zdebias.pipeline.config import Ref, StageConfig
from zdebias.pipeline.registry import (
    DataInput,
    Inputs,
    OutputInput,
    StageContext,
    StageResult,
    note_skipped,
    register_stage,
)
from zdebias.pipeline.stages._common import (
    SPLIT_OUTPUTS,
    OptModelRef,
    OptRecordsRef,
    RecordsRef,
    count_types,
    settings_for,
    split_result,
    task_labels,
    write_examples,
)
from zdebias.stats.execution.source import FileInput, Teller
from zdebias.stats.settings import (
    CombineSettings,
    FilterSettings,
    ShortcutSplitSettings,
    StatsSettings,
    ZFilterSettings,
)

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

    return apply_hypo_only_model(records, cfg, task_labels(ctx), progress=ctx.progress)


class StatsConfig(StatsSettings, StageConfig):
    """z-statistics of a dataset (docs/design.md §3): top features per label and Gardner-plot
    points."""

    input: RecordsRef
    hypo_only_model: OptModelRef = Field(None, description=_HYPO_ONLY_HELP)


@register_stage("stats", config=StatsConfig, outputs={"stats": "json"})
def stats_stage(cfg: StatsConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """z-statistics report of one dataset, with the Gardner-plot points."""
    from zdebias.stats.measure import measure

    settings = feature_settings(StatsSettings, cfg, inputs, ctx)
    records = with_model_predictions(inputs.records("input"), settings, ctx)
    m = measure(records, settings, labels=task_labels(ctx))
    report = m.report
    report["gardner"] = m.gardner_points(cfg.min_n)
    for line in report.get("warnings", []):  # e.g. keep_features that match no feature
        ctx.note(line)
    write_json(report, ctx.out_dir / "stats.json")
    metrics = {
        "n_significant": report["n_significant"],
        "max_z": report["max_z"],
        "z_critical": round(report["z_critical"], 4),
    }
    if "artifact_model" in report:  # artifact_model: true
        metrics["artifact_accuracy"] = report["artifact_model"]["accuracy"]
        metrics["artifact_majority"] = report["artifact_model"]["majority_share"]
    return StageResult({"stats": "stats.json"}, metrics=metrics)


# --------------------------------------------------------------------------- z-filter


class FilterConfig(FilterSettings, StageConfig):
    """z-filtering (docs/design.md §4): Z(input), or Z(input | seed_data) when ``seed_data`` is set;
    ``method: cartography``: the ``region`` of the data map of ``dynamics`` (a
    train-classifier stage trained on ``input``: its first seed's dynamics); AFLite with
    ``method: aflite``."""

    input: RecordsRef
    seed_data: OptRecordsRef = None
    hypo_only_model: OptModelRef = Field(None, description=_HYPO_ONLY_HELP)
    dynamics: OptModelRef = Field(
        None, description=FilterSettings.model_fields["dynamics"].description
    )
    like: OptRecordsRef = Field(
        None,
        description="aflite / cartography: keep as many rows as this dataset has (AFLite's "
        "target; the cartography region's size), e.g. a z-filter stage, for a comparison at "
        "the same size",
    )

    @model_validator(mode="after")
    def _like_for_sized_methods(self) -> FilterConfig:
        from zdebias.stats.methods import filter_method, method_names

        key = filter_method(self.method).size_setting
        if self.like is not None and key is None:
            sized = sorted(n for n in method_names() if filter_method(n).size_setting)
            who = "z-filtering" if self.method == "z" else self.method
            raise ValueError(f"like: for method {' or '.join(sized)} ({who} sets no size)")
        unset = key is not None and type(self).model_fields[key].default is None
        if self.like is not None and key is not None and unset and getattr(self, key) is not None:
            raise ValueError(f"give one of like and {key}")
        return self

    def hash_excluded(self) -> set[str]:
        """The other methods' settings, and ``like`` while unset (stage hashes stay)."""
        return super().hash_excluded() | ({"like"} if self.like is None else set())


@register_stage("filter", config=FilterConfig, outputs=SPLIT_OUTPUTS)
def filter_stage(cfg: FilterConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Z (kept) and Z⁻ (rejected, each with the features that rejected it), run the way
    ``zdebias filter`` would run on the same file
    (:func:`~zdebias.stats.execution.plan.plan_filter`); or AFLite's kept and rejected rows."""
    from zdebias.classify.embed import embed_records
    from zdebias.classify.hypo_only import apply_hypo_only_model
    from zdebias.stats.execution.operations import run_filter
    from zdebias.stats.methods import filter_method

    settings = feature_settings(FilterSettings, cfg, inputs, ctx)
    settings = settings.model_copy(update={"dynamics": inputs.path("dynamics")})
    if "like" in inputs:  # the size of another dataset: AFLite's target, the region's share
        size, total = len(inputs.records("like")), len(inputs.records("input"))
        if not 0 < size <= total:
            raise ConfigError(f"like: {size} rows; expected 1 to the input's {total}")
        update = filter_method(cfg.method).sized(size, total)
        settings = settings.model_copy(update=update)
    source = _file_input(inputs, "input", ctx)
    seed = _file_input(inputs, "seed_data", ctx) if "seed_data" in inputs else None
    hypo_only, embed = apply_hypo_only_model, embed_records
    with run_filter(
        source, settings, seed=seed, hypo_only=hypo_only, embed=embed, progress=ctx.progress
    ) as w:
        summary = w(ctx.out_dir, sources=False)  # the run's manifest says where they came from
    return StageResult(
        {"data": "kept.jsonl", "rejected": "rejected.jsonl", "summary": "summary.json"},
        rows_out={"kept": summary["n_kept"], "rejected": summary["n_rejected"]},
        metrics={
            k: summary.get(k)
            for k in (
                "n_kept",
                "n_rejected",
                "kept_share_of_input",
                "n_significant_before",
                "n_significant_after",
            )
        },
    )


class _StageNotes(Teller):
    """What reading a stage's input found, told as :meth:`Inputs.records` tells it: the rows
    read counted (``label``), the rows a declared dataset (``declared``: its path) skipped and
    the warnings about the records as notes of the run."""

    def __init__(self, ctx: StageContext, label: str, declared: str | None) -> None:
        self.ctx, self.label, self.declared = ctx, label, declared

    def skipped(self, report: Any) -> None:
        if self.declared is not None:
            note_skipped(self.ctx, self.declared, report)
        self.ctx.rows_in[self.label] = report.n_records

    def warn(self, line: str) -> None:
        self.ctx.note(line)


def _file_input(inputs: Inputs, name: str, ctx: StageContext) -> FileInput:
    """The dataset file of the reference setting ``name``, read as :meth:`Inputs.records`
    reads it: a declared dataset with its reader options, an earlier stage's records as
    JSONL; with the recipe's label set."""
    value = inputs.get(name)
    read: ReadOptions
    if isinstance(value, DataInput):
        read, what, declared = value.spec, "recipe data", value.spec.path
    elif isinstance(value, OutputInput) and value.kind == "records":
        read, what, declared = ReadOptions(format="jsonl"), None, None
    else:
        raise ConfigError(f"stage {ctx.name!r}: {value} is not a dataset")
    where = f"stage {ctx.name!r}, input {name!r}"
    notes = _StageNotes(ctx, name, declared)
    path = inputs.path(name)
    assert path is not None
    return FileInput(path, read, ctx.task, what, min_records=0, name=where, teller=notes)


# --------------------------------------------------------------------------- dataset recipes


class CombineConfig(CombineSettings, StageConfig):
    """Z-Aug, Par-Z or Seq-Z (docs/design.md §5) of the original and the generated data."""

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
        labels=task_labels(ctx),
        progress=ctx.progress,
    )
    for line in result.summary.get("warnings", []):  # keep_features that match nothing
        ctx.note(line)
    records = result.records
    kinds = count_types(records)
    write_examples(ctx, [r for r in records if r.meta.get("type") == "generated"])
    return split_result(
        ctx,
        records,
        result.rejected,
        result.summary,
        data="data.jsonl",
        rows_out={"total": len(records), **kinds, "rejected": len(result.rejected)},
        metrics={"recipe": cfg.recipe, **kinds},
    )


# --------------------------------------------------------------------------- shortcut split


class ShortcutSplitConfig(ShortcutSplitSettings, StageConfig):
    """A test set split by a training set's shortcuts (docs/design.md §13): aligned, conflicting,
    free."""

    train: RecordsRef
    test: RecordsRef
    hypo_only_model: OptModelRef = Field(None, description=_HYPO_ONLY_HELP)
    compare_with: Annotated[str | None, Ref("json")] = Field(
        None,
        description="another shortcut-split stage's summary of the same test set "
        "(OTHER.summary): how far the two splits agree, in this summary's agreement",
        exclude_if=lambda value: value is None,  # unset: stage hashes as before the setting
    )

    def hash_excluded(self) -> set[str]:
        """``compare_with`` while unset: split stages hash as before the setting."""
        return super().hash_excluded() | ({"compare_with"} if self.compare_with is None else set())

    def hashed(self, settings: dict[str, Any]) -> dict[str, Any]:
        """``rule: sum-z``, the verdicts of every split stage made before the setting existed,
        hashes as those stages did (the recipe still says it, so it reads back the same)."""
        settings = super().hashed(settings)
        if settings.get("rule") == "sum-z":
            settings = {k: v for k, v in settings.items() if k != "rule"}
        return settings


@register_stage(
    "shortcut-split",
    config=ShortcutSplitConfig,
    outputs={
        "aligned": "records",
        "conflicting": "records",
        "free": "records",
        "summary": "json",
    },
)
def shortcut_split_stage(
    cfg: ShortcutSplitConfig, inputs: Inputs, ctx: StageContext
) -> StageResult:
    """The test rows whose training shortcuts point to their gold label (aligned), to another
    (conflicting) or nowhere (free); an evaluate stage's ``shortcut_split`` takes ``summary``."""
    from zdebias.data.writers import write_files
    from zdebias.stats.shortcut_split import split_records

    settings = feature_settings(ShortcutSplitSettings, cfg, inputs, ctx)
    model = settings.with_hypo_only()  # the hypothesis-only model predicts for `by`
    train = with_model_predictions(inputs.records("train"), model, ctx)
    test = with_model_predictions(inputs.records("test"), model, ctx)
    split = split_records(train, test, settings, labels=task_labels(ctx), progress=ctx.progress)
    other = inputs.path("compare_with")
    if other is not None:  # the other stage's summary.json: its folder holds the slices
        from pathlib import Path

        from zdebias.stats.shortcut_votes import compare_with

        split.summary["agreement"] = compare_with(split.rows, split.codes, Path(other).parent)
    for line in split.summary["warnings"]:
        ctx.note(line)
    parts = split.parts()
    files: dict[str, Any] = {f"{name}.jsonl": records for name, records in parts.items()}
    write_files(ctx.out_dir, {**files, "summary.json": split.summary})
    counts = split.summary["counts"]
    return StageResult(
        {
            "aligned": "aligned.jsonl",
            "conflicting": "conflicting.jsonl",
            "free": "free.jsonl",
            "summary": "summary.json",
        },
        rows_out=dict(counts),
        metrics={"by": cfg.by, **counts},
    )
