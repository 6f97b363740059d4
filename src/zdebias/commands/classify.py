"""``train-classifier``, ``predict``, ``confidence-filter``, ``evaluate``, ``compare``.

Options are generated from the settings of ``zdebias.classify.settings``; torch,
transformers and scipy are imported inside the commands, never at module level.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from zdebias.classify.settings import (
    ClassifierSettings,
    CompareSettings,
    ConfidenceSettings,
    EvaluateSettings,
    InferenceSettings,
)
from zdebias.commands._cli import check_output, emit, read_input, require, stdout_to_stderr
from zdebias.data.options import ReadOptions
from zdebias.report.text import train_text
from zdebias.settings_cli import CliOptions, InputArg, command

log = logging.getLogger("zdebias")
MarkdownOpt = Annotated[
    Path | None, typer.Option("--markdown", help="Markdown tables (evaluate: default OUT.md).")
]


def _skipped(report: Any) -> dict[str, int]:
    return {"unlabelled": report.n_unlabelled, "errors": report.n_errors}


@command
def train_classifier_cmd(
    train: Annotated[str, typer.Option("--train", help="Training set (any supported input).")],
    out: Annotated[Path, typer.Option("--out", help="Folder for the trained classifier.")],
    settings: ClassifierSettings,
    read: ReadOptions,
    cli: CliOptions,
    dev: Annotated[
        str | None, typer.Option("--dev", help="Dev set: picks the best epoch, early stopping.")
    ] = None,
) -> None:
    """Fine-tune a classifier (plain, hypothesis-only, PoE, Learned-Mixin, conf-reg)."""
    settings.check()
    check_output(out, cli)
    records, report = read_input(train, read, what="training")
    dev_records = read_input(dev, read, what="dev")[0] if dev is not None else None
    from zdebias.classify.train import train_classifier

    task = read.task or report.task
    with stdout_to_stderr():  # HF's log lines: stdout carries only the result
        metrics = train_classifier(
            records,
            dev_records,
            out,
            settings,
            task=task,
            progress=cli.progress,
            overwrite=cli.overwrite,
        )
    summary: dict[str, Any] = {
        "out": str(out),
        **{k: metrics[k] for k in ("n_train", "n_dev", "steps", "best")},
        "train_samples_per_second": round(metrics["train_samples_per_second"], 2),
        "skipped": _skipped(report),
    }
    if "cross_fit" in metrics:
        summary["cross_fit"] = metrics["cross_fit"]
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
    check_output(out, cli)
    records, report = read_input(require(input, "INPUT"), read, what="input")
    from zdebias.data.writers import write_records
    from zdebias.evaluation.suites import predict_records

    predicted, info = predict_records(model, records, settings, progress=cli.progress)
    n = write_records(predicted, out)
    summary = {"out": str(out), "n": n, **info, "skipped": _skipped(report)}
    acc = "-" if summary["accuracy"] is None else f"{summary['accuracy']:.4f}"
    emit(summary, cli, f"predicted {n:,} records, accuracy {acc}\nwrote {out}")


@command(renamed={"--data": "input", "--model": "classifier"})
def confidence_filter_cmd(
    *,
    input: InputArg = None,
    classifier: Annotated[
        str | None,
        typer.Option("--classifier", help="Classifier trained on the original data (SPEC §7)."),
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
    records, report = read_input(path, read, what="input")
    from zdebias.classify.confidence import confidence_filter
    from zdebias.data.writers import publish_files

    kept, rejected, summary = confidence_filter(records, model, settings, progress=cli.progress)
    summary.update(model=model, input=report.summary())
    files = {"kept.jsonl": kept, "rejected.jsonl": rejected, "summary.json": summary}
    paths = publish_files(out, files, overwrite=cli.overwrite)
    result = {k: v for k, v in summary.items() if k != "input"}
    result["files"] = {name.split(".")[0]: str(p) for name, p in paths.items()}
    text = f"kept {len(kept):,} of {len(records):,} (p(label) > {settings.threshold})\nwrote {out}"
    emit(result, cli, text)


@command(exclude=("columns", "label_map", "limit"))
def evaluate_cmd(
    models: Annotated[list[str], typer.Argument(help="Classifier folders: one per run (seed).")],
    suite: Annotated[
        list[str],
        typer.Option(
            "--suite",
            help="NAME=PATH, repeatable (PATH: any supported input, DIR::SPLIT for triplets).",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Results JSON.")],
    settings: EvaluateSettings,
    read: ReadOptions,
    cli: CliOptions,
    name: Annotated[
        str | None, typer.Option("--name", help="Method name for tables (default: model).")
    ] = None,
    markdown: MarkdownOpt = None,
    predictions: Annotated[
        Path | None,
        typer.Option("--predictions", help="Also write each run's predictions per suite here."),
    ] = None,
) -> None:
    """Accuracy of one or more runs on evaluation suites; mean ± std over runs."""
    from zdebias.data.writers import publish_folder, write_together
    from zdebias.evaluation.suites import evaluate_models, parse_suite
    from zdebias.evaluation.tables import render_markdown

    md_path = markdown or out.with_suffix(".md")
    for path in (out, md_path):
        check_output(path, cli)
    if predictions is not None:
        check_output(predictions, cli, published=True)
    options = dict(format=read.format, task=read.task, split=read.split, on_error=read.on_error)
    suites = [parse_suite(s, **options) for s in suite]

    def run(folder: Path | None) -> dict[str, Any]:
        return evaluate_models(
            models, suites, settings, name=name, progress=cli.progress, predictions_dir=folder
        )

    doc = (
        run(None)
        if predictions is None
        else publish_folder(predictions, run, overwrite=cli.overwrite)
    )
    for info in doc["suites"]:
        skipped = (info["path"], info["n_skipped_unlabelled"], info["n_skipped_errors"])
        if skipped[1] + skipped[2]:
            log.warning("%s: skipped %d unlabelled and %d bad rows", *skipped)
    text = render_markdown(doc, average=settings.average)
    write_together({out: doc, md_path: text})
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
    """Two-tailed t-test per suite of each results file against the first."""
    for path in (out, markdown):
        if path is not None:
            check_output(path, cli)
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
