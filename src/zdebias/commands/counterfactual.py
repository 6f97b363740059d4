"""``zdebias counterfactual``: AutoCAD rationales, infiller training, generation, metrics.

The options come from ``zdebias.counterfactual.settings``; torch and transformers are imported
inside the commands.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from zdebias.commands._cli import check_output, emit, read_input, require, stdout_to_stderr
from zdebias.counterfactual import settings as cs
from zdebias.data.options import ReadOptions
from zdebias.generation.settings import ClientSettings
from zdebias.report.text import fields_text
from zdebias.settings_cli import CliOptions, InputArg, command

log = logging.getLogger("zdebias")
cf_app = typer.Typer(
    help="AutoCAD counterfactuals: rationales → label-controlled infiller → generate + "
    "post-select → metrics.",
    no_args_is_help=True,
)


def _opt(flag: str, help: str) -> Any:
    return typer.Option(flag, help=help)


Classifier = Annotated[str, _opt("--classifier", "Classifier folder.")]
OptText = str | None


@cf_app.command("rationales")
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
    from zdebias.counterfactual.rationales import extract_rationales, rationale_summary
    from zdebias.data.writers import write_together

    path = require(input, "INPUT", "--data")
    for target in [t for t in (out, dropped) if t is not None]:
        check_output(target, cli)
    records, report = read_input(path, read, what="input")
    with stdout_to_stderr():
        kept, drop = extract_rationales(classifier, records, settings, progress=cli.progress)
    write_together({out: kept, **({dropped: drop} if dropped is not None else {})})
    summary = rationale_summary(kept, drop, settings, n_input=len(records), read=report)
    result = {"input": path, "out": str(out), **summary}
    emit(result, cli, lambda: fields_text(result, "n_input n_kept n_dropped out"))


@cf_app.command("train")
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
    from zdebias.counterfactual.trainer import train_infiller
    from zdebias.data.labels import get_task

    path = require(train, "--train")
    records, report = read_input(path, read, what="training")
    dev_read = ReadOptions(task=read.task or report.task, on_error=read.on_error)
    dev_records = read_input(dev, dev_read)[0] if dev is not None else None
    with stdout_to_stderr():
        summary = train_infiller(
            records,
            out,
            settings,
            labels=list(get_task(read.task or report.task).labels),
            dev=dev_records,
            path=path,
            overwrite=cli.overwrite,
            progress=cli.progress,
        )
    summary.pop("history", None)
    emit(summary, cli, lambda: fields_text(summary, "arch n_train train_loss out"))


@cf_app.command("generate")
@command(renamed={"--data": "input"})
def generate(
    infiller: Annotated[str, _opt("--infiller", "Infiller folder (or a base model: baseline).")],
    classifier: Classifier,
    out: Annotated[Path, _opt("--out", "Output folder: kept, rejected.jsonl, summary.json.")],
    settings: cs.SelectSettings,
    read: ReadOptions,
    cli: CliOptions,
    input: InputArg = None,
) -> None:
    """Fill spans for every other label, rebuild, and keep what the classifier agrees with."""
    from zdebias.counterfactual.select import generate_counterfactuals
    from zdebias.data.writers import publish_files

    path = require(input, "INPUT", "--data")
    check_output(out, cli, published=True)
    records, _ = read_input(path, read, what="input")
    with stdout_to_stderr():
        kept, rejected, summary = generate_counterfactuals(
            infiller, classifier, records, settings, path=path, progress=cli.progress
        )
    summary = {"input": path, "infiller": infiller, "classifier": classifier, **summary}
    files = {"kept.jsonl": kept, "rejected.jsonl": rejected, "summary.json": summary}
    publish_files(out, files, overwrite=cli.overwrite)
    emit(summary, cli, lambda: fields_text(summary, "n_outputs n_kept flip_rate keep_rate"))


@cf_app.command("metrics")
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
    from zdebias.data.writers import write_json

    if out is not None:
        check_output(out, cli)
    with stdout_to_stderr():
        m = metrics_report(input, settings, classifier, rationales, human, progress=cli.progress)
    if out is not None:
        write_json(m, out)
    emit(m, cli, lambda: fields_text(m, "n_outputs flip_rate distinct_2 perplexity"))


@cf_app.command("prompt")
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
    out: Annotated[Path, _opt("--out", "Output folder: kept, rejected.jsonl, summary.json.")],
    settings: cs.PromptCounterfactualSettings,
    client: ClientSettings,
    read: ReadOptions,
    cli: CliOptions,
    input: InputArg = None,
) -> None:
    """Ask an instruction model for minimal edits to other labels; keep what the classifier
    agrees with (an alternative to the trained infiller; `metrics` reads the output)."""
    from zdebias.counterfactual.prompted import prompt_counterfactuals
    from zdebias.data.writers import publish_files

    path = require(input, "INPUT")
    check_output(out, cli, published=True)
    records, _ = read_input(path, read, what="input")
    with stdout_to_stderr():
        kept, rejected, summary = prompt_counterfactuals(
            generator,
            classifier,
            records,
            settings,
            client=client,
            path=path,
            progress=cli.progress,
        )
    summary = {"input": path, "classifier": classifier, **summary}
    files = {"kept.jsonl": kept, "rejected.jsonl": rejected, "summary.json": summary}
    publish_files(out, files, overwrite=cli.overwrite)
    emit(summary, cli, lambda: fields_text(summary, "n_outputs n_kept flip_rate"))


def register(app: typer.Typer) -> None:
    """Add the ``counterfactual`` command group."""
    app.add_typer(cf_app, name="counterfactual")
