"""``zdebias train-generator``, ``debias-generator`` and ``sample`` (docs/design.md §6).

Options come from the settings objects (``zdebias.generation.settings``; for debias-generator
also the z-filter's). torch and transformers are imported inside the commands only.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from zdebias.commands._cli import check_output, emit, require, stdout_to_stderr
from zdebias.data.options import ReadOptions, read_logged
from zdebias.errors import ConfigError
from zdebias.generation.settings import (
    DebiasSettings,
    DebiasZFilterSettings,
    GeneratorSettings,
    PromptSettings,
    SampleSettings,
)
from zdebias.generation.transforms import TransformSettings
from zdebias.report.text import (
    generator_text,
    merged_text,
    sample_text,
    transform_text,
    worker_text,
)
from zdebias.settings_cli import CliOptions, InputArg, command

OutOpt = Annotated[str, typer.Option("--out", help="Output folder.")]
GeneratorOpt = Annotated[str, typer.Option("--generator", help="A trained generator folder.")]
TrainOpt = Annotated[
    str | None, typer.Option("--train", help="Training data (any supported input).")
]


def _train_set(train: str | None, read: ReadOptions) -> tuple[list[Any], str]:
    records, report = read_logged(require(train, "--train", "--data"), read, what="training")
    return records, report.task


def _emit_train(summary: dict[str, Any], cli: CliOptions) -> None:
    emit(
        {k: v for k, v in summary.items() if k != "log_history"},
        cli,
        lambda: generator_text(summary),
    )


@command(exclude=("limit",), renamed={"--data": "train"})
def train_generator_cmd(
    model: Annotated[
        str,
        typer.Option("--model", help="Causal LM: packaged alias (smollm2), local folder or hub."),
    ],
    out: OutOpt,
    settings: GeneratorSettings,
    read: ReadOptions,
    cli: CliOptions,
    train: TrainOpt = None,
) -> None:
    """Fine-tune a causal LM into a P → label → H data generator (L_MLE + λ·L_consistency)."""
    from zdebias.generation.trainer import train_generator

    check_output(out, cli)
    records, task = _train_set(train, read)
    with stdout_to_stderr():
        summary = train_generator(records, model, out, settings, task=task, progress=cli.progress)
    _emit_train(summary, cli)


@command(exclude=("limit",), renamed={"--data": "train"})
def debias_generator_cmd(
    generator: GeneratorOpt,
    out: OutOpt,
    zfilter: DebiasZFilterSettings,  # type: ignore[valid-type]  # first: its --seed aliases
    settings: DebiasSettings,
    read: ReadOptions,
    cli: CliOptions,
    train: TrainOpt = None,
) -> None:
    """z-filter the data, then fine-tune the generator: L_MLE(Z) + α·masked L_UL(Z⁻)."""
    from zdebias.generation.debias import zfilter_and_debias
    from zdebias.generation.format import GeneratorFormat

    if not GeneratorFormat.is_generator(generator):
        raise ConfigError(
            f"{generator}: not a generator folder; train one with `zdebias train-generator`"
        )
    check_output(out, cli)
    rows, _ = _train_set(train, read)
    with stdout_to_stderr():
        summary = zfilter_and_debias(generator, rows, out, settings, zfilter, progress=cli.progress)
    _emit_train(summary, cli)


@command
def sample_cmd(
    generator: Annotated[
        str,
        typer.Option(
            "--generator",
            help="A trained generator folder (--backend hf/vllm); the served model name "
            "(openai); an instruct model: smollm2, a folder or a hub name (local).",
        ),
    ],
    out: OutOpt,
    settings: SampleSettings,
    prompt: PromptSettings,
    read: ReadOptions,
    cli: CliOptions,
    premises: Annotated[
        str | None,
        typer.Option(
            "--premises",
            help="Premises (any supported input): hf/vllm write the label and hypothesis "
            "after each, in a seeded order (--per-premise forces the labels); openai/local "
            "prompt with them.",
        ),
    ] = None,
    examples: Annotated[
        str | None,
        typer.Option(
            "--examples",
            help="Labelled pairs for the few-shot examples and --avoid-biased "
            "(default: --premises).",
        ),
    ] = None,
    cells: Annotated[
        str | None,
        typer.Option(
            "--cells",
            help="With --premises (hf/vllm): fill these shortcut-breaking cells (`zdebias "
            "stats --cells` output, or a stats report): each cell's label forced, its feature "
            "steered and checked, its rows counted.",
        ),
    ] = None,
    measure_with: Annotated[
        str | None,
        typer.Option(
            "--measure-with",
            help="With --cells: D0, to report each cell's z before (D0) and after (D0 + samples).",
        ),
    ] = None,
) -> None:
    """Sample N unique (premise, label, hypothesis) records into resumable shards.

    On several machines or GPUs: `--worker I/N` each, then `zdebias sample merge OUT`."""
    from zdebias.generation.sample import sample_generator

    with stdout_to_stderr():
        summary = sample_generator(
            generator,
            out,
            settings,
            prompt=prompt,
            premises=premises,
            examples=examples,
            cells=cells,
            measure_with=measure_with,
            read=read,
            overwrite=cli.overwrite,
            check_out=lambda: check_output(out, cli),
            progress=cli.progress,
        )
    emit(
        summary, cli, lambda: worker_text(summary) if "worker" in summary else sample_text(summary)
    )


@command
def sample_merge_cmd(
    folder: Annotated[str, typer.Argument(help="A sampling folder holding worker-I-of-N folders.")],
    cli: CliOptions,
) -> None:
    """Merge the --worker I/N runs of FOLDER into samples.jsonl and summary.json."""
    from zdebias.generation.workers import merge_samples

    summary = merge_samples(folder)
    emit(summary, cli, merged_text(summary))


@command
def transform_cmd(
    input: InputArg,
    out: OutOpt,
    settings: TransformSettings,
    read: ReadOptions,
    cli: CliOptions,
    cells: Annotated[
        str | None,
        typer.Option(
            "--cells",
            help="Shortcut-breaking cells (`zdebias stats --cells` output, or a stats report): "
            "a pair that fills one gets meta.cell and meta.feature, and the summary counts "
            "the pairs per cell.",
        ),
    ] = None,
) -> None:
    """Rule-made transforms of the pairs' premises for the HANS heuristics (inversion,
    passive, drop-modifier, subsequence): DIR/transforms.jsonl and summary.json."""
    from zdebias.generation.transforms import transform_file
    from zdebias.stats.cells import load_cells

    path = require(input, "INPUT")
    chosen = load_cells(cells) if cells is not None else None  # checked before any output
    check_output(out, cli, published=True)
    records, _ = read_logged(path, read, what="input")
    summary = transform_file(
        records, out, settings, cells=chosen, overwrite=cli.overwrite, source=path
    )
    emit(summary, cli, lambda: transform_text(summary, out))


def register(app: typer.Typer) -> None:
    """Add the generator commands."""
    app.command("train-generator")(train_generator_cmd)
    app.command("debias-generator")(debias_generator_cmd)
    app.command("sample")(sample_cmd)
    app.command("sample-merge")(sample_merge_cmd)
    app.command("transform")(transform_cmd)
