"""The classifier operations on files, as the commands run them.

:class:`Files` holds what every operation on files shares: the reader settings of its inputs
(a skipped row is always told: :func:`~zdebias.data.options.read_logged`), whether it may
replace an earlier output, progress bars. Each method reads its inputs, runs the operation on
records (:func:`~zdebias.classify.train.train_classifier`,
:func:`~zdebias.classify.confidence.confidence_filter`), writes its outputs and returns what the
command prints, so a Python user gets what the command gets::

    files = Files(ReadOptions(task="nli"), overwrite=True)
    files.train_classifier("train.jsonl", "dev.jsonl", "runs/clf", ClassifierSettings())
    files.confidence_filter("generated.jsonl", "runs/clf", "runs/conf", ConfidenceSettings())

:class:`~zdebias.evaluation.files.EvaluationFiles` adds predict and evaluate,
:class:`~zdebias.counterfactual.files.CounterfactualFiles` the counterfactual operations.
torch, transformers and scipy load only when an operation runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zdebias.classify.settings import ClassifierSettings, ConfidenceSettings
from zdebias.data.options import ReadOptions, read_logged, warn_repeated_ids
from zdebias.data.schema import Record

if TYPE_CHECKING:
    from zdebias.data import ReadReport


def skipped_rows(report: ReadReport) -> dict[str, int]:
    """The rows a read skipped, by reason: a summary's ``skipped``."""
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
            "skipped": skipped_rows(report),
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


__all__ = ["Files", "skipped_rows"]
