"""An input file of a statistics operation (:class:`FileInput`): where it is, how it is read,
and where what its reading found is told (:class:`Teller`); :func:`read_source` reads it whole.

A trained hypothesis-only model (``settings.hypo_only_model``) is applied by a caller above
this package (it needs ``zdebias.classify``): :data:`HypoOnly`, e.g.
:func:`zdebias.classify.hypo_only.apply_hypo_only_model`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from zdebias.data.mapping import ReadReport
from zdebias.data.options import ReadOptions, dataset_warnings, log_skips
from zdebias.data.schema import Record
from zdebias.errors import ConfigError

log = logging.getLogger("zdebias")

#: ``(records, settings, labels, *, progress) -> records``: the records with a trained
#: hypothesis-only model's predictions in ``meta`` when ``settings.hypo_only_model`` is set
#: (:func:`zdebias.classify.hypo_only.apply_hypo_only_model`).
HypoOnly = Callable[..., list[Record]]


class Teller:
    """Where what reading an input found goes: what the reader skipped and the warnings about
    the records (a single label, repeated ids). This one logs them, as the commands do; a
    recipe stage notes them in its run instead."""

    def skipped(self, report: ReadReport) -> None:
        """The input is read: tell what the reader skipped (``report``)."""
        log_skips(report)

    def warn(self, line: str) -> None:
        """Tell one warning about the records read."""
        log.warning("%s", line)


@dataclass(frozen=True)
class FileInput:
    """One input file: ``path`` read with ``read`` (``task``: the label set when ``read``
    names none). ``what`` names it in the error for an input without labelled records (None:
    an empty input is z-filtered to nothing in one process; a file the z-filter runs in
    several processes, of 2 MB or more, still stops with the error, as the ``input``);
    fewer than ``min_records`` records is an error. Warnings name it ``name`` (default: the
    path) and go to ``teller``."""

    path: str
    read: ReadOptions = field(default_factory=ReadOptions)
    task: Any = None
    what: str | None = "input"
    min_records: int = 2
    name: str | None = None
    teller: Teller = field(default_factory=Teller)

    @classmethod
    def seed_of(cls, path: str, read: ReadOptions) -> FileInput:
        """The seed dataset of conditional z-filtering, for an input read with ``read``: its
        label set and error policy, the seed's own columns; one record is enough."""
        seed_read = ReadOptions(task=read.task, on_error=read.on_error)
        return cls(path, seed_read, what="seed", min_records=1)

    @property
    def shown(self) -> str:
        """How warnings name the input."""
        return self.path if self.name is None else self.name


def read_source(
    source: FileInput,
    settings: Any,
    *,
    hypo_only: HypoOnly | None = None,
    progress: bool = False,
) -> tuple[list[Record], ReadReport]:
    """The records of ``source`` and the reader's report, with what was skipped and the
    warnings told; with ``hypo_only``'s predictions in ``meta`` (``settings``: the feature
    settings; a ``hypo_only_model`` in them needs ``hypo_only``)."""
    records, report = source.read.read(source.path, task=source.task, what=source.what)
    source.teller.skipped(report)
    for line in dataset_warnings(records, source.shown, min_records=source.min_records):
        source.teller.warn(line)
    if hypo_only is not None:
        return hypo_only(records, settings, report.labels, progress=progress), report
    if settings.hypo_only_model:
        raise ConfigError(
            "a trained hypothesis-only model needs hypo_only= "
            "(zdebias.classify.hypo_only.apply_hypo_only_model)"
        )
    return records, report


__all__ = ["FileInput", "HypoOnly", "Teller", "read_source"]
