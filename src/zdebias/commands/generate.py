"""``zdebias train-generator``, ``debias-generator`` and ``sample`` (SPEC §6).

torch and transformers are imported inside the commands, never at module level.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from zdebias.commands._common import (
    ColumnsOpt,
    FormatOpt,
    LabelMapOpt,
    OnErrorOpt,
    SplitOpt,
    TaskOpt,
    echo_json,
    open_input,
    report_skips,
)
from zdebias.errors import ConfigError

DataOpt = Annotated[str, typer.Option("--data", help="Training data (any supported input).")]
OutOpt = Annotated[str, typer.Option("--out", help="Output folder.")]
EpochsOpt = Annotated[float, typer.Option("--epochs", help="Training epochs (Table 7: 5).")]
LrOpt = Annotated[float, typer.Option("--lr", help="Learning rate (Table 7: 1e-5).")]
BatchOpt = Annotated[int, typer.Option("--batch-size", help="Batch size per device (Table 7: 24).")]
MaxLenOpt = Annotated[
    int, typer.Option("--max-length", help="Longest sequence in tokens; longer are dropped.")
]
MaxStepsOpt = Annotated[
    int, typer.Option("--max-steps", help="Stop after this many steps (-1: run all epochs).")
]
LimitOpt = Annotated[
    int | None,
    typer.Option(
        "--limit",
        help="Train on N records drawn at random (seeded by --seed), e.g. for a quick run.",
    ),
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed.")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Any TrainingArguments field, KEY=VALUE (repeatable), e.g. "
        "--set bf16=true --set gradient_accumulation_steps=4.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")]


def _parse_sets(items: list[str] | None) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"bad --set {item!r}: expected KEY=VALUE")
        out[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    return out


def _read(data: str, limit: int | None, seed: int, **opts: Any) -> tuple[list[Any], str]:
    """All records, or ``limit`` of them drawn at random (seeded), kept in file order."""
    import random

    ds = open_input(data, **opts)
    records = list(ds)
    report_skips(ds)
    if not records:
        raise ConfigError(f"{data}: no records to train on")
    if limit is not None and limit < len(records):
        keep = sorted(random.Random(seed).sample(range(len(records)), limit))
        records = [records[i] for i in keep]
    return records, ds.report.task


def _chatter_to_stderr() -> Any:
    """Training logs (HF Trainer prints them) go to stderr; stdout keeps only the summary."""
    import contextlib
    import sys

    return contextlib.redirect_stdout(sys.stderr)


def _print_train(summary: dict[str, Any], json_out: bool) -> None:
    shown = {k: v for k, v in summary.items() if k != "log_history"}
    if json_out:
        echo_json(shown)
        return
    typer.echo(
        f"generator saved to {summary['out']}: {summary['n_trained']:,} sequences trained "
        f"({summary['n_dropped_too_long']:,} too long dropped), {summary['steps']} steps, "
        f"loss {summary['train_loss']}, {summary['train_tokens_per_s']:,.0f} tokens/s"
    )
    if "z_filter" in summary:
        z = summary["z_filter"]
        mask = summary.get("mask", {})
        typer.echo(
            f"z-filter: kept {z['n_kept']:,} (Z), rejected {z['n_rejected']:,} (Z⁻); "
            f"unlikelihood on {mask.get('n_biased_tokens', 0):,} tokens "
            f"{mask.get('biased_tokens_by_kind', {})}; "
            f"{mask.get('n_unmatched_ngrams', 0)} n-grams not found"
        )


def _overrides(
    epochs: float,
    lr: float,
    batch_size: int,
    max_length: int,
    max_steps: int,
    seed: int,
    sets: list[str] | None,
    **more: Any,
) -> dict[str, Any]:
    values: dict[str, Any] = {
        "num_train_epochs": epochs,
        "learning_rate": lr,
        "per_device_train_batch_size": batch_size,
        "max_length": max_length,
        "max_steps": max_steps,
        "seed": seed,
        **more,
    }
    values.update(_parse_sets(sets))
    return values


def train_generator_cmd(
    data: DataOpt,
    model: Annotated[
        str,
        typer.Option(
            "--model", help="Causal LM: packaged alias (smollm2), local folder or hub name."
        ),
    ],
    out: OutOpt,
    consistency_weight: Annotated[
        float,
        typer.Option(
            "--consistency-weight", help="λ of the label-consistency unlikelihood (0: MLE only)."
        ),
    ] = 0.5,
    epochs: EpochsOpt = 5.0,
    lr: LrOpt = 1e-5,
    batch_size: BatchOpt = 24,
    max_length: MaxLenOpt = 128,
    max_steps: MaxStepsOpt = -1,
    limit: LimitOpt = None,
    seed: SeedOpt = 42,
    sets: SetOpt = None,
    json_out: JsonOpt = False,
    format: FormatOpt = None,
    task: TaskOpt = None,
    columns: ColumnsOpt = None,
    label_map: LabelMapOpt = None,
    split: SplitOpt = None,
    on_error: OnErrorOpt = "raise",
) -> None:
    """Fine-tune a causal LM into a P → label → H data generator (L_MLE + λ·L_consistency)."""
    records, task_name = _read(
        data,
        limit,
        seed,
        format=format,
        task=task,
        columns=columns,
        label_map=label_map,
        split=split,
        on_error=on_error,
    )
    from zdebias.generation.trainer import train_generator

    with _chatter_to_stderr():
        summary = train_generator(
            records,
            model,
            out,
            task=task_name,
            **_overrides(
                epochs,
                lr,
                batch_size,
                max_length,
                max_steps,
                seed,
                sets,
                consistency_weight=consistency_weight,
            ),
        )
    _print_train(summary, json_out)


def debias_generator_cmd(
    generator: Annotated[str, typer.Option("--generator", help="A trained generator folder.")],
    data: DataOpt,
    out: OutOpt,
    alpha: Annotated[
        float, typer.Option("--alpha", help="α of the masked unlikelihood loss on Z⁻.")
    ] = 1.0,
    top_k: Annotated[
        int,
        typer.Option("--top-k", help="Biased features per label for z-filtering (Table 8: 20)."),
    ] = 20,
    zfilter_batch_size: Annotated[
        int | None,
        typer.Option("--zfilter-batch-size", help="z-filter batch size (default: the filter's)."),
    ] = None,
    features: Annotated[
        str | None,
        typer.Option(
            "--features",
            help="Comma-separated feature groups for z-filtering: ngrams, "
            "hypo-len, len-ratio, lex-overlap, hypo-only, null (default: all).",
        ),
    ] = None,
    shuffle_seed: Annotated[int, typer.Option("--shuffle-seed", help="z-filter order seed.")] = 0,
    consistency_weight: Annotated[
        float,
        typer.Option("--consistency-weight", help="λ during debiasing (SPEC §6: not used, 0)."),
    ] = 0.0,
    epochs: EpochsOpt = 5.0,
    lr: LrOpt = 1e-5,
    batch_size: BatchOpt = 24,
    max_length: MaxLenOpt = 128,
    max_steps: MaxStepsOpt = -1,
    limit: LimitOpt = None,
    seed: SeedOpt = 42,
    sets: SetOpt = None,
    json_out: JsonOpt = False,
    format: FormatOpt = None,
    task: TaskOpt = None,
    columns: ColumnsOpt = None,
    label_map: LabelMapOpt = None,
    split: SplitOpt = None,
    on_error: OnErrorOpt = "raise",
) -> None:
    """z-filter the data, then fine-tune the generator: L_MLE(Z) + α·masked L_UL(Z⁻)."""
    records, _ = _read(
        data,
        limit,
        seed,
        format=format,
        task=task,
        columns=columns,
        label_map=label_map,
        split=split,
        on_error=on_error,
    )
    from zdebias.generation.trainer import debias_generator

    names = [f.strip() for f in features.split(",") if f.strip()] if features else None
    with _chatter_to_stderr():
        summary = debias_generator(
            generator,
            records,
            out,
            alpha=alpha,
            top_k=top_k,
            zfilter_batch_size=zfilter_batch_size,
            shuffle_seed=shuffle_seed,
            features=names,
            **_overrides(
                epochs,
                lr,
                batch_size,
                max_length,
                max_steps,
                seed,
                sets,
                consistency_weight=consistency_weight,
            ),
        )
    _print_train(summary, json_out)


def sample_cmd(
    generator: Annotated[str, typer.Option("--generator", help="A trained generator folder.")],
    n: Annotated[int, typer.Option("--n", help="Unique well-formed samples to write.")],
    out: OutOpt,
    top_p: Annotated[float, typer.Option("--top-p", help="Nucleus sampling mass (1: off).")] = 0.9,
    top_k: Annotated[int, typer.Option("--top-k", help="Top-k sampling (0: off).")] = 0,
    temperature: Annotated[
        float, typer.Option("--temperature", help="Sampling temperature.")
    ] = 1.0,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Sequences per round.")] = 64,
    shard_size: Annotated[
        int, typer.Option("--shard-size", help="Samples per shard file.")
    ] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="Sampling seed.")] = 0,
    backend: Annotated[
        str, typer.Option("--backend", help="hf, or vllm (needs vLLM and a GPU).")
    ] = "hf",
    device: Annotated[
        str | None,
        typer.Option("--device", help="cpu, cuda, cuda:1 ... (default: cuda when available)."),
    ] = None,
    dtype: Annotated[
        str | None,
        typer.Option("--dtype", help="float32, bfloat16, float16 (default: bfloat16 on GPU)."),
    ] = None,
    max_shards: Annotated[
        int | None,
        typer.Option("--max-shards", help="Stop after writing this many shards (resume later)."),
    ] = None,
    merge: Annotated[
        bool,
        typer.Option(
            "--merge/--no-merge", help="Also write samples.jsonl (all shards) when complete."
        ),
    ] = True,
    json_out: JsonOpt = False,
) -> None:
    """Sample N unique (premise, label, hypothesis) records into resumable shards."""
    from zdebias.generation.sample import sample_generator

    with _chatter_to_stderr():
        summary = sample_generator(
            generator,
            out,
            n,
            batch_size=batch_size,
            top_p=top_p,
            top_k=top_k,
            temperature=temperature,
            seed=seed,
            shard_size=shard_size,
            backend=backend,  # type: ignore[arg-type]
            device=device,
            dtype=dtype,
            max_shards=max_shards,
            merge=merge,
        )
    if json_out:
        echo_json(summary)
        return
    state = "complete" if summary["complete"] else "stopped (rerun the same command to resume)"
    typer.echo(
        f"{summary['n_written']:,}/{summary['n_requested']:,} samples in {summary['out']}, "
        f"{state}; generated {summary['n_generated']:,}, malformed {summary['n_malformed']:,} "
        f"{summary['malformed']}, duplicates {summary['n_duplicates']:,}; parseable "
        f"{summary['parseable_share']}, {summary['samples_per_s']} samples/s"
    )


def register(app: typer.Typer) -> None:
    """Add the generator commands."""
    app.command("train-generator")(train_generator_cmd)
    app.command("debias-generator")(debias_generator_cmd)
    app.command("sample")(sample_cmd)
