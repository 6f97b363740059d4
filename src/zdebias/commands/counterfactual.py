"""``zdebias counterfactual``: AutoCAD rationales, infiller training, generation, metrics.

The options come from ``zdebias.counterfactual.settings``; each command is one call of
:mod:`zdebias.counterfactual.files` (or ``metrics_report``), which loads torch as it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from zdebias.commands._cli import check_output, emit, require, stdout_to_stderr
from zdebias.counterfactual import settings as cs
from zdebias.counterfactual.files import CounterfactualFiles
from zdebias.data.options import ReadOptions
from zdebias.generation.settings import ClientSettings
from zdebias.report.text import fields_text
from zdebias.settings_cli import CliOptions, InputArg, command


def _opt(flag: str, help: str) -> Any:
    return typer.Option(flag, help=help)


Classifier = Annotated[str, _opt("--classifier", "Classifier folder.")]
SplitFolder = Annotated[Path, _opt("--out", "Output folder: kept, rejected.jsonl, summary.json.")]
OptText = str | None


def _files(read: ReadOptions, cli: CliOptions) -> CounterfactualFiles:
    """The operations on files, with the command's reader settings and output policy."""
    return CounterfactualFiles(read, progress=cli.progress, overwrite=cli.overwrite)


@command(renamed={"--data": "input"})
def rationales(
    classifier: Classifier,
    out: Annotated[Path, _opt("--out", "Rationale records (JSONL).")],
    settings: cs.RationaleSettings,
    read: ReadOptions,
    cli: CliOptions,
    input: InputArg = None,
    dropped: Annotated[Path | None, _opt("--dropped", "Also write dropped records here.")] = None,
) -> None:
    """Pick rationale spans by gradient saliency for correctly, confidently predicted examples."""
    path = require(input, "INPUT", "--data")
    for target in [t for t in (out, dropped) if t is not None]:
        check_output(target, cli, file=True)
    with stdout_to_stderr():
        result = _files(read, cli).rationales(classifier, path, out, settings, dropped)
    emit(result, cli, lambda: fields_text(result, "n_input n_kept n_dropped out"))


@command(renamed={"--rationales": "train"})
def train(
    out: Annotated[Path, _opt("--out", "Output folder for the infiller.")],
    settings: cs.InfillSettings,
    read: ReadOptions,
    cli: CliOptions,
    train: Annotated[OptText, _opt("--train", "Rationale records from `rationales`.")] = None,
    dev: Annotated[OptText, _opt("--dev", "Dev rationales (best epoch, early stop).")] = None,
) -> None:
    """Fine-tune a label-controlled infiller: MLE + α·unlikelihood on rationale tokens."""
    path = require(train, "--train")
    with stdout_to_stderr():
        summary = _files(read, cli).train_infiller(path, out, settings, dev)
    emit(summary, cli, lambda: fields_text(summary, "arch n_train train_loss out"))


@command(renamed={"--data": "input"})
def generate(
    infiller: Annotated[str, _opt("--infiller", "Infiller folder (or a base model: baseline).")],
    classifier: Classifier,
    out: SplitFolder,
    settings: cs.SelectSettings,
    read: ReadOptions,
    cli: CliOptions,
    input: InputArg = None,
) -> None:
    """Fill spans for every other label, rebuild, and keep what the classifier agrees with."""
    path = require(input, "INPUT", "--data")
    check_output(out, cli, published=True)
    with stdout_to_stderr():
        summary = _files(read, cli).generate(infiller, classifier, path, out, settings)
    emit(summary, cli, lambda: fields_text(summary, "n_outputs n_kept flip_rate keep_rate"))


@command(renamed={"--data": "input"})
def metrics(
    settings: cs.MetricsSettings,
    cli: CliOptions,
    input: Annotated[
        OptText, typer.Argument(help="Counterfactuals: a `generate` folder or a file.")
    ] = None,
    classifier: Annotated[OptText, _opt("--classifier", "Flip rate by this classifier.")] = None,
    rationales: Annotated[OptText, _opt("--rationales", "Rationales to score vs --human.")] = None,
    human: Annotated[OptText, _opt("--human", "Human highlights: e-SNLI CSV or JSONL.")] = None,
    out: Annotated[Path | None, _opt("--out", "Also write the JSON here.")] = None,
) -> None:
    """Flip rate, distinct-1/2/3, perplexity, and rationale macro-F1 against human highlights."""
    from zdebias.counterfactual.metrics import metrics_report

    if out is not None:
        check_output(out, cli, file=True)
    with stdout_to_stderr():
        m = metrics_report(
            input, settings, classifier, rationales, human, out=out, progress=cli.progress
        )
    emit(m, cli, lambda: fields_text(m, "n_outputs flip_rate distinct_2 perplexity"))


@command
def prompt(
    generator: Annotated[
        str,
        _opt(
            "--generator",
            "Instruction model: the served model name (openai), or smollm2 / a folder (local).",
        ),
    ],
    classifier: Classifier,
    out: SplitFolder,
    settings: cs.PromptCounterfactualSettings,
    client: ClientSettings,
    read: ReadOptions,
    cli: CliOptions,
    input: InputArg = None,
) -> None:
    """Ask an instruction model for minimal edits to other labels; keep what the classifier
    agrees with (an alternative to the trained infiller; `metrics` reads the output)."""
    path = require(input, "INPUT")
    check_output(out, cli, published=True)
    with stdout_to_stderr():
        summary = _files(read, cli).prompt(generator, classifier, path, out, settings, client)
    emit(summary, cli, lambda: fields_text(summary, "n_outputs n_kept flip_rate"))


def register(app: typer.Typer) -> None:
    """Add the ``counterfactual`` command group."""
    group = typer.Typer(
        help="AutoCAD counterfactuals: rationales → label-controlled infiller → generate + "
        "post-select → metrics.",
        no_args_is_help=True,
    )
    group.command("rationales")(rationales)
    group.command("train")(train)
    group.command("generate")(generate)
    group.command("metrics")(metrics)
    group.command("prompt")(prompt)
    app.add_typer(group, name="counterfactual")
