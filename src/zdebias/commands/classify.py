"""Classifier commands: ``train-classifier``, ``predict``, ``confidence-filter``, ``evaluate``,
``compare``.

torch / transformers / scipy are imported inside the commands, never at module level.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from zdebias.commands._common import (
    ColumnsOpt,
    FormatOpt,
    LabelMapOpt,
    OnErrorOpt,
    TaskOpt,
    echo_json,
    open_input,
    report_skips,
)
from zdebias.errors import ConfigError

QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]
BatchOpt = Annotated[int, typer.Option("--batch-size", help="Examples per forward pass.")]
DeviceOpt = Annotated[str, typer.Option("--device", help="auto (GPU when available), cpu or cuda.")]


def _read(path: str, what: str, **options: Any) -> tuple[list[Any], dict[str, Any]]:
    ds = open_input(path, **options)
    records = list(ds)
    report_skips(ds)
    if not records:
        raise ConfigError(f"{path}: no labelled records in the {what} set")
    return records, ds.report.summary()


def sample_records(records: list[Any], n: int | None, seed: int) -> list[Any]:
    """A seeded random subset of ``n`` records, kept in file order (all when ``n`` is None)."""
    if n is None or n >= len(records):
        return records
    if n <= 0:
        raise ConfigError(f"sample size must be positive, got {n}")
    import numpy as np

    picked = np.sort(np.random.default_rng(seed).choice(len(records), size=n, replace=False))
    return [records[i] for i in picked]


def train_classifier_cmd(
    train: Annotated[str, typer.Option("--train", help="Training set (any supported input).")],
    out: Annotated[Path, typer.Option("--out", help="Folder for the trained classifier.")],
    dev: Annotated[
        str | None, typer.Option("--dev", help="Dev set: picks the best epoch, early stopping.")
    ] = None,
    model: Annotated[
        str, typer.Option("--model", help="Encoder: minilm, a local folder or a hub name.")
    ] = "minilm",
    loss: Annotated[
        str, typer.Option("--loss", help="ce, poe, learned-mixin, learned-mixin-h, conf-reg.")
    ] = "ce",
    bias_model: Annotated[
        Path | None,
        typer.Option(
            "--bias-model",
            help="Hypothesis-only classifier folder "
            "(the bias model of poe / learned-mixin / conf-reg).",
        ),
    ] = None,
    teacher_model: Annotated[
        Path | None,
        typer.Option(
            "--teacher-model",
            help="conf-reg teacher: a classifier trained with ce on the same data.",
        ),
    ] = None,
    input: Annotated[
        str | None,
        typer.Option(
            "--input", help="pair, hypothesis-only or text (default: pair for NLI, text otherwise)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 42,
    lr: Annotated[float, typer.Option("--lr", help="Peak learning rate.")] = 1e-5,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Training batch size.")] = 32,
    epochs: Annotated[float, typer.Option("--epochs", help="Training epochs.")] = 5.0,
    max_steps: Annotated[
        int, typer.Option("--max-steps", help="Stop after N steps (overrides --epochs).")
    ] = -1,
    warmup_steps: Annotated[
        int, typer.Option("--warmup-steps", help="Linear warm-up, then constant.")
    ] = 2000,
    max_length: Annotated[int, typer.Option("--max-length", help="Max tokens per input.")] = 128,
    patience: Annotated[
        int,
        typer.Option(
            "--patience", help="Stop after N evaluations without a better dev accuracy (0: never)."
        ),
    ] = 3,
    eval_steps: Annotated[
        int | None,
        typer.Option("--eval-steps", help="Evaluate every N steps instead of every epoch."),
    ] = None,
    beta: Annotated[float, typer.Option("--beta", help="PoE β (weight of log b).")] = 1.0,
    gamma: Annotated[float, typer.Option("--gamma", help="PoE γ (weight of CE(l, b)).")] = 0.0,
    entropy_weight: Annotated[
        float | None,
        typer.Option(
            "--entropy-weight",
            help="Learned-Mixin entropy penalty (default 0, or 0.03 for learned-mixin-h).",
        ),
    ] = None,
    sample: Annotated[
        int | None, typer.Option("--sample", help="Train on a seeded random N examples.")
    ] = None,
    dev_sample: Annotated[
        int | None, typer.Option("--dev-sample", help="Use a seeded random N dev examples.")
    ] = None,
    cross_fit: Annotated[
        int | None,
        typer.Option(
            "--cross-fit",
            help="With --input hypothesis-only: also "
            "write K-fold out-of-fold predictions for every training "
            "record to OUT/cross_fit_predictions.jsonl.",
        ),
    ] = None,
    keep_folds: Annotated[
        bool, typer.Option("--keep-folds", help="Keep the K fold models in OUT/folds/.")
    ] = False,
    device: DeviceOpt = "auto",
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace OUT.")] = False,
    quiet: QuietOpt = False,
    format: FormatOpt = None,
    task: TaskOpt = None,
    columns: ColumnsOpt = None,
    label_map: LabelMapOpt = None,
    on_error: OnErrorOpt = "raise",
) -> None:
    """Fine-tune a classifier (plain, hypothesis-only, PoE, Learned-Mixin, conf-reg)."""
    from zdebias.classify.losses import get_loss

    get_loss(loss)  # fail on a bad name before reading any data
    options = dict(
        format=format, task=task, columns=columns, label_map=label_map, on_error=on_error
    )
    train_records, train_report = _read(train, "training", **options)
    train_records = sample_records(train_records, sample, seed)
    dev_records = None
    if dev is not None:
        dev_records, _ = _read(dev, "dev", **options)
        dev_records = sample_records(dev_records, dev_sample, seed)
    if cross_fit is not None and input != "hypothesis-only":
        raise ConfigError("--cross-fit is for hypothesis-only models: add --input hypothesis-only")

    from zdebias.classify.train import cross_fit_predictions, train_classifier

    settings: dict[str, Any] = dict(
        model=model,
        task=task or train_report["task"],
        loss=loss,
        bias_model=bias_model,
        teacher_model=teacher_model,
        beta=beta,
        gamma=gamma,
        entropy_weight=entropy_weight,
        learning_rate=lr,
        batch_size=batch_size,
        epochs=epochs,
        max_steps=max_steps,
        warmup_steps=warmup_steps,
        max_length=max_length,
        patience=patience,
        eval_steps=eval_steps,
        device=None if device == "auto" else device,
        progress=not quiet,
    )
    metrics = train_classifier(
        train_records, dev_records, out, input=input, seed=seed, overwrite=overwrite, **settings
    )
    summary: dict[str, Any] = {
        "out": str(out),
        "n_train": metrics["n_train"],
        "n_dev": metrics["n_dev"],
        "steps": metrics["steps"],
        "best": metrics["best"],
        "train_samples_per_second": round(metrics["train_samples_per_second"], 2),
        "skipped": {"unlabelled": train_report["n_unlabelled"], "errors": train_report["n_errors"]},
    }
    if cross_fit is not None:
        oof_file = out / "cross_fit_predictions.jsonl"
        settings.pop("progress")
        recs = cross_fit_predictions(
            train_records,
            dev_records,
            oof_file,
            k=cross_fit,
            seed=seed,
            folds_dir=out / "folds" if keep_folds else None,
            progress=not quiet,
            **settings,
        )
        correct = sum(r.meta["hypo_only_pred"] == r.label for r in recs)
        summary["cross_fit"] = {
            "k": cross_fit,
            "file": str(oof_file),
            "n": len(recs),
            "out_of_fold_accuracy": correct / len(recs),
        }
    echo_json(summary)


def predict_cmd(
    model: Annotated[str, typer.Argument(help="Classifier folder (or hub name).")],
    path: Annotated[str, typer.Argument(help="Input set (any supported format).")],
    out: Annotated[Path, typer.Option("--out", help="Output JSONL (or .parquet).")],
    batch_size: BatchOpt = 64,
    device: DeviceOpt = "auto",
    quiet: QuietOpt = False,
    format: FormatOpt = None,
    task: TaskOpt = None,
    columns: ColumnsOpt = None,
    label_map: LabelMapOpt = None,
    on_error: OnErrorOpt = "raise",
) -> None:
    """Write each record with meta.pred and meta.probs (probability per label)."""
    records, report = _read(
        path,
        "input",
        format=format,
        task=task,
        columns=columns,
        label_map=label_map,
        on_error=on_error,
    )
    from zdebias.classify.predict import (
        hf_progress,
        load_classifier,
        predict_proba,
        with_predictions,
    )
    from zdebias.data.writers import write_records
    from zdebias.evaluation.suites import score_predictions

    with hf_progress(not quiet):
        clf = load_classifier(model, device=None if device == "auto" else device)
    probs = predict_proba(clf, records, batch_size=batch_size, progress=not quiet)
    n = write_records(with_predictions(records, probs, clf.labels, clf.input), out)
    summary: dict[str, Any] = {
        "out": str(out),
        "n": n,
        "labels": clf.labels,
        "input": clf.input or "auto",
    }
    try:
        scored = score_predictions(probs, clf.labels, records)
        summary["accuracy"] = scored["accuracy"]
        summary["mapping"] = scored["mapping"]
    except ConfigError as err:
        summary["accuracy"] = None
        summary["note"] = str(err)
    summary["skipped"] = {"unlabelled": report["n_unlabelled"], "errors": report["n_errors"]}
    echo_json(summary)


def confidence_filter_cmd(
    model: Annotated[
        str, typer.Option("--model", help="Classifier trained on the original data (SPEC §7).")
    ],
    data: Annotated[str, typer.Option("--data", help="Samples to filter.")],
    out: Annotated[
        Path, typer.Option("--out", help="Folder for kept.jsonl, rejected.jsonl, summary.json.")
    ],
    tau: Annotated[float, typer.Option("--tau", help="Keep samples with p(label) > tau.")] = 0.95,
    batch_size: BatchOpt = 64,
    device: DeviceOpt = "auto",
    quiet: QuietOpt = False,
    format: FormatOpt = None,
    task: TaskOpt = None,
    columns: ColumnsOpt = None,
    label_map: LabelMapOpt = None,
    on_error: OnErrorOpt = "raise",
) -> None:
    """Keep samples the classifier gives their own label with probability above tau."""
    records, report = _read(
        data,
        "input",
        format=format,
        task=task,
        columns=columns,
        label_map=label_map,
        on_error=on_error,
    )
    from zdebias.classify.confidence import confidence_filter, write_partition
    from zdebias.classify.predict import hf_progress, load_classifier

    with hf_progress(not quiet):
        clf = load_classifier(model, device=None if device == "auto" else device)
    kept, rejected, summary = confidence_filter(
        records, clf, tau=tau, batch_size=batch_size, progress=not quiet
    )
    summary["model"] = model
    summary["input"] = report
    paths = write_partition(kept, rejected, summary, out)
    echo_json(
        {
            **{k: v for k, v in summary.items() if k != "input"},
            "files": {k: str(v) for k, v in paths.items()},
        }
    )


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
    name: Annotated[
        str | None, typer.Option("--name", help="Method name for tables (default: model).")
    ] = None,
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Markdown tables (default: OUT with .md).")
    ] = None,
    average: Annotated[
        bool, typer.Option("--average", help="Add an Avg. column (Table 5 style).")
    ] = False,
    predictions: Annotated[
        Path | None,
        typer.Option(
            "--predictions",
            help="Also write each run's predictions per suite to this folder (runI-SUITE.jsonl).",
        ),
    ] = None,
    batch_size: BatchOpt = 64,
    device: DeviceOpt = "auto",
    quiet: QuietOpt = False,
    on_error: OnErrorOpt = "raise",
) -> None:
    """Accuracy of one or more runs on evaluation suites; mean ± std over runs."""
    from zdebias.data.writers import atomic_open, write_json
    from zdebias.evaluation.suites import evaluate_models, parse_suite
    from zdebias.evaluation.tables import render_markdown

    suites = [parse_suite(s, on_error=on_error) for s in suite]
    doc = evaluate_models(
        models,
        suites,
        name=name,
        batch_size=batch_size,
        progress=not quiet,
        device=None if device == "auto" else device,
        predictions_dir=predictions,
    )
    for info in doc["suites"]:
        skipped = info["n_skipped_unlabelled"] + info["n_skipped_errors"]
        if skipped:
            sys.stderr.write(
                f"{info['path']}: skipped {info['n_skipped_unlabelled']} "
                f"unlabelled and {info['n_skipped_errors']} bad rows\n"
            )
    write_json(doc, out)
    text = render_markdown(doc, average=average)
    md_path = markdown or out.with_suffix(".md")
    with atomic_open(md_path) as fh:
        fh.write(text)
    typer.echo(text)
    typer.echo(f"wrote {out} and {md_path}")


def compare_cmd(
    results: Annotated[
        list[str],
        typer.Argument(help="Results JSON files of zdebias evaluate; the first is the baseline."),
    ],
    out: Annotated[Path | None, typer.Option("--out", help="Comparison JSON.")] = None,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Markdown file.")] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level.")] = 0.05,
    welch: Annotated[
        bool,
        typer.Option("--welch", help="Welch's t-test (unequal variances) instead of Student's."),
    ] = False,
    average: Annotated[bool, typer.Option("--average", help="Also test the average.")] = False,
    detail: Annotated[
        bool, typer.Option("--detail", help="Also test per-heuristic sub-results (HANS).")
    ] = False,
) -> None:
    """Two-tailed t-test per suite of each results file against the first."""
    if len(results) < 2:
        raise ConfigError("compare needs at least two results files: BASELINE OTHER...")
    from zdebias.data.writers import atomic_open, write_json
    from zdebias.evaluation.significance import compare_results, comparison_markdown
    from zdebias.evaluation.suites import read_results
    from zdebias.evaluation.tables import suite_names, summary_table, table_markdown

    docs = [read_results(p) for p in results]
    keys = None
    if detail:
        keys = [k for k in docs[0].get("summary", {})]
    comparison = compare_results(docs, keys=keys, alpha=alpha, equal_var=not welch, average=average)
    table = summary_table(
        docs, columns=suite_names(docs[:1]), average=average, comparison=comparison
    )
    text = "\n".join(
        [
            table_markdown(table),
            "",
            f"{'*'} p < {alpha} (two-tailed {comparison['test']} t-test against "
            f"{comparison['baseline']}); accuracy in %, mean±std over runs.",
            "",
            comparison_markdown(comparison),
            "",
        ]
    )
    typer.echo(text)
    if out is not None:
        write_json({"table": table, **comparison}, out)
    if markdown is not None:
        with atomic_open(markdown) as fh:
            fh.write(text)


def register(app: typer.Typer) -> None:
    """Add the classifier and evaluation commands."""
    app.command("train-classifier")(train_classifier_cmd)
    app.command("predict")(predict_cmd)
    app.command("confidence-filter")(confidence_filter_cmd)
    app.command("evaluate")(evaluate_cmd)
    app.command("compare")(compare_cmd)
