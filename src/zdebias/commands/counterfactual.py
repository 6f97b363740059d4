"""``zdebias counterfactual``: AutoCAD rationales, infiller training, generation, metrics.

The options come from ``zdebias.counterfactual.settings``; torch and transformers are imported
inside the commands.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from zdebias.commands._cli import (
    CliOptions,
    InputArg,
    check_output,
    command,
    emit,
    report_skips,
    require,
)
from zdebias.counterfactual.settings import (
    InfillSettings,
    MetricsSettings,
    RationaleSettings,
    SelectSettings,
)
from zdebias.data.options import ReadOptions
from zdebias.errors import ConfigError

log = logging.getLogger("zdebias")
cf_app = typer.Typer(
    name="counterfactual",
    help="AutoCAD counterfactuals: rationales → label-controlled infiller → generate + "
    "post-select → metrics.",
    no_args_is_help=True,
)


def _hidden(flag: str) -> Any:
    return typer.Option(flag, hidden=True)


def _opt(flag: str, help: str) -> Any:
    return typer.Option(flag, help=help)


OldData = Annotated[str | None, _hidden("--data")]
Classifier = Annotated[str, _opt("--classifier", "Classifier folder.")]
OptText = str | None


def _old(value: Any, old: str, new: str) -> Any:
    if value:
        log.warning("%s is deprecated; use %s", old, new)
    return value


def _stdout_to_stderr() -> Any:
    """Library chatter (HF Trainer logs, progress) goes to stderr: stdout is the result."""
    return contextlib.redirect_stdout(sys.stderr)


def _classifier(path: str) -> Any:
    from zdebias.classify.predict import load_classifier

    return load_classifier(path)


def _read(path: str, read: ReadOptions, **kw: Any) -> tuple[list[Any], Any]:
    records, report = read.read(path, **kw)
    report_skips(report)
    return records, report


def _text(result: dict[str, Any], *keys: str) -> str:
    return "  ".join(f"{k}: {result[k]}" for k in keys if result.get(k) is not None)


@cf_app.command("rationales")
@command
def rationales(
    classifier: Classifier,
    out: Annotated[Path, _opt("--out", "Rationale records (JSONL).")],
    settings: RationaleSettings,
    read: ReadOptions,
    cli: CliOptions,
    input: InputArg = None,
    dropped: Annotated[Path | None, _opt("--dropped", "Also write dropped records here.")] = None,
    any_prediction: Annotated[bool, _hidden("--any-prediction")] = False,
    data: OldData = None,
) -> None:
    """Pick rationale spans by gradient saliency for correctly, confidently predicted examples."""
    from zdebias.counterfactual.rationales import extract_rationales
    from zdebias.data.writers import write_records

    path = require(input or _old(data, "--data", "INPUT"), "INPUT", "--data")
    if _old(any_prediction, "--any-prediction", "--no-require-correct"):
        settings = RationaleSettings.of(settings, require_correct=False)
    for target in (out, dropped):
        if target is not None:
            check_output(target, cli)
    records, report = _read(path, read)
    with _stdout_to_stderr():
        clf = _classifier(classifier)
        kept, drop = extract_rationales(clf, records, settings, progress=cli.progress)
    write_records(kept, out)
    if dropped is not None:
        write_records(drop, dropped)
    codes = ("mispredicted", "low-confidence", "no-rationale")
    n_spans = sum(len(v) for r in kept for v in r.meta["rationales"].values())
    n_words = sum(
        len(s.split()) for r in kept for v in r.meta["rationale_text"].values() for s in v
    )
    result = {
        "input": path,
        "out": str(out),
        "n_input": len(records),
        "n_skipped_unlabelled": report.n_unlabelled,
        "n_skipped_errors": report.n_errors,
        "n_kept": len(kept),
        "n_dropped": len(drop),
        "dropped_by": {c: sum(r.meta["dropped_by"] == c for r in drop) for c in codes},
        "mean_spans": round(n_spans / len(kept), 3) if kept else 0.0,
        "mean_rationale_words": round(n_words / len(kept), 3) if kept else 0.0,
        **settings.model_dump(exclude={"batch_size", "require_correct"}),
    }
    emit(result, cli, lambda: _text(result, "n_input", "n_kept", "n_dropped", "out"))


@cf_app.command("train")
@command
def train(
    out: Annotated[Path, _opt("--out", "Output folder for the infiller.")],
    settings: InfillSettings,
    read: ReadOptions,
    cli: CliOptions,
    train: Annotated[OptText, _opt("--train", "Rationale records from `rationales`.")] = None,
    dev: Annotated[OptText, _opt("--dev", "Dev rationales (best epoch, early stop).")] = None,
    rationales: Annotated[str | None, _hidden("--rationales")] = None,
) -> None:
    """Fine-tune a label-controlled infiller: MLE + α·unlikelihood on rationale tokens."""
    from zdebias.counterfactual.trainer import train_infiller
    from zdebias.data.labels import get_task

    path = require(train or _old(rationales, "--rationales", "--train"), "--train")
    records, report = _read(path, read, what="training")
    dev_records = None
    if dev is not None:
        dev_read = ReadOptions(task=read.task or report.task, on_error=read.on_error)
        dev_records, _ = _read(dev, dev_read)
    with _stdout_to_stderr():
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
    emit(summary, cli, lambda: _text(summary, "arch", "n_train", "train_loss", "out"))


@cf_app.command("generate")
@command
def generate(
    infiller: Annotated[str, _opt("--infiller", "Infiller folder (or a base model: baseline).")],
    classifier: Classifier,
    out: Annotated[Path, _opt("--out", "Output folder: kept, rejected.jsonl, summary.json.")],
    settings: SelectSettings,
    read: ReadOptions,
    cli: CliOptions,
    input: InputArg = None,
    free: Annotated[bool, _hidden("--free")] = False,
    data: OldData = None,
) -> None:
    """Fill spans for every other label, rebuild, and keep what the classifier agrees with."""
    from zdebias.counterfactual.model import load_infiller
    from zdebias.counterfactual.select import generate_counterfactuals
    from zdebias.data.writers import publish_files

    path = require(input or _old(data, "--data", "INPUT"), "INPUT", "--data")
    if _old(free, "--free", "--no-constrained"):
        settings = SelectSettings.of(settings, constrained=False)
    check_output(out, cli)
    records, _ = _read(path, read)
    with _stdout_to_stderr():
        inf, clf = load_infiller(infiller), _classifier(classifier)
        kept, rejected, summary = generate_counterfactuals(
            inf, clf, records, settings, path=path, progress=cli.progress
        )
    summary = {"input": path, "infiller": infiller, "classifier": classifier, **summary}
    files = {"kept.jsonl": kept, "rejected.jsonl": rejected, "summary.json": summary}
    publish_files(out, files, overwrite=cli.overwrite)
    emit(summary, cli, lambda: _text(summary, "n_outputs", "n_kept", "flip_rate", "keep_rate"))


@cf_app.command("metrics")
@command
def metrics(
    settings: MetricsSettings,
    cli: CliOptions,
    input: Annotated[
        OptText, typer.Argument(help="Counterfactuals: a `generate` folder or a file.")
    ] = None,
    classifier: Annotated[OptText, _opt("--classifier", "Flip rate by this classifier.")] = None,
    rationales: Annotated[OptText, _opt("--rationales", "Rationales to score vs --human.")] = None,
    human: Annotated[OptText, _opt("--human", "Human highlights: e-SNLI CSV or JSONL.")] = None,
    out: Annotated[Path | None, _opt("--out", "Also write the JSON here.")] = None,
    data: OldData = None,
) -> None:
    """Flip rate, distinct-1/2/3, perplexity, and rationale macro-F1 against human highlights."""
    from zdebias.counterfactual.metrics import (
        counterfactual_metrics,
        rationale_agreement,
        read_human_rationales,
    )
    from zdebias.data.writers import write_json

    input = input or _old(data, "--data", "INPUT")
    if input is None and rationales is None:
        raise ConfigError("give INPUT (counterfactuals) and/or --rationales with --human")
    if (rationales is None) != (human is None):
        raise ConfigError("--rationales and --human go together")
    if out is not None:
        check_output(out, cli)
    result: dict[str, Any] = {}
    if input is not None:
        path = Path(input)
        if path.is_dir() and not (path / "kept.jsonl").exists():
            raise ConfigError(f"{path}: not a `generate` output folder (no kept.jsonl)")
        files = [path / "kept.jsonl", path / "rejected.jsonl"] if path.is_dir() else [path]
        records = [r for f in files if f.exists() for r in _read(str(f), ReadOptions())[0]]
        with _stdout_to_stderr():
            clf = _classifier(classifier) if classifier else None
            m = counterfactual_metrics(records, settings, classifier=clf, progress=cli.progress)
        result.update(m)
        result["n_kept"] = sum(1 for r in records if "rejected_by" not in r.meta)
        result["input"] = input
    if rationales is not None and human is not None:
        recs, _ = _read(rationales, ReadOptions())
        result.update(rationale_agreement(recs, read_human_rationales(human)))
    if out is not None:
        write_json(result, out)
    emit(result, cli, lambda: _text(result, "n_outputs", "flip_rate", "distinct_2", "perplexity"))


def register(app: typer.Typer) -> None:
    """Add the ``counterfactual`` command group."""
    app.add_typer(cf_app, name="counterfactual")
