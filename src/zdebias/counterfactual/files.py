"""The counterfactual operations on files, as ``zdebias counterfactual rationales``,
``train``, ``generate`` and ``prompt`` run them.

:class:`CounterfactualFiles` is :class:`~zdebias.classify.files.Files` (reader settings of
the inputs, overwrite policy, progress bars) plus the counterfactual operations: each reads
its inputs, runs the operation on records, writes its outputs and returns the summary the
command prints, so a Python user gets what the command gets. (``metrics`` reads files
already: :func:`~zdebias.counterfactual.metrics.metrics_report`.) torch loads only when an
operation runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zdebias.classify.files import Files
from zdebias.counterfactual.settings import (
    InfillSettings,
    PromptCounterfactualSettings,
    RationaleSettings,
    SelectSettings,
)
from zdebias.data.options import ReadOptions
from zdebias.generation.settings import ClientSettings


class CounterfactualFiles(Files):
    """:class:`~zdebias.classify.files.Files` with the counterfactual operations."""

    def rationales(
        self,
        classifier: str,
        input: str,
        out: str | Path,
        settings: RationaleSettings,
        dropped: str | Path | None = None,
    ) -> dict[str, Any]:
        """Rationales of ``input`` by the classifier ``classifier``
        (:func:`~zdebias.counterfactual.rationales.extract_rationales`) written to ``out``,
        the dropped records to ``dropped`` when given (written together). Returns the
        summary: ``input``, ``out`` and
        :func:`~zdebias.counterfactual.rationales.rationale_summary`."""
        from zdebias.counterfactual.rationales import extract_rationales, rationale_summary
        from zdebias.data.writers import write_together

        records, report = self.records(input, "input")
        kept, drop = extract_rationales(classifier, records, settings, progress=self.progress)
        write_together({Path(out): kept, **({Path(dropped): drop} if dropped is not None else {})})
        summary = rationale_summary(kept, drop, settings, n_input=len(records), read=report)
        return {"input": input, "out": str(out), **summary}

    def train_infiller(
        self, train: str, out: str | Path, settings: InfillSettings, dev: str | None = None
    ) -> dict[str, Any]:
        """Fine-tune an infiller on the rationales ``train`` into the folder ``out``
        (:func:`~zdebias.counterfactual.trainer.train_infiller`); ``dev`` is read with the
        label set of ``train`` and the reader's bad-row policy, and the infiller learns the
        labels of that set. Returns the training summary (without the per-epoch
        ``history``, which ``OUT/train_summary.json`` keeps)."""
        from zdebias.counterfactual.trainer import train_infiller
        from zdebias.data.labels import get_task

        records, report = self.records(train, "training")
        task = self.read.task or report.task
        dev_read = ReadOptions(task=task, on_error=self.read.on_error)
        dev_records = self.records(dev, read=dev_read)[0] if dev is not None else None
        summary = train_infiller(
            records,
            out,
            settings,
            labels=list(get_task(task).labels),
            dev=dev_records,
            path=train,
            overwrite=self.overwrite,
            progress=self.progress,
        )
        summary.pop("history", None)
        return summary

    def generate(
        self, infiller: str, classifier: str, input: str, out: str | Path, settings: SelectSettings
    ) -> dict[str, Any]:
        """Counterfactuals of ``input`` by the infiller, post-selected by the classifier
        (:func:`~zdebias.counterfactual.select.generate_counterfactuals`), into the folder
        ``out`` (:meth:`publish_partition`). Returns its summary, which names the ``input``,
        ``infiller`` and ``classifier``."""
        from zdebias.counterfactual.select import generate_counterfactuals

        records, _ = self.records(input, "input")
        kept, rejected, summary = generate_counterfactuals(
            infiller, classifier, records, settings, path=input, progress=self.progress
        )
        summary = {"input": input, "infiller": infiller, "classifier": classifier, **summary}
        self.publish_partition(out, kept, rejected, summary)
        return summary

    def prompt(
        self,
        generator: str,
        classifier: str,
        input: str,
        out: str | Path,
        settings: PromptCounterfactualSettings,
        client: ClientSettings | None = None,
    ) -> dict[str, Any]:
        """Counterfactuals of ``input`` by prompting ``generator``, post-selected by the
        classifier (:func:`~zdebias.counterfactual.prompted.prompt_counterfactuals`), into
        the folder ``out`` (:meth:`publish_partition`). Returns its summary, which names the
        ``input`` and ``classifier``."""
        from zdebias.counterfactual.prompted import prompt_counterfactuals

        records, _ = self.records(input, "input")
        kept, rejected, summary = prompt_counterfactuals(
            generator,
            classifier,
            records,
            settings,
            client=client,
            path=input,
            progress=self.progress,
        )
        summary = {"input": input, "classifier": classifier, **summary}
        self.publish_partition(out, kept, rejected, summary)
        return summary


__all__ = ["CounterfactualFiles"]
