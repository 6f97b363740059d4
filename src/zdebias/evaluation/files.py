"""The evaluation operations on files, as ``zdebias predict`` and ``zdebias evaluate`` run them.

:class:`EvaluationFiles` is :class:`~zdebias.classify.files.Files` (reader settings of the
inputs, overwrite policy, progress bars) with two more operations, each reading its inputs,
running the operation on records (:func:`~zdebias.evaluation.suites.predict_records`,
:func:`~zdebias.evaluation.reliance.evaluate_with_split`), writing its outputs and returning
what the command prints::

    files = EvaluationFiles(ReadOptions(task="nli"), overwrite=True)
    files.predict("runs/clf", "dev.jsonl", "dev_pred.jsonl", InferenceSettings())
    doc, markdown = files.evaluate(["runs/clf"], ["hans=hans.txt"], "res.json", EvaluateSettings())

torch, transformers and scipy load only when an operation runs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zdebias.classify.files import Files, skipped_rows
from zdebias.classify.settings import InferenceSettings
from zdebias.data.options import counted
from zdebias.data.where import where_text
from zdebias.evaluation.settings import EvaluateSettings

if TYPE_CHECKING:
    from zdebias.evaluation.documents import EvaluationDocument

log = logging.getLogger("zdebias")


def markdown_path(out: str | Path, markdown: str | Path | None = None) -> Path:
    """Where ``evaluate`` writes its Markdown tables: ``markdown``, else ``OUT.md`` beside
    the results JSON ``out``."""
    return Path(markdown) if markdown is not None else Path(out).with_suffix(".md")


class EvaluationFiles(Files):
    """:class:`~zdebias.classify.files.Files` with the prediction and evaluation operations."""

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
        return {"out": str(out), "n": n, **info, "skipped": skipped_rows(report)}

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
    ) -> tuple[EvaluationDocument, str]:
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

        def run(folder: Path | None) -> EvaluationDocument:
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


__all__ = ["EvaluationFiles", "markdown_path"]
