"""What one z-filter worker process does with its byte range of the input (:class:`Shard`).

It reads its range, extracts the feature groups that depend on one record at a time chunk by
chunk, and streams compact blocks back (each record's label, id and hypothesis with them);
while the parent runs Algorithm 1 it encodes the records it kept as JSON lines (at a lower
priority); told which of its rows were kept and which features rejected the others
(:class:`ShardRows`), it writes its part of ``kept.jsonl`` and ``rejected.jsonl``. Above
:data:`KEEP_ROWS` records it keeps none and reads its range again to write.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from zdebias.data.process import gc_paused
from zdebias.data.schema import Record
from zdebias.stats.execution.source import FileInput

#: Records a worker turns into features at a time (bounds its memory on huge files).
CHUNK_ROWS = 100_000
#: A worker keeps up to this many records between reading and writing; above, it reads its
#: range again to write (memory over time, for files of many millions of rows).
KEEP_ROWS = 1_000_000
#: How much a worker lowers its priority to encode its records ahead of writing: on as many
#: cores as workers, the parent (merging, filtering) keeps a core to itself meanwhile.
ENCODE_NICE = 10
#: The meta keys the z-filter gives a rejected record (:func:`~zdebias.stats.zfilter.tag_rejected`)
REJECTED_KEYS = ("rejected_by", "rejected_by_features")


class ShardRows(NamedTuple):
    """What a worker writes: sorted row indices in its range kept (``accepted``) and
    rejected, and the rejecting features as :func:`~zdebias.stats.zfilter.tag_rejected`
    takes them (``rej_rows`` / ``rej_cols``, each column's name and key dict)."""

    accepted: np.ndarray
    rejected: np.ndarray
    rej_rows: np.ndarray
    rej_cols: np.ndarray
    names: dict[int, str]
    keys: dict[int, dict[str, Any]]


class Shard:
    """A worker's state: its byte range of the input, and its records while it may keep them."""

    def __init__(self, source: FileInput, start: int, end: int, settings: dict[str, Any]) -> None:
        self.path, self.read, self.task = source.path, source.read, source.task
        self.start, self.end = start, end
        self.settings = settings  # features of the input
        self.records: list[Record] | None = None
        self.lines: Any = None  # the records as EncodedLines, once encoded
        self.labels: tuple[str, ...] = ()
        self.pair = True

    def _records(self) -> Any:
        ds = self.read.open(self.path, task=self.task)
        return ds, ds.iter_range(self.start, self.end)

    def keep_records(self) -> int:
        """Read the range and keep its records, encoded (:meth:`encode`); how many."""
        _, records = self._records()
        with gc_paused():
            self.records = list(records)
        return self.encode()

    def encode(self) -> int:
        """Turn the records kept into lines ready to write (while the parent runs Algorithm
        1, this process having nothing else to do); how many."""
        from zdebias.data.writers import EncodedLines

        if self.records is None:
            return 0
        with contextlib.suppress(OSError):  # the parent's work comes first: it is the longest
            os.nice(ENCODE_NICE)
        with gc_paused():
            self.lines = EncodedLines(self.records, REJECTED_KEYS)
        self.records = None
        return len(self.lines)

    def read_and_extract(
        self, feature_names: Sequence[str] | None
    ) -> Generator[dict[str, Any], None, dict[str, Any]]:
        """Read the range, yielding each chunk's features, labels, ids and hypotheses
        (distinct texts and each record's among them) as it is done (the parent receives
        them meanwhile, so no worker holds them all); returns the read report."""
        from zdebias.data.labels import get_task
        from zdebias.features.context import factorize_strings

        ds, records_iter = self._records()
        kept: list[Record] = []
        keep = True
        with gc_paused():
            while True:
                chunk = [r for _, r in zip(range(CHUNK_ROWS), records_iter, strict=False)]
                if not chunk:
                    break
                if not self.labels:
                    self.labels = get_task(ds.report.task).labels
                    self.pair = chunk[0].is_pair
                result, y, preds = self._extract(chunk, feature_names, self.settings)
                ids = [r.id for r in chunk]
                joined = "\x00".join(ids)  # one string: far smaller than a million of them
                yield {
                    "chunk": result,
                    "y": y,
                    "meta_preds": preds,
                    "ids": joined if joined.count("\x00") == len(ids) - 1 else ids,
                    "id_hashes": np.fromiter(map(hash, ids), dtype=np.int64, count=len(ids)),
                    "hypotheses": factorize_strings([r.hypothesis for r in chunk])
                    if self.pair
                    else None,
                }
                if keep:
                    kept.extend(chunk)
                    if len(kept) > KEEP_ROWS:  # read again to write
                        keep, kept = False, []
        self.records = kept if keep else None
        report = ds.report
        return {
            "report": (report.task, report.n_records, report.n_unlabelled),
            "label_map": (report.label_map, report.label_map_from),
            "unlabelled_lines": report.unlabelled_lines,
            "derived_ids": (report.n_derived_ids, report.derived_ids),
            "errors": report.errors,
            "pair": self.pair,
        }

    def _extract(
        self, chunk: list[Record], feature_names: Sequence[str] | None, settings: dict[str, Any]
    ) -> tuple[Any, np.ndarray, np.ndarray]:
        from zdebias.data.labels import label_ids
        from zdebias.features.catalogue import feature_specs
        from zdebias.features.context import FeatureContext
        from zdebias.features.hypothesis_only import meta_predictions
        from zdebias.features.parallel import chunk_blocks, chunkable

        specs = feature_specs(feature_names, pair=chunk[0].is_pair, settings=settings)
        result = chunk_blocks(
            chunk,
            [s for s in specs if chunkable(s)],
            settings,
            labels=self.labels,
            pair=chunk[0].is_pair,
            hypo_ngrams=any(s.name == "hypo-only" for s in specs),
        )
        y = label_ids(chunk, self.labels)
        if any(s.name == "hypo-only" for s in specs):
            preds = meta_predictions(FeatureContext(chunk, settings), self.labels)
        else:
            preds = np.full(len(chunk), -1, dtype=np.int64)
        return result, y, preds

    def write(self, work: str, index: int, rows: ShardRows) -> int:
        """Write this range's kept and rejected lines as part files ``kept.part-INDEX`` and
        ``rejected.part-INDEX`` in ``work``; how many."""
        with (
            (Path(work) / f"kept.part-{index}").open("w", encoding="utf-8") as kept_fh,
            (Path(work) / f"rejected.part-{index}").open("w", encoding="utf-8") as rej_fh,
            gc_paused(),
        ):
            if self.lines is not None:
                self._write_encoded(kept_fh, rej_fh, rows)
            else:
                self._write_records(kept_fh, rej_fh, rows)
        return len(rows.accepted) + len(rows.rejected)

    def _write_records(self, kept_fh: Any, rej_fh: Any, rows: ShardRows) -> None:
        """:meth:`write` from the records, kept or read again, chunk by chunk."""
        from zdebias.data.writers import RecordEncoder
        from zdebias.stats.zfilter import tag_rejected

        records: Any = self.records
        self.records = None
        if records is None:
            _, records = self._records()
        else:
            records = iter(records)
        encode = RecordEncoder()
        base = 0
        accepted, rejected, rej_rows = rows.accepted, rows.rejected, rows.rej_rows
        while True:
            chunk = [r for _, r in zip(range(CHUNK_ROWS), records, strict=False)]
            if not chunk:
                break
            end = base + len(chunk)
            a, b = np.searchsorted(accepted, [base, end])
            kept = [chunk[i - base] for i in accepted[a:b].tolist()]
            a, b = np.searchsorted(rejected, [base, end])
            c, d = np.searchsorted(rej_rows, [base, end])
            tagged = tag_rejected(
                (chunk[i - base] for i in rejected[a:b].tolist()),
                rej_rows[c:d],
                rows.rej_cols[c:d].tolist(),
                rows.names,
                rows.keys,
            )
            _write_lines(kept_fh, kept, encode)
            _write_lines(rej_fh, tagged, encode)
            base = end

    def _write_encoded(self, kept_fh: Any, rej_fh: Any, rows: ShardRows) -> None:
        """:meth:`write` from the lines :meth:`encode` made."""
        lines, self.lines = self.lines, None
        # the rejecting features of each rejected row, as tag_rejected sets them in meta
        items: dict[tuple[int, ...], tuple[dict[str, Any], str]] = {}
        cuts = [0, *(np.flatnonzero(np.diff(rows.rej_rows)) + 1).tolist(), len(rows.rej_rows)]
        cols = rows.rej_cols.tolist()
        kept = rows.accepted.tolist()
        for at in range(0, len(kept), 10_000):
            kept_fh.write("".join([lines.line(i) + "\n" for i in kept[at : at + 10_000]]))
        rejected = rows.rejected.tolist()
        if len(cols) and len(rejected) != len(cuts) - 1:  # pragma: no cover - a bug
            raise RuntimeError("rejected rows and their features do not match")
        out = []
        for k, i in enumerate(rejected):
            combo = tuple(cols[cuts[k] : cuts[k + 1]])
            found = items.get(combo)
            if found is None:
                meta = {
                    REJECTED_KEYS[0]: [rows.names[j] for j in combo],
                    REJECTED_KEYS[1]: [rows.keys[j] for j in combo],
                }
                found = items[combo] = (meta, lines.encode.meta_items(meta))
            out.append(lines.line_with(i, *found) + "\n")
            if len(out) == 10_000:
                rej_fh.write("".join(out))
                out = []
        rej_fh.write("".join(out))


def _write_lines(fh: Any, records: list[Record], encode: Any) -> None:
    for at in range(0, len(records), 10_000):
        fh.write("".join([encode(r) + "\n" for r in records[at : at + 10_000]]))


__all__ = ["CHUNK_ROWS", "ENCODE_NICE", "KEEP_ROWS", "REJECTED_KEYS", "Shard", "ShardRows"]
