"""Converting a read into an output by format (``zdebias convert``): JSON Lines, CSV, TSV,
parquet (the format ``out``'s suffix names), or a HF ``datasets`` folder (``save_to_disk``),
each written atomically."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from zdebias.data.schema import Record
from zdebias.data.writers import SUFFIX_FORMATS, format_of_name
from zdebias.errors import ConfigError

#: what a conversion writes
CONVERT_TO = ("jsonl", "csv", "tsv", "parquet", "datasets")


def _suffixes(fmt: str | None = None) -> str:
    """The output suffixes (of ``fmt`` only, when given), as the errors list them."""
    return ", ".join(s for s, f in SUFFIX_FORMATS.items() if fmt is None or f == fmt)


@dataclass(frozen=True)
class Conversion:
    """Where a conversion writes and in which format, checked before anything is read.

    ``to``: ``jsonl`` (``out`` ending in ``.jsonl`` or ``.json``: JSON Lines either way),
    ``csv``, ``tsv``, ``parquet`` (``out`` ending in that suffix), or ``datasets`` (a
    folder); None: the format ``out``'s suffix names, any other suffix refused.
    """

    out: str
    to: str | None = None

    def __post_init__(self) -> None:
        to = self.to
        if to is not None and to not in CONVERT_TO:
            raise ConfigError(
                f"--to: unknown format {to!r}; expected one of {', '.join(CONVERT_TO)}"
            )
        if to in (None, "datasets"):
            if to is None and format_of_name(self.out) is None:
                raise ConfigError(
                    f"OUT {Path(self.out).name!r}: unknown suffix; expected one of "
                    f"{_suffixes()} (or --to datasets for a folder)"
                )
            return
        if format_of_name(self.out) != to:
            raise ConfigError(
                f"--to {to}: OUT must end in {_suffixes(to).replace(', ', ' or ')}, "
                f"not {Path(self.out).name!r}"
            )

    @property
    def folder(self) -> bool:
        """Whether ``out`` is a folder, published whole (replacing only its own)."""
        return self.to == "datasets"

    @property
    def format(self) -> str:
        """The format written: ``datasets``, or the one ``out``'s suffix names."""
        return "datasets" if self.folder else str(format_of_name(self.out))

    def write(
        self, records: Iterable[Record], labels: Iterable[str] | None, *, overwrite: bool = False
    ) -> int:
        """Write ``records`` (of label set ``labels``) to ``out``; returns how many. A custom
        label set is recorded with them: a ``datasets`` folder's ``ClassLabel``, else a file
        beside ``out`` (:func:`~zdebias.data.recorded.record_task`), so that any command
        reads the output back without ``--task``."""
        if self.folder:
            from zdebias.data.hf import publish_saved

            return publish_saved(records, self.out, labels, overwrite=overwrite)
        from zdebias.data.labels import TASKS
        from zdebias.data.recorded import record_task
        from zdebias.data.writers import write_jsonl, write_table

        if self.format == "jsonl":
            n = write_jsonl(records, self.out)
        else:
            n = write_table(records, self.out, self.format)
        labels = tuple(labels or ())
        custom = len(labels) > 1 and all(labels != task.labels for task in TASKS.values())
        record_task(self.out, "labels:" + ",".join(labels) if custom else None)
        return n


__all__ = ["CONVERT_TO", "Conversion"]
