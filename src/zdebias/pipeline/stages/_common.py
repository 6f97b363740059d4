"""What the built-in stages share: reference types, examples for the report, helpers."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from zdebias.data.schema import Record
from zdebias.data.writers import write_files, write_json
from zdebias.pipeline.config import Ref, StageConfig
from zdebias.pipeline.registry import StageContext, StageResult
from zdebias.settings import Settings

RecordsRef = Annotated[str, Ref("records")]
OptRecordsRef = Annotated[str | None, Ref("records")]
ModelRef = Annotated[str, Ref("model", external=True)]
OptModelRef = Annotated[str | None, Ref("model", external=True)]
#: how many examples a stage keeps in ``examples.json`` for the report
N_EXAMPLES = 12
#: outputs of a stage that splits records: those it keeps (the default), those it rejects, a summary
SPLIT_OUTPUTS = {"data": "records", "rejected": "records", "summary": "json"}


def examples_of(records: list[Record], n: int = N_EXAMPLES) -> list[dict[str, Any]]:
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


def write_examples(ctx: StageContext, records: list[Record], **extra: Any) -> None:
    write_json({"examples": examples_of(records), **extra}, ctx.out_dir / "examples.json")


def split_result(
    ctx: StageContext,
    kept: list[Record],
    rejected: list[Record],
    summary: dict[str, Any],
    *,
    data: str = "kept.jsonl",
    rows_out: dict[str, int] | None = None,
    metrics: dict[str, Any],
) -> StageResult:
    """Write a splitting stage's files (``data``, ``rejected.jsonl``, ``summary.json``) and
    return its result; ``rows_out`` defaults to the kept and rejected counts."""
    files = {data: kept, "rejected.jsonl": rejected, "summary.json": summary}
    write_files(ctx.out_dir, files)
    return StageResult(
        {"data": data, "rejected": "rejected.jsonl", "summary": "summary.json"},
        rows_out={"kept": len(kept), "rejected": len(rejected)} if rows_out is None else rows_out,
        metrics=metrics,
    )


def task_labels(ctx: StageContext) -> list[str]:
    return list(ctx.task.labels)


def count_types(records: list[Record]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        kind = str(r.meta.get("type", "original"))
        out[kind] = out.get(kind, 0) + 1
    return out


def note_resumed(ctx: StageContext, summary: dict[str, Any], what: str = "") -> None:
    """Say in the run's notes that training went on from a checkpoint of a cut run."""
    step = summary.get("resumed_from_step")
    if step is not None:
        ctx.note(f"resumed training {what}from its checkpoint at step {step}")


def pick_keys(summary: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: summary[k] for k in keys if k in summary}


S = TypeVar("S", bound=Settings)


def settings_for(cls: type[S], cfg: StageConfig, ctx: StageContext) -> S:
    """The operation's settings from a stage config, with the stage's effective seed."""
    extra = {"seed": ctx.seed} if "seed" in cls.model_fields else {}
    return cls.take(cfg, **extra)
