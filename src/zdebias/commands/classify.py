"""``train-classifier``, ``predict``, ``confidence-filter``, ``evaluate``, ``compare``.

Options are generated from the settings of ``zdebias.classify.settings`` and
``zdebias.evaluation.settings``; each command is one call of
:class:`zdebias.evaluation.files.EvaluationFiles` (``compare``: ``compare_files``), which
imports torch, transformers and scipy only when it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from zdebias.classify.settings import ClassifierSettings, ConfidenceSettings, InferenceSettings
from zdebias.commands._cli import check_output, emit, require, stdout_to_stderr
from zdebias.data.options import ReadOptions, counted
from zdebias.evaluation.files import EvaluationFiles, markdown_path
from zdebias.evaluation.settings import CompareSettings, EvaluateSettings
from zdebias.report.text import train_text
from zdebias.settings_cli import CliOptions, InputArg, command

MarkdownOpt = Annotated[
    Path | None, typer.Option("--markdown", help="Markdown tables (evaluate: default OUT.md).")
]
TrainSet = Annotated[str, typer.Option("--train", help="Training set (any supported input).")]
DevSet = Annotated[
    str | None, typer.Option("--dev", help="Dev set: picks the best epoch, early stopping.")
]
MethodName = Annotated[
    str | None, typer.Option("--name", help="Method name for tables (default: model).")
]


def _files(read: ReadOptions, cli: CliOptions) -> EvaluationFiles:
    """The operations on files, with the command's reader settings and output policy."""
    return EvaluationFiles(read, progress=cli.progress, overwrite=cli.overwrite)


@command
def train_classifier_cmd(
    train: TrainSet,
    out: Annotated[Path, typer.Option("--out", help="Folder for the trained classifier.")],
    settings: ClassifierSettings,
    read: ReadOptions,
    cli: CliOptions,
    dev: DevSet = None,
) -> None:
    """Fine-tune a classifier (plain, hypothesis-only, PoE, Learned-Mixin, conf-reg)."""
    settings.check()
    check_output(out, cli)
    with stdout_to_stderr():  # HF's log lines: stdout carries only the result
        summary = _files(read, cli).train_classifier(train, dev, out, settings)
    emit(summary, cli, lambda: train_text(summary))


@command
def predict_cmd(
    model: Annotated[str, typer.Argument(help="Classifier folder (or hub name).")],
    input: InputArg,
    out: Annotated[Path, typer.Option("--out", help="Output JSONL (or .parquet).")],
    settings: InferenceSettings,
    read: ReadOptions,
    cli: CliOptions,
) -> None:
    """Write each record with meta.pred and meta.probs (probability per label)."""
    check_output(out, cli, file=True)
    path = require(input, "INPUT")
    summary = _files(read, cli).predict(model, path, out, settings)
    acc = "-" if summary["accuracy"] is None else f"{summary['accuracy']:.4f}"
    n = counted(summary["n"], "record")
    emit(summary, cli, f"predicted {n}, accuracy {acc}\nwrote {out}")


@command(renamed={"--data": "input", "--model": "classifier"})
def confidence_filter_cmd(
    *,
    input: InputArg = None,
    classifier: Annotated[
        str | None,
        typer.Option(
            "--classifier",
            help="The judge: a classifier folder, trained on the original data (D0, as in GD-NLI "
            "§2.2.2) or on debiased data.",
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Folder for kept.jsonl, rejected.jsonl, summary.json.")
    ],
    settings: ConfidenceSettings,
    read: ReadOptions,
    cli: CliOptions,
) -> None:
    """Keep samples the classifier gives their own label with probability above the threshold."""
    path = require(input, "INPUT", "--data")
    model = require(classifier, "--classifier", "--model")
    check_output(out, cli, published=True)
    result = _files(read, cli).confidence_filter(path, model, out, settings)
    kept, n = result["n_kept"], result["n_input"]
    rule = f"p(label) > {settings.threshold}"
    if settings.rule == "delta-p":
        rule = f"p(label) rises by more than {settings.delta}"
    emit(result, cli, f"kept {kept:,} of {n:,} ({rule})\nwrote {out}")


@command
def evaluate_cmd(
    models: Annotated[list[str], typer.Argument(help="Classifier folders: one per run (seed).")],
    suite: Annotated[
        list[str],
        typer.Option(
            "--suite",
            help="NAME=PATH, repeatable (PATH: any supported input, DIR::SPLIT for triplets, "
            "PATH::KEY=VALUE;... for its own reader options).",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Results JSON.")],
    settings: EvaluateSettings,
    read: ReadOptions,
    cli: CliOptions,
    name: MethodName = None,
    markdown: MarkdownOpt = None,
    predictions: Annotated[
        Path | None,
        typer.Option("--predictions", help="Also write each run's predictions per suite here."),
    ] = None,
) -> None:
    """Accuracy of one or more runs on evaluation suites; mean ± std over runs."""
    md_path = markdown_path(out, markdown)
    for path in (out, md_path):
        check_output(path, cli, file=True)
    if predictions is not None:
        check_output(predictions, cli, published=True)
    doc, text = _files(read, cli).evaluate(
        models,
        suite,
        out,
        settings,
        name=name,
        markdown=md_path,
        predictions=predictions,
    )
    emit(doc, cli, f"{text}\nwrote {out} and {md_path}")


@command
def compare_cmd(
    results: Annotated[
        list[str],
        typer.Argument(help="Results JSON files of zdebias evaluate; the first is the baseline."),
    ],
    settings: CompareSettings,
    cli: CliOptions,
    out: Annotated[Path | None, typer.Option("--out", help="Comparison JSON.")] = None,
    markdown: MarkdownOpt = None,
) -> None:
    """Test each results file against the first, suite by suite: paired t over shared seeds,
    Welch's t otherwise, McNemar's for single runs; 95 % intervals, Holm-adjusted p."""
    for path in (out, markdown):
        if path is not None:
            check_output(path, cli, file=True)
    from zdebias.data.writers import write_together
    from zdebias.evaluation.significance import compare_files

    result, text = compare_files(results, settings)
    write_together({path: doc for path, doc in ((out, result), (markdown, text)) if path})
    emit(result, cli, text)


def register(app: typer.Typer) -> None:
    """Add the classifier and evaluation commands."""
    app.command("train-classifier")(train_classifier_cmd)
    app.command("predict")(predict_cmd)
    app.command("confidence-filter")(confidence_filter_cmd)
    app.command("evaluate")(evaluate_cmd)
    app.command("compare")(compare_cmd)
