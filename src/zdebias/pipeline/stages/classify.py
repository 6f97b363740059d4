"""Classifier stages: confidence filter, training and evaluation (docs/design.md §7-§9).

Each stage config is its operation's settings (``zdebias.classify.settings``; evaluate's:
``zdebias.evaluation.settings``) plus references. An evaluate stage also keeps its compact
predictions (:mod:`zdebias.evaluation.published`), from which :func:`rebuilt_tables` remakes
its results and tables.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from zdebias.classify.settings import ClassifierSettings, ConfidenceSettings
from zdebias.data.writers import write_json, write_records
from zdebias.evaluation.settings import CompareScope, EvaluateSettings
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
    SPLIT_OUTPUTS,
    ModelRef,
    OptModelRef,
    OptRecordsRef,
    RecordsRef,
    note_resumed,
    pick_keys,
    settings_for,
    split_result,
    write_examples,
)

# --------------------------------------------------------------------------- classifiers


def _described(name: str) -> Any:
    """A reference field with the description of the confidence filter's setting ``name``."""
    return Field(None, description=ConfidenceSettings.model_fields[name].description)


class ConfidenceFilterConfig(ConfidenceSettings, StageConfig):
    """Keep a sample only if a classifier (the judge: trained on D0, or debiased) gives
    p(label) > τ (docs/design.md §7), or a rise of p(label) above δ (``rule: delta-p``,
    docs/design.md §12)."""

    input: RecordsRef
    classifier: ModelRef
    originals: OptRecordsRef = _described("originals")
    fidelity_judge: OptModelRef = _described("fidelity_judge")
    hypothesis_only: OptModelRef = _described("hypothesis_only")


@register_stage("confidence-filter", config=ConfidenceFilterConfig, outputs=SPLIT_OUTPUTS)
def confidence_filter_stage(
    cfg: ConfidenceFilterConfig, inputs: Inputs, ctx: StageContext
) -> StageResult:
    """Split samples by the classifier's confidence in their label."""
    from zdebias.classify.confidence import confidence_filter

    records = inputs.records("input")
    models = {name: inputs.path(name) for name in ("fidelity_judge", "hypothesis_only")}
    settings = settings_for(ConfidenceSettings, cfg, ctx).model_copy(
        update={**models, "originals": None}
    )
    kept, rejected, summary = confidence_filter(
        records,
        inputs.path("classifier"),
        settings,
        originals=inputs.records("originals") if "originals" in inputs else None,
        progress=ctx.progress,
    )
    write_examples(ctx, kept)
    metrics = pick_keys(summary, "tau", "delta", "kept_share")
    return split_result(ctx, kept, rejected, summary, metrics=metrics)


class TrainClassifierConfig(ClassifierSettings, StageConfig):
    """Fine-tune a classifier (docs/design.md §8, Table 9 defaults); ``seeds`` trains one per
    seed."""

    model: ModelRef = ClassifierSettings.model_fields["model"].default
    bias_model: OptModelRef = None
    teacher_model: OptModelRef = None
    train: RecordsRef
    dev: OptRecordsRef = None
    seeds: list[int] | None = Field(
        None,
        description="one run per seed (default: [seed]); a finished stage given more seeds "
        "keeps the seeds it trained and trains the new ones",
    )

    def filled(self, settings: dict[str, Any]) -> dict[str, Any]:
        """The schedule the stage trains with (the model's, where unset)."""
        return {**settings, **asdict(self.schedule())}

    def hashed(self, settings: dict[str, Any]) -> dict[str, Any]:
        """The schedule as it resolves for the model (an unset learning rate hashes as the
        value it trains with), and no ``min_steps`` where there is no floor: a stage that
        trains as it did before the floor existed keeps its hash."""
        out = self.filled(settings)
        if not out["min_steps"]:
            del out["min_steps"]
        return out

    def extension_settings(self) -> frozenset[str]:
        """``seeds``: other seeds keep the seeds a finished stage trained."""
        return frozenset({"seeds"})


@register_stage(
    "train-classifier",
    config=TrainClassifierConfig,
    outputs={"model": "model", "runs": "json"},
)
def train_classifier_stage(
    cfg: TrainClassifierConfig, inputs: Inputs, ctx: StageContext
) -> StageResult:
    """Train one classifier per seed; ``model`` is the first, ``runs`` lists them all."""
    from zdebias.classify.learned import recorded_did_not_learn, said_by_caller
    from zdebias.classify.train import METRICS_FILE, train_classifier

    train = inputs.records("train")
    dev = inputs.records("dev") if "dev" in inputs else None
    settings = settings_for(ClassifierSettings, cfg, ctx)
    models = {
        "model": inputs.path("model") or cfg.model,
        "bias_model": inputs.path("bias_model"),
        "teacher_model": inputs.path("teacher_model"),
    }
    seeds = cfg.seeds or [ctx.seed]
    runs = []
    for seed in seeds:
        folder = f"seed-{seed}"
        done = ctx.out_dir / folder / METRICS_FILE  # published whole: a finished seed
        if ctx.resumed and done.is_file():
            metrics = json.loads(done.read_text(encoding="utf-8"))
            ctx.note(f"resumed: {folder} was already trained")
        else:
            with said_by_caller():  # said below, in the stage's notes
                metrics = train_classifier(
                    train,
                    dev,
                    ctx.out_dir / folder,
                    ClassifierSettings.of(settings, seed=seed, **models),
                    task=ctx.task,
                    progress=ctx.progress,
                    overwrite=True,
                    train_file=inputs.path("train"),
                )
            note_resumed(ctx, metrics, f"{folder} ")
        reason = recorded_did_not_learn(metrics)
        if reason:
            ctx.note(f"{folder} did not learn: {reason}")
        runs.append(
            {
                "seed": seed,
                "folder": folder,
                **pick_keys(metrics, "steps", "train_loss", "best", "wall_time_s", "compute"),
                **({"did_not_learn": reason} if reason else {}),
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


class EvaluateConfig(EvaluateSettings, CompareScope, StageConfig):
    """Accuracy of classifiers on suites (docs/design.md §9), as GD-NLI Tables 2-5 shaped tables."""

    classifiers: Annotated[dict[str, str], Ref("model", external=True)] = Field(
        ..., description="method name → classifier (a train-classifier stage or a folder)"
    )
    suites: Annotated[dict[str, str], Ref("records")] = Field(
        ..., description="suite name → dataset"
    )
    baselines: list[str] | None = Field(
        None,
        description="methods every other method is t-tested against (default: the first); "
        "the first one marks the table's significant cells",
    )
    shortcut_split: Annotated[str | None, Ref("json")] = Field(
        None,
        description="a shortcut-split stage's summary (or a shortcut-split folder's "
        "summary.json): accuracy on its aligned, conflicting and free rows, the reliance gap "
        "aligned − conflicting, and its t-tests between methods",
        exclude_if=lambda value: value is None,  # unset: stage hashes as before the setting
    )

    def hash_excluded(self) -> set[str]:
        """``shortcut_split``, ``family`` and ``metrics`` while unset, ``min_group_size`` at
        its default: evaluate stages hash as before the settings."""
        return (
            super().hash_excluded()
            | ({"shortcut_split"} if self.shortcut_split is None else set())
            | ({"family"} if self.family is None else set())
            | ({"min_group_size"} if self.min_group_size == 20 else set())
            | ({"metrics"} if not self.metrics else set())
        )

    @model_validator(mode="after")
    def _known_baselines(self) -> EvaluateConfig:
        unknown = [b for b in self.baselines or [] if b not in self.classifiers]
        if unknown:
            raise ValueError(
                f"baselines {unknown} are not methods of classifiers "
                f"({', '.join(self.classifiers)})"
            )
        # the family's metrics are the suites' (``hans``, ``hans macro-F1``, ``hans/...``),
        # the average or the reliance gap: a typo fails here, not after the evaluation
        known = ("Avg.", "reliance-gap")
        stray = [
            f
            for f in self.family or []
            if f not in known
            and not any(f == s or f.startswith((f"{s} ", f"{s}/")) for s in self.suites)
        ]
        if stray:
            raise ValueError(
                f"family {stray} names no suite of suites ({', '.join(self.suites)}), "
                "nor Avg. or reliance-gap"
            )
        return self


#: the run's cache of classifiers' probabilities on evaluation sets (any evaluate stage of the
#: run, or of a recipe that extends its recipe, reads a model's predictions back from there)
PREDICTIONS_CACHE = ".zdebias-predictions"
#: each evaluate stage's compact predictions (docs/results.md rebuilds its tables from them)
PREDICTIONS_FILE = "predictions.json.gz"


@register_stage(
    "evaluate",
    config=EvaluateConfig,
    outputs={"results": "json", "table": "file"},
)
def evaluate_stage(cfg: EvaluateConfig, inputs: Inputs, ctx: StageContext) -> StageResult:
    """Evaluate every method (all its seeds) on every suite; t-test against the first."""
    from zdebias.classify.learned import said_by_caller
    from zdebias.evaluation.reliance import evaluate_with_split

    suites = []
    for name, value in inputs.get("suites").items():
        suites.append(_suite(name, value, inputs, ctx))
    split = inputs.path("shortcut_split")  # the stage's reference, resolved
    settings = settings_for(EvaluateSettings, cfg, ctx).model_copy(update={"shortcut_split": split})
    docs = []
    rows = ctx.out_dir / ".rows"  # each run's predictions, until compacted below
    for i, (method, value) in enumerate(inputs.get("classifiers").items()):
        with said_by_caller():  # runs that did not learn: said below, in the stage's notes
            doc = evaluate_with_split(
                classifier_runs(value),
                suites,
                split,
                settings,
                name=method,
                progress=ctx.progress,
                cache_dir=ctx.run_dir / PREDICTIONS_CACHE,
                predictions_dir=rows / str(i),
            )
        docs.append(doc)
    tables = TableSettings.of(cfg)
    out = ctx.out_dir / PREDICTIONS_FILE
    publish_predictions(docs, rows, out, split, tables, settings.min_group_size)
    results, markdown, unlearned = evaluation_tables(docs, [s.name for s in suites], tables)
    for line in unlearned:
        ctx.note(line)
    write_json(results, ctx.out_dir / "results.json")
    (ctx.out_dir / "table.md").write_text(markdown, encoding="utf-8")
    flat = {
        row["name"]: {c: (cell["mean"] if cell else None) for c, cell in row["cells"].items()}
        for row in results["table"]["rows"]
    }
    return StageResult({"results": "results.json", "table": "table.md"}, metrics={"accuracy": flat})


@dataclass(frozen=True)
class TableSettings:
    """What an evaluate stage's tables and tests depend on besides the documents (kept in its
    compact predictions, so that the tables rebuild from them)."""

    average: bool = False
    baselines: list[str] | None = None
    detail: bool = False
    family: list[str] | None = None

    @classmethod
    def of(cls, cfg: Any) -> TableSettings:
        """The fields of an :class:`EvaluateConfig` or of a mapping."""
        get = cfg.get if isinstance(cfg, dict) else lambda k, d=None: getattr(cfg, k, d)
        return cls(**{f: get(f, getattr(cls, f)) for f in cls.__dataclass_fields__})


def evaluation_tables(
    docs: Sequence[Mapping[str, Any]], suites: list[str], cfg: TableSettings
) -> tuple[dict[str, Any], str, list[str]]:
    """An evaluate stage's ``results.json`` content, ``table.md`` text and the lines on runs
    that did not learn, from its results documents (one per method)."""
    from zdebias.evaluation.metrics import label_table, overall_markdown, per_label_markdown
    from zdebias.evaluation.reliance import reliance_markdown, reliance_table
    from zdebias.evaluation.significance import comparison_markdown
    from zdebias.evaluation.tables import (
        group_markdown,
        group_table,
        summary_table,
        table_markdown,
        unlearned_lines,
    )

    comparisons = baseline_comparisons(docs, cfg)
    comparison = comparisons[0] if comparisons else None
    table = summary_table(docs, average=cfg.average, comparison=comparison)
    groups = []
    for doc in docs:
        for suite in suites:
            g = group_table(doc, suite)
            if g is not None:
                groups.append({"method": doc["name"], **g})
    markdown = [table_markdown(table)]
    unlearned = unlearned_lines(table)
    if unlearned:
        markdown += ["", *(f"- {line}" for line in unlearned)]
    for c in comparisons:
        markdown += ["", f"Tests against {c['baseline']}:", "", comparison_markdown(c)]
    if comparisons:  # one legend: the marks mean the same in every table above
        markdown += ["", comparisons[0]["legend"]]
    for g in groups:
        markdown += ["", f"{g['method']} on {g['suite']}:", "", group_markdown(g)]
    for doc in docs:  # imbalanced sets: macro-F1, balanced accuracy, per gold label
        labels = label_table(doc)
        if labels is not None:
            markdown += ["", f"{doc['name']}: macro-F1 and balanced accuracy:", ""]
            markdown += [overall_markdown(labels), "", f"{doc['name']} per gold label:", ""]
            markdown.append(per_label_markdown(labels))
    reliance = reliance_markdown(docs, comparison)
    if reliance:
        markdown += ["", reliance]
    results = {
        "table": table,
        "groups": groups,
        "comparison": comparison,
        "comparisons": comparisons,
        "documents": docs,
    }
    if reliance:
        results["reliance"] = reliance_table(docs, comparison)
    return results, "\n".join(markdown) + "\n", unlearned


def rebuilt_tables(path: str | Path, data: str | Path | None = None) -> tuple[dict[str, Any], str]:
    """An evaluate stage's ``results.json`` content and ``table.md`` text, rebuilt from its
    compact predictions alone (:func:`zdebias.evaluation.published.documents`); a published
    copy reads its gold labels from the datasets under ``data`` (default ``$ZDEBIAS_DATA``)."""
    from zdebias.evaluation.published import documents, read_predictions
    from zdebias.evaluation.reliance import SUITES

    compacted = read_predictions(path, data)
    docs = documents(compacted, min_size=compacted["tables"].get("min_group_size"))
    suites = [s["name"] for s in compacted["methods"][0]["suites"]] if docs else []
    suites = [n for n in suites if n in compacted["suites"] and n not in SUITES.values()]
    results, markdown, _ = evaluation_tables(docs, suites, TableSettings.of(compacted["tables"]))
    return results, markdown


def publish_predictions(
    docs: Sequence[Mapping[str, Any]],
    rows: Path,
    out: Path,
    split: str | Path | None,
    tables: TableSettings,
    min_size: int,
) -> None:
    """The evaluation's compact predictions (:mod:`zdebias.evaluation.published`) from the
    runs' predictions in ``rows`` (``I/runR-SUITE.jsonl``, method I), which are then removed."""
    import shutil

    from zdebias.data.schema import Record
    from zdebias.evaluation.published import write_predictions
    from zdebias.evaluation.reliance import read_split

    def read(path: Path) -> list[Record]:
        with path.open(encoding="utf-8") as f:
            return [
                Record(
                    d["id"],
                    d["label"],
                    d.get("premise"),
                    d.get("hypothesis"),
                    d.get("text"),
                    d.get("meta") or {},
                )
                for d in map(json.loads, f)
            ]

    predicted = [
        [
            {name: read(rows / str(i) / f"run{r}-{name}.jsonl") for name in run["results"]}
            for r, run in enumerate(doc["runs"])
        ]
        for i, doc in enumerate(docs)
    ]
    summary = read_split(split) if split else None
    tables_used = {**asdict(tables), "min_group_size": min_size}
    write_predictions(docs, predicted, out, split=summary, tables=tables_used)
    shutil.rmtree(rows)


def baseline_comparisons(
    docs: Sequence[Mapping[str, Any]], cfg: TableSettings | EvaluateConfig
) -> list[dict[str, Any]]:
    """The tests of every method against each of ``cfg.baselines`` (default: the first
    method), one comparison per baseline; with ``cfg.detail`` also on every flat metric of
    the results (``HANS/lexical_overlap/entailment``, ...), not only on the suites. Holm's
    correction runs over all the comparisons together, within ``cfg.family`` (default: the
    suites' accuracy) and within every other metric tested."""
    from zdebias.evaluation.significance import adjust, compare_results

    if len(docs) < 2:
        return []
    keys = list(docs[0].get("summary", {})) if cfg.detail else None
    out = []
    for base in cfg.baselines or [docs[0]["name"]]:
        ordered = [d for d in docs if d["name"] == base] + [d for d in docs if d["name"] != base]
        out.append(compare_results(ordered, keys=keys, average=cfg.average, adjusted=False))
    adjust(out, cfg.family)
    return out


def _suite(name: str, value: Any, inputs: Inputs, ctx: StageContext) -> Any:
    """A :class:`zdebias.evaluation.suites.Suite` for a dataset reference."""
    from zdebias.evaluation.suites import Suite

    if isinstance(value, OutputInput):  # the label set is read from the records (HANS' two)
        return Suite(name, str(value.path), format="jsonl")
    spec = value.spec
    if spec.columns or spec.label_map or spec.limit or spec.where:
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
