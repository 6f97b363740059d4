"""The classifier and evaluation operations on files, as the commands run them.

:class:`Files` holds what every operation on files shares: the reader settings of its inputs
(a skipped row is always told: :func:`~zdebias.data.options.read_logged`), whether it may
replace an earlier output, progress bars. Each method reads its inputs, runs the operation on
records (:func:`~zdebias.classify.train.train_classifier`,
:func:`~zdebias.classify.confidence.confidence_filter`,
:func:`~zdebias.evaluation.suites.predict_records`,
:func:`~zdebias.evaluation.suites.evaluate_models`), writes its outputs and returns what the
command prints, so a Python user gets what the command gets::

    files = Files(ReadOptions(task="nli"), overwrite=True)
    files.train_classifier("train.jsonl", "dev.jsonl", "runs/clf", ClassifierSettings())
    files.confidence_filter("generated.jsonl", "runs/clf", "runs/conf", ConfidenceSettings())

:class:`~zdebias.counterfactual.files.CounterfactualFiles` adds the counterfactual
operations. torch, transformers and scipy load only when an operation runs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zdebias.classify.settings import (
    ClassifierSettings,
    ConfidenceSettings,
    EvaluateSettings,
    InferenceSettings,
)
from zdebias.data.options import ReadOptions, counted, read_logged, warn_repeated_ids
from zdebias.data.schema import Record
from zdebias.data.where import where_text

if TYPE_CHECKING:
    from zdebias.data import ReadReport

log = logging.getLogger("zdebias")


def markdown_path(out: str | Path, markdown: str | Path | None = None) -> Path:
    """Where ``evaluate`` writes its Markdown tables: ``markdown``, else ``OUT.md`` beside
    the results JSON ``out``."""
    return Path(markdown) if markdown is not None else Path(out).with_suffix(".md")


def _skipped(report: ReadReport) -> dict[str, int]:
    return {"unlabelled": report.n_unlabelled, "errors": report.n_errors}


class Files:
    """Operations on files: inputs read with ``read``, an output replaced only with
    ``overwrite`` (and then only one zdebias wrote), progress bars with ``progress``."""

    def __init__(
        self, read: ReadOptions | None = None, *, progress: bool = True, overwrite: bool = False
    ) -> None:
        self.read = read or ReadOptions()
        self.progress = progress
        self.overwrite = overwrite

    def records(
        self, path: str, what: str | None = None, read: ReadOptions | None = None
    ) -> tuple[list[Record], ReadReport]:
        """The records of ``path`` (:func:`~zdebias.data.options.read_logged`, with ``read``
        or these files' reader settings) and the reader's report."""
        return read_logged(path, read or self.read, what=what)

    def publish_partition(
        self, out: str | Path, kept: Sequence[Record], rejected: Sequence[Record], summary: Any
    ) -> dict[str, Path]:
        """Publish the folder ``out`` of a split, all or nothing: ``kept.jsonl``,
        ``rejected.jsonl`` and ``summary.json``; returns each file's path by name."""
        from zdebias.data.writers import publish_files

        files = {"kept.jsonl": kept, "rejected.jsonl": rejected, "summary.json": summary}
        paths = publish_files(out, files, overwrite=self.overwrite)
        return {name.split(".")[0]: Path(p) for name, p in paths.items()}

    def train_classifier(
        self, train: str, dev: str | None, out: str | Path, settings: ClassifierSettings
    ) -> dict[str, Any]:
        """Fine-tune a classifier on ``train`` (best epoch on ``dev``) into the folder ``out``,
        with the label set of the reader settings or the one read from ``train``. Returns the
        run's summary: ``out``, ``n_train``, ``n_dev``, ``steps``, ``best``,
        ``train_samples_per_second``, the rows the reads ``skipped`` (and ``cross_fit``); the
        full metrics are in ``OUT/metrics.json``."""
        from zdebias.classify.train import train_classifier

        records, report = self.records(train, "training")
        warn_repeated_ids(records, train)
        dev_records = self.records(dev, "dev")[0] if dev is not None else None
        if dev is not None and dev_records is not None:
            warn_repeated_ids(dev_records, dev)
        metrics = train_classifier(
            records,
            dev_records,
            out,
            settings,
            task=self.read.task or report.task,
            progress=self.progress,
            overwrite=self.overwrite,
            tell_steps=True,
            train_file=train,
        )
        summary: dict[str, Any] = {
            "out": str(out),
            **{k: metrics[k] for k in ("n_train", "n_dev", "steps", "best")},
            "train_samples_per_second": round(metrics["train_samples_per_second"], 2),
            "skipped": _skipped(report),
        }
        if "cross_fit" in metrics:
            summary["cross_fit"] = metrics["cross_fit"]
        return summary

    def confidence_filter(
        self, input: str, model: str, out: str | Path, settings: ConfidenceSettings
    ) -> dict[str, Any]:
        """Split ``input`` by the classifier ``model``'s confidence into the folder ``out``
        (:meth:`publish_partition`; the summary's ``input`` is the read's report); the
        ``originals`` of counterfactual edits are read with these reader settings. Returns
        that summary without ``input``, with the ``files`` written."""
        from zdebias.classify.confidence import confidence_filter

        records, report = self.records(input, "input")
        originals = self.records(settings.originals, "originals")[0] if settings.originals else None
        kept, rejected, summary = confidence_filter(
            records, model, settings, originals=originals, progress=self.progress
        )
        summary.update(model=model, input=report.summary())
        paths = self.publish_partition(out, kept, rejected, summary)
        result = {k: v for k, v in summary.items() if k != "input"}
        result["files"] = {name: str(path) for name, path in paths.items()}
        return result

    def predict(
        self, model: str, input: str, out: str | Path, settings: InferenceSettings
    ) -> dict[str, Any]:
        """Each record of ``input`` with ``meta.pred`` and ``meta.probs`` from the classifier
        ``model``, written to ``out``. Returns the summary: ``out``, ``n`` written, labels,
        input kind, accuracy (``None`` where the gold labels do not fit the model's) and the
        rows the read ``skipped``."""
        from zdebias.data.recorded import record_task
        from zdebias.data.writers import write_records
        from zdebias.evaluation.suites import predict_records

        records, report = self.records(input, "input")
        predicted, info = predict_records(model, records, settings, progress=self.progress)
        n = write_records(predicted, out)
        record_task(out, report.task)  # a custom label set, to read the file back with
        return {"out": str(out), "n": n, **info, "skipped": _skipped(report)}

    def evaluate(
        self,
        models: Sequence[str],
        suites: Sequence[str],
        out: str | Path,
        settings: EvaluateSettings,
        *,
        name: str | None = None,
        markdown: str | Path | None = None,
        predictions: str | Path | None = None,
    ) -> tuple[dict[str, Any], str]:
        """Evaluate ``models`` (one per run) on ``suites`` (``NAME=PATH``, read with the
        reader settings, or a path's own ``PATH::KEY=VALUE`` ones); the results document goes
        to ``out`` and its Markdown tables to :func:`markdown_path`, written together; with
        ``predictions``, each run's predictions per suite into that folder, published whole;
        with ``settings.shortcut_split`` (a ``zdebias shortcut-split`` folder), accuracy per
        slice and the reliance gap. Returns the document and the Markdown."""
        from zdebias.data.writers import publish_folder, write_together
        from zdebias.evaluation.reliance import evaluate_with_split
        from zdebias.evaluation.suites import Suite, parse_suite
        from zdebias.evaluation.tables import render_markdown

        fields = Suite.__dataclass_fields__
        options = {k: v for k, v in self.read.model_dump().items() if k in fields}
        parsed = [parse_suite(s, **options) for s in suites]

        def run(folder: Path | None) -> dict[str, Any]:
            return evaluate_with_split(
                models,
                parsed,
                settings.shortcut_split,
                settings,
                name=name,
                progress=self.progress,
                predictions_dir=folder,
            )

        if predictions is None:
            doc = run(None)
        else:
            doc = publish_folder(predictions, run, overwrite=self.overwrite)
        for info in doc["suites"]:
            unlabelled, bad = info["n_skipped_unlabelled"], info["n_skipped_errors"]
            if unlabelled + bad:
                log.warning(
                    "%s: skipped %d unlabelled and %s",
                    info["path"],
                    unlabelled,
                    counted(bad, "bad row"),
                )
            if info.get("n_skipped_by_where"):
                log.warning(
                    "%s: left out %s not selected by --where %s",
                    info["path"],
                    counted(info["n_skipped_by_where"], "row"),
                    where_text(info["where"] or {}),
                )
        text = render_markdown(doc, average=settings.average)
        write_together({Path(out): doc, markdown_path(out, markdown): text})
        return doc, text


__all__ = ["Files", "markdown_path"]
