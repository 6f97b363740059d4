"""Converting a read into an output by format (``zdebias convert``): zdebias JSONL, parquet,
or a HF ``datasets`` folder (``save_to_disk``), each written atomically."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from zdebias.data.schema import Record
from zdebias.errors import ConfigError

#: what a conversion writes
CONVERT_TO = ("jsonl", "parquet", "datasets")


@dataclass(frozen=True)
class Conversion:
    """Where a conversion writes and in which format, checked before anything is read.

    ``to``: ``jsonl``, ``parquet`` (``out`` must end in that suffix) or ``datasets`` (a
    folder); None: from ``out``'s suffix (``.parquet``, else JSONL).
    """

    out: str
    to: str | None = None

    def __post_init__(self) -> None:
        to = self.to
        if to is not None and to not in CONVERT_TO:
            raise ConfigError(
                f"--to: unknown format {to!r}; expected one of {', '.join(CONVERT_TO)}"
            )
        if to in ("jsonl", "parquet") and not self.out.endswith(f".{to}"):
            raise ConfigError(f"--to {to}: OUT must end in .{to}, not {Path(self.out).name!r}")

    @property
    def folder(self) -> bool:
        """Whether ``out`` is a folder, published whole (replacing only its own)."""
        return self.to == "datasets"

    def write(
        self, records: Iterable[Record], labels: Iterable[str] | None, *, overwrite: bool = False
    ) -> int:
        """Write ``records`` (of label set ``labels``) to ``out``; returns how many."""
        if self.folder:
            from zdebias.data.hf import publish_saved

            return publish_saved(records, self.out, labels, overwrite=overwrite)
        from zdebias.data.writers import write_records

        return write_records(records, self.out)


__all__ = ["CONVERT_TO", "Conversion"]
