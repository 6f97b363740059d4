"""``zdebias filter`` on one large JSONL file with several processes, each reading part of it.

The file is cut into byte ranges at line starts, one per process. Each worker, forked before
anything is read, reads its own range (the records never cross a pipe: sending them costs as
much as parsing them), extracts the feature groups that depend on one record at a time, chunk
by chunk, and streams compact blocks back with each record's label, id and hypothesis. The
parent merges the blocks exactly as :mod:`zdebias.features.parallel` does, fits the
hypothesis-only feature, runs Algorithm 1, and tells each worker which of its rows were kept
and which features rejected the others. Meanwhile the workers, with nothing else to do, have
encoded their records as JSON lines (at a lower priority than the parent); they write their
share of ``kept.jsonl`` / ``rejected.jsonl`` while the parent computes the statistics of the
kept rows from the matrix (the summary's ``stats_of_kept``), and the parent joins the parts.

A smaller file (:func:`filter_records`) is read and filtered in one process, and a second
one, forked before reading, reads it too, encodes it and writes the output: the same
overlap, without merging blocks from several processes.

The output is byte for byte what one process writes (tests compare them). It applies to a
plain (not gzipped) local JSONL file, without a seed dataset, ``--limit`` or a trained
hypothesis-only model, with the built-in feature groups; :func:`plan_shards` says when.
"""

from __future__ import annotations

import contextlib
import inspect
import multiprocessing
import os
import shutil
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from itertools import chain, pairwise
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from zdebias.data.mapping import ReadReport
from zdebias.data.options import ReadOptions
from zdebias.data.process import gc_paused, mmap_large_allocations
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError, ZdebiasError
from zdebias.stats.settings import StatsSettings, ZFilterSettings

#: Below this size one process is as fast (forking and merging cost more than they save).
SHARD_MIN_BYTES = 64 << 20
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
#: From this size (about 12k SNLI rows) a file below :data:`SHARD_MIN_BYTES` is z-filtered
#: with a second process to write the output (:func:`filter_records`); below, forking costs
#: about what it saves.
WRITER_MIN_BYTES = 2 << 20


def plan_shards(
    path: str, read: ReadOptions, settings: ZFilterSettings, *, seed_data: str | None = None
) -> list[tuple[int, int]] | None:
    """Byte ranges, one per process, when ``path`` can be z-filtered sharded; else None.

    ``settings.num_proc`` unset: every core for a file of at least :data:`SHARD_MIN_BYTES`;
    1: never; N: N processes whatever the size.
    """
    from zdebias.features.parallel import available_cores

    size = _plain_jsonl_size(path, read, settings, seed_data)
    if size is None:
        return None
    file = Path(path)
    n_proc = settings.num_proc
    if n_proc is None:
        n_proc = available_cores() if size >= SHARD_MIN_BYTES else 1
    elif n_proc == 0:
        n_proc = available_cores()
    if n_proc < 2 or size < n_proc:
        return None
    return _ranges(file, size, n_proc)


def _plain_jsonl_size(
    path: str, read: ReadOptions, settings: ZFilterSettings, seed_data: str | None
) -> int | None:
    """The size of ``path`` if it is a plain (not gzipped) local JSONL file that a process
    can read part of and z-filter without a seed or ``--limit``, with
    :func:`matrix_describes_kept`; else None."""
    from zdebias.data.files import detect_format

    if seed_data or read.limit is not None or not matrix_describes_kept(settings):
        return None
    if "fork" not in multiprocessing.get_all_start_methods() or "::" in path:
        return None
    file = Path(path)
    if path.startswith("hf:") or not file.is_file():
        return None
    try:
        if (read.format or detect_format(path)) != "jsonl":
            return None
        with file.open("rb") as fh:
            if fh.read(2) == b"\x1f\x8b":  # gzipped: no seeking into it
                return None
        return file.stat().st_size
    except (OSError, DataError, ConfigError):
        return None


def matrix_describes_kept(settings: ZFilterSettings) -> bool:
    """Whether, with these settings, the features of any subset of the records can be taken
    from the whole input's matrix (:func:`kept_summary`): built-in groups that depend on one
    record at a time, and the default hypothesis-only feature, refitted from the hypothesis
    n-grams in the matrix. Not with plugin settings or a trained hypothesis-only model."""
    from zdebias.features.catalogue import get_feature
    from zdebias.features.parallel import chunkable

    if settings.hypo_only_model or settings.feature_options:
        return False
    names = settings.features or ()
    if any(not (chunkable(s) or s.name == "hypo-only") for s in map(get_feature, names)):
        return False
    return _hypothesis_ngrams_in_matrix(settings)


def kept_summary(
    fm: Any,
    kept: np.ndarray,
    y: np.ndarray,
    meta_preds: np.ndarray,
    hypotheses: np.ndarray,
    labels: tuple[str, ...],
    settings: ZFilterSettings,
    pair: bool,
) -> dict[str, Any] | None:
    """The filter summary's ``stats_of_kept`` (what ``zdebias stats`` reports for
    ``kept.jsonl``) from the input's feature matrix ``fm`` and the kept rows ``kept``, without
    extracting the features again; only where :func:`matrix_describes_kept`. ``y``,
    ``meta_preds`` and ``hypotheses``: every input row's label id, ``meta.hypo_only_pred``
    index (-1: none) and hypothesis code (see :func:`_distinct`)."""
    from zdebias.stats.measure import kept_stats
    from zdebias.stats.zstats import describe_matrix

    if not len(kept):
        return None
    cfg = StatsSettings.take(settings, top=1)
    kwargs = {k: v for k, v in cfg.feature_kwargs().items() if k != "num_proc"}
    fm_kept = _kept_matrix(
        fm, kept, y, meta_preds, hypotheses, labels, kwargs, pair, settings.features
    )
    rep = describe_matrix(fm_kept, y[kept], labels, top=1, alpha=cfg.alpha)
    return kept_stats(rep)


def kept_summary_of(
    result: Any, records: Sequence[Record], settings: ZFilterSettings
) -> dict[str, Any] | None:
    """:func:`kept_summary` for a one-process :func:`~zdebias.stats.zfilter.z_filter` result
    (no seed records) on ``records``."""
    labels = result.summary["labels"]
    return _kept_summary_of(result.features, result.arrays, records, settings, labels)


def _kept_summary_of(
    fm: Any,
    arrays: Any,
    records: Sequence[Record],
    settings: ZFilterSettings,
    labels: Sequence[str],
) -> dict[str, Any] | None:
    """:func:`kept_summary_of` from the feature matrix and the filter's arrays."""
    from zdebias.data.labels import label_ids
    from zdebias.features.context import FeatureContext, factorize_strings
    from zdebias.features.hypothesis_only import _meta_predictions

    labels = tuple(labels)
    pair = records[0].is_pair
    if pair:
        preds = _meta_predictions(FeatureContext(records, {}), labels)
        hypotheses = factorize_strings([r.hypothesis for r in records])[0]
    else:
        preds = np.full(len(records), -1, dtype=np.int64)
        hypotheses = np.zeros(0, dtype=np.int64)
    y = label_ids(records, labels)
    return kept_summary(fm, arrays.accepted, y, preds, hypotheses, labels, settings, pair)


def _hypothesis_ngrams_in_matrix(settings: ZFilterSettings) -> bool:
    """Whether the matrix holds the hypothesis unigrams and bigrams that the hypothesis-only
    feature reads, when it is used (:func:`_kept_matrix` refits it from them)."""
    from zdebias.features.ngrams import _ngram_range

    names = settings.features
    if names is not None and "hypo-only" not in names:
        return True
    fields = settings.ngram_fields
    if fields is not None and "hypothesis" not in fields:
        return False
    lo, hi = _ngram_range(settings.ngram_range or (1, 2))
    ngrams = names is None or "ngrams" in names
    return (ngrams and lo <= 1 and hi >= 2) or (
        names is not None and {"unigrams", "bigrams"} <= set(names)
    )


def _ranges(file: Path, size: int, n: int) -> list[tuple[int, int]]:
    """``n`` byte ranges covering the file, each starting at a line start (some may be
    empty when lines are long)."""
    cuts = [0]
    with file.open("rb") as fh:
        for i in range(1, n):
            at = max(size * i // n, cuts[-1])
            fh.seek(at)
            if at > 0:
                fh.seek(at - 1)
                fh.readline()  # to the start of the next line
            cuts.append(min(fh.tell(), size))
    cuts.append(size)
    return list(pairwise(cuts))


# --------------------------------------------------------------------------- worker side


class _Rows(NamedTuple):
    """What a worker writes: sorted row indices in its range kept (``accepted``) and
    rejected, and the rejecting features as :func:`~zdebias.stats.zfilter.tag_rejected`
    takes them (``rej_rows`` / ``rej_cols``, each column's name and key dict)."""

    accepted: np.ndarray
    rejected: np.ndarray
    rej_rows: np.ndarray
    rej_cols: np.ndarray
    names: dict[int, str]
    keys: dict[int, dict[str, Any]]


class _Shard:
    """A worker's state: its byte range, and its records while it may keep them."""

    def __init__(
        self, path: str, read: ReadOptions, start: int, end: int, settings: dict[str, Any]
    ) -> None:
        self.path, self.read, self.start, self.end = path, read, start, end
        self.settings = settings  # features of the input
        self.records: list[Record] | None = None
        self.lines: Any = None  # the records as EncodedLines, once encoded
        self.labels: tuple[str, ...] = ()
        self.pair = True

    def _records(self) -> Any:
        ds = self.read.open(self.path)
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

    def read_and_extract(self, feature_names: Sequence[str] | None) -> Iterator[dict[str, Any]]:
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
            "unlabelled_lines": report.unlabelled_lines,
            "errors": report.errors,
            "pair": self.pair,
        }

    def _extract(
        self, chunk: list[Record], feature_names: Sequence[str] | None, settings: dict[str, Any]
    ) -> tuple[Any, np.ndarray, np.ndarray]:
        from zdebias.data.labels import label_ids
        from zdebias.features.context import FeatureContext
        from zdebias.features.hypothesis_only import _meta_predictions
        from zdebias.features.parallel import chunk_blocks, chunkable

        specs = _specs(feature_names, chunk[0].is_pair, settings)
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
            preds = _meta_predictions(FeatureContext(chunk, settings), self.labels)
        else:
            preds = np.full(len(chunk), -1, dtype=np.int64)
        return result, y, preds

    def write(self, work: str, index: int, rows: _Rows) -> int:
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

    def _write_records(self, kept_fh: Any, rej_fh: Any, rows: _Rows) -> None:
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

    def _write_encoded(self, kept_fh: Any, rej_fh: Any, rows: _Rows) -> None:
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


def _join(parts: list[Path], path: Path) -> None:
    """Append the other parts to the first (in the kernel where it can) and give it ``path``,
    with the permissions :func:`~zdebias.data.writers.atomic_open` gives a file."""
    from zdebias.data.writers import _umask

    # unbuffered, so that a copy through user space goes on where the kernel's stopped; not
    # "ab": copy_file_range refuses a file opened to append
    with parts[0].open("r+b", buffering=0) as out:
        out.seek(0, os.SEEK_END)
        for part in parts[1:]:
            with part.open("rb", buffering=0) as src:
                size = os.fstat(src.fileno()).st_size
                try:
                    while size > 0:
                        copied = os.copy_file_range(src.fileno(), out.fileno(), size)
                        if copied == 0:
                            break
                        size -= copied
                except OSError:  # no copy_file_range here: through user space
                    shutil.copyfileobj(src, out, 1 << 24)
                    size = 0
                if size:  # pragma: no cover - the file shrank while copied
                    raise RuntimeError(f"{part} could not be copied whole")
            part.unlink()
        os.fsync(out.fileno())
    os.chmod(parts[0], 0o666 & ~_umask())
    os.replace(parts[0], path)


def _write_lines(fh: Any, records: list[Record], encode: Any) -> None:
    for at in range(0, len(records), 10_000):
        fh.write("".join([encode(r) + "\n" for r in records[at : at + 10_000]]))


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _specs(feature_names: Sequence[str] | None, pair: bool, settings: dict[str, Any]) -> list[Any]:
    from zdebias.features.catalogue import feature_specs

    return feature_specs(feature_names, pair=pair, settings=settings)


def _serve(conn: Any, shard: _Shard) -> None:
    """A worker's loop: run each ``(method, args)`` received, send back ``("ok", value)`` or
    ``("error", exception)`` (a generator's items first, each as ``("part", item)``); stop on
    None."""
    try:
        while True:
            message = conn.recv()
            if message is None:
                break
            method, args = message
            try:
                value = getattr(shard, method)(*args)
                if inspect.isgenerator(value):  # parts as they come, then what it returns
                    while True:
                        try:
                            part = next(value)
                        except StopIteration as stop:
                            value = stop.value
                            break
                        conn.send(("part", part))
                reply: tuple[str, Any] = ("ok", value)
            except BaseException as err:  # sent to the parent, which raises it
                reply = ("error", _picklable(err))
            conn.send(reply)
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        conn.close()


def _picklable(err: BaseException) -> BaseException:
    import pickle

    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:
        text = "".join(traceback.format_exception(err))
        return RuntimeError(f"a z-filter worker failed:\n{text}")


class _Workers:
    """One forked process per :class:`_Shard` (a byte range, or records already read)."""

    def __init__(self, shards: list[_Shard]) -> None:
        ctx = multiprocessing.get_context("fork")
        self.conns: list[Any] = []
        self.procs: list[Any] = []
        for shard in shards:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(child, shard), daemon=True)
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)

    def call(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Run ``method`` in every worker at once (``args[i]`` for worker i); their results in
        order as ``(value, parts)``, or the first worker's error (the earliest in the file)
        raised."""
        self.send(method, args)
        return self.gather()

    def send(self, method: str, args: Sequence[tuple[Any, ...]]) -> None:
        """Start ``method`` in every worker (``args[i]`` for worker i)."""
        for conn, a in zip(self.conns, args, strict=True):
            conn.send((method, a))

    def gather(self) -> list[Any]:
        """The results of what :meth:`send` started, in order, each as ``(value, parts)`` (a
        generator method's returned value and items); the first error raised."""
        from multiprocessing.connection import wait

        parts: list[list[Any]] = [[] for _ in self.conns]
        replies: list[Any] = [None] * len(self.conns)
        pending = {conn: i for i, conn in enumerate(self.conns)}
        while pending:
            for conn in wait(list(pending)):
                i = pending[conn]
                try:
                    kind, value = conn.recv()  # type: ignore[union-attr]
                except EOFError:
                    proc = self.procs[i]
                    proc.join(timeout=5)
                    killed = " (killed: out of memory?)" if proc.exitcode == -9 else ""
                    raise ZdebiasError(
                        f"a z-filter worker process (pid {proc.pid}) died with exit code "
                        f"{proc.exitcode}{killed}; rerun with --num-proc 1 for one process"
                    ) from None
                if kind == "part":
                    parts[i].append(value)
                else:
                    replies[i] = (kind, value)
                    del pending[conn]
        for kind, value in replies:
            if kind == "error":
                raise value
        return [(value, got) for (_, value), got in zip(replies, parts, strict=True)]

    def close(self, *, kill: bool = False) -> None:
        """Stop the workers: ask them to end and wait; ``kill``: end them now (after an
        error, when they may still be busy)."""
        if kill:
            for proc in self.procs:
                proc.kill()
        for conn in self.conns:
            try:
                conn.send(None)
                conn.close()
            except (OSError, BrokenPipeError):
                pass
        for proc in self.procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()


# --------------------------------------------------------------------------- parent side


def _combine(final: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One worker's read: its report and its chunks' parts put together."""
    return {
        **final,
        "chunks": [p["chunk"] for p in parts],
        "y": _concat([p["y"] for p in parts]),
        "meta_preds": _concat([p["meta_preds"] for p in parts]),
        "ids": [p["ids"] for p in parts],
        "id_hashes": _concat([p["id_hashes"] for p in parts]),
        "hypotheses": [p["hypotheses"] for p in parts if p["hypotheses"] is not None],
    }


def _hypothesis_codes(results: list[dict[str, Any]]) -> np.ndarray:
    """Each row's hypothesis as an integer (equal texts, equal codes) across the workers."""
    index: dict[str, int] = {}
    parts = []
    for codes, texts in chain.from_iterable(r["hypotheses"] for r in results):
        remap = np.fromiter(
            (index.setdefault(t, len(index)) for t in texts), dtype=np.int64, count=len(texts)
        )
        parts.append(remap[codes] if len(codes) else codes)
    return _concat(parts)


def _distinct(ctx: Any, codes: np.ndarray) -> None:
    """Give ``ctx`` (no records) the hypothesis n-grams per distinct text and each row's text,
    as extraction over records leaves them (distinct texts in first-seen order; ``codes``: each
    row's hypothesis as an integer): the hypothesis-only model then fits on distinct
    hypotheses, exactly as in one process."""
    from zdebias.features.parallel import HYPO_NGRAM_KEYS

    if not all(key in ctx.cache for key in HYPO_NGRAM_KEYS):
        return  # no hypothesis-only feature
    uniq, first, inv = np.unique(codes, return_index=True, return_inverse=True)
    if len(uniq) == len(codes):
        return  # every text distinct: one row per record, as extraction leaves it
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    ctx.cache[("inverse", "hypothesis")] = rank[inv.ravel()]
    for key in HYPO_NGRAM_KEYS:
        ctx.cache[("distinct", *key)] = ctx.cache[key][0][first[order]]


def _features(
    results: list[dict[str, Any]],
    feature_names: Sequence[str] | None,
    settings: dict[str, Any],
    labels: tuple[str, ...],
    pair: bool,
) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    """The feature matrix, label ids, ``meta.hypo_only_pred`` indices and hypothesis codes
    (see :func:`_distinct`) of the rows the workers described, in file order."""
    from zdebias.features.context import FeatureContext
    from zdebias.features.hypothesis_only import LABEL_IDS, META_PREDICTIONS
    from zdebias.features.matrix import assemble_matrix
    from zdebias.features.parallel import merge_chunks

    y = _concat([r["y"] for r in results])
    meta_preds = _concat([r["meta_preds"] for r in results])
    hypotheses = _hypothesis_codes(results) if pair else np.zeros(0, dtype=np.int64)
    n = len(y)
    specs = _specs(feature_names, pair, settings)
    ctx = FeatureContext(range(n), settings, labels=labels, pair=pair)  # type: ignore[arg-type]
    ctx.cache[LABEL_IDS] = y
    ctx.cache[META_PREDICTIONS] = meta_preds
    chunks = list(chain.from_iterable(r["chunks"] for r in results))
    with gc_paused():
        if chunks:
            blocks, names, keys = merge_chunks(
                specs, chunks, ctx, settings, pair, ready=lambda c: _distinct(c, hypotheses)
            )
        else:
            blocks, names, keys = [], [], []
        ctx.cache.clear()  # the blocks it holds can go once copied into the matrix
        return assemble_matrix(blocks, names, keys, n), y, meta_preds, hypotheses


def _kept_matrix(
    fm: Any,
    kept: np.ndarray,
    y: np.ndarray,
    meta_preds: np.ndarray,
    hypotheses: np.ndarray,
    labels: tuple[str, ...],
    settings: dict[str, Any],
    pair: bool,
    feature_names: Sequence[str] | None,
) -> Any:
    """What extracting the features of the kept records alone gives, from the input's matrix:
    every group but the hypothesis-only one depends on its record alone, so its columns are the
    kept rows' (columns no kept record has dropped); the hypothesis-only feature is refitted on
    the kept rows, from their hypothesis n-grams."""
    from zdebias.features.context import FeatureContext
    from zdebias.features.groups import run_group
    from zdebias.features.hypothesis_only import LABEL_IDS, META_PREDICTIONS
    from zdebias.features.matrix import assemble_matrix
    from zdebias.features.parallel import HYPO_NGRAM_KEYS

    n = len(kept)
    sub = fm.matrix[kept]
    names, keys = list(fm.names), list(fm.keys)
    specs = _specs(feature_names, pair, settings)
    hypo = next((s for s in specs if s.name == "hypo-only"), None)
    if hypo is None:
        return assemble_matrix([sub], names, keys, n)
    ctx = FeatureContext(range(n), settings, labels=labels, pair=pair)  # type: ignore[arg-type]
    ctx.cache[LABEL_IDS] = y[kept]
    ctx.cache[META_PREDICTIONS] = meta_preds[kept]
    for key in HYPO_NGRAM_KEYS:
        cols = [
            j
            for j, k in enumerate(keys)
            if k.kind == "ngram" and k.field == "hypothesis" and len(k.tokens) == key[2]
        ]
        block = sub[:, cols]
        present = np.flatnonzero(np.bincount(block.indices, minlength=len(cols)))
        ctx.cache[key] = (
            block[:, present],
            [names[cols[j]] for j in present.tolist()],
            [keys[cols[j]] for j in present.tolist()],
        )
    _distinct(ctx, hypotheses[kept])
    parts, hypo_names, hypo_keys = run_group(hypo, ctx, range(n), settings, pair)  # type: ignore[arg-type]
    at = [j for j, k in enumerate(keys) if k.kind == "hypo-only"]
    if not at or at != list(range(at[0], at[-1] + 1)):  # pragma: no cover - never apart
        raise RuntimeError("hypothesis-only columns not found together in the matrix")
    p, q = at[0], at[-1] + 1
    return assemble_matrix(
        [sub[:, :p], *parts, sub[:, q:]],
        [*names[:p], *hypo_names, *names[q:]],
        [*keys[:p], *hypo_keys, *keys[q:]],
        n,
    )


def _report(path: str, results: list[dict[str, Any]]) -> ReadReport:
    tasks = [r["report"][0] for r in results]
    task = next((t for t in tasks if t != "?"), "?")
    report = ReadReport(path, "jsonl", task)
    for r in results:
        report.n_records += r["report"][1]
        report.n_unlabelled += r["report"][2]
        report.unlabelled_lines.extend(r["unlabelled_lines"])
        report.errors.extend(r["errors"])
    return report


def _warnings(
    results: list[dict[str, Any]], labels: tuple[str, ...], y: np.ndarray, path: str
) -> list[str]:
    from zdebias.data.options import label_and_id_warnings

    counts = np.bincount(y, minlength=len(labels))
    label_counts = Counter({labels[i]: int(c) for i, c in enumerate(counts.tolist()) if c})
    hashes = np.sort(_concat([r["id_hashes"] for r in results]))
    repeated = bool((hashes[1:] == hashes[:-1]).any())  # np.unique hashes: 15x slower
    parts = chain.from_iterable(r["ids"] for r in results)
    ids = (
        chain.from_iterable(p.split("\x00") if isinstance(p, str) else p for p in parts)
        if repeated
        else ()
    )
    return label_and_id_warnings(label_counts, len(y), ids, path, min_records=2)


def filter_sharded(
    path: str,
    out: Path,
    ranges: list[tuple[int, int]],
    read: ReadOptions,
    settings: ZFilterSettings,
    *,
    overwrite: bool,
    progress: bool,
) -> dict[str, Any]:
    """``zdebias filter PATH --out OUT`` with one process per byte range; the summary."""
    import logging

    from zdebias.data.options import skip_message

    log = logging.getLogger("zdebias")
    from zdebias.data.options import no_records_error
    from zdebias.data.writers import publish_folder
    from zdebias.stats.zfilter import filter_options, filter_summary, z_filter_matrix

    feature_names = settings.features
    kwargs = {k: v for k, v in settings.feature_kwargs().items() if k != "num_proc"}
    import scipy.sparse  # noqa: F401 - imported once here, not once per worker after the fork

    import zdebias.features.catalogue  # noqa: F401 - the feature groups' modules, likewise

    mmap_large_allocations()  # the chunks' blocks given back as merged, in parent and workers
    workers = _Workers([_Shard(path, read, start, end, kwargs) for start, end in ranges])
    try:
        status = _status(progress, f"reading and extracting features ({len(ranges)} processes)")
        try:
            results = [
                _combine(final, parts)
                for final, parts in workers.call(
                    "read_and_extract", [(feature_names,)] * len(ranges)
                )
            ]
        finally:
            if status is not None:
                status.stop()
        # while this process merges and filters, the workers encode the records they keep
        workers.send("encode", [()] * len(ranges))
        report = _report(path, results)
        if not report.n_records:
            raise no_records_error(report, "input")
        for line in skip_message(report):  # what the read skipped, as the commands tell it
            log.warning("%s", line)
        labels = report.labels
        assert labels is not None
        pair = next(r["pair"] for r in results if len(r["y"]))
        y = _concat([r["y"] for r in results])
        for line in _warnings(results, labels, y, path):
            log.warning("%s", line)
        fm, y, meta_preds, hypotheses = _features(results, feature_names, kwargs, labels, pair)
        sizes = [len(r["y"]) for r in results]
        del results
        n = len(y)
        arrays = z_filter_matrix(
            fm.matrix,
            y,
            len(labels),
            rows=np.arange(n),
            seed_rows=np.arange(0),
            progress=progress,
            **filter_options(settings),
        )

        def build(work: Path) -> dict[str, Any]:
            workers.gather()  # the encoding
            n_parts = _write_in_workers(workers, work, arrays, sizes, fm)
            # meanwhile: the summary and `zdebias stats` of the kept records
            summary = filter_summary(fm, y, labels, arrays, settings)
            of_kept = kept_summary(
                fm, arrays.accepted, y, meta_preds, hypotheses, labels, settings, pair
            )
            workers.gather()
            return _finish(work, n_parts, path, summary, of_kept, report)

        return publish_folder(out, build, overwrite=overwrite)
    finally:
        workers.close()


def _write_in_workers(workers: _Workers, work: Path, arrays: Any, sizes: list[int], fm: Any) -> int:
    """Start each worker writing its rows' kept and rejected lines (``sizes``: each worker's
    row count, in order) as part files in ``work``; how many parts."""
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    args = []
    rows, cols = arrays.rejected_by_rows, arrays.rejected_by_features
    for i, (a, b) in enumerate(pairwise(offsets)):
        acc = arrays.accepted[(arrays.accepted >= a) & (arrays.accepted < b)] - a
        rej = arrays.rejected[(arrays.rejected >= a) & (arrays.rejected < b)] - a
        sel = (rows >= a) & (rows < b)
        shard_cols = cols[sel]
        used = np.unique(shard_cols).tolist()
        names = {j: fm.names[j] for j in used}
        keys = {j: fm.keys[j].to_dict() for j in used}
        args.append((str(work), i, _Rows(acc, rej, rows[sel] - a, shard_cols, names, keys)))
    workers.send("write", args)
    return len(args)


def _finish(
    work: Path,
    n_parts: int,
    path: str,
    summary: dict[str, Any],
    of_kept: dict[str, Any] | None,
    report: ReadReport,
) -> dict[str, Any]:
    """Join the workers' part files and write ``summary.json``; the summary."""
    from zdebias.data.writers import write_json

    for name in ("kept", "rejected"):
        _join([work / f"{name}.part-{i}" for i in range(n_parts)], work / f"{name}.jsonl")
    full = {
        "path": path,
        "seed_data": None,
        **summary,
        "stats_of_kept": of_kept,
        "read": report.summary(),
        "read_seed": None,
    }
    write_json(full, work / "summary.json")
    return full


def writer_size(
    path: str, read: ReadOptions, settings: ZFilterSettings, *, seed_data: str | None = None
) -> int | None:
    """The size of ``path`` when :func:`filter_records` applies to it, else None: a file
    :func:`plan_shards` could cut (a plain local JSONL file, no seed, ``--limit`` or trained
    hypothesis-only model) of at least :data:`WRITER_MIN_BYTES`, on more than one core,
    ``num_proc`` not 1."""
    from zdebias.features.parallel import available_cores

    if settings.num_proc == 1 or available_cores() < 2:
        return None
    size = _plain_jsonl_size(path, read, settings, seed_data)
    return size if size is not None and size >= WRITER_MIN_BYTES else None


def filter_records(
    path: str,
    out: Path,
    size: int,
    read: ReadOptions,
    settings: ZFilterSettings,
    read_input: Callable[[], tuple[list[Record], ReadReport]],
    *,
    overwrite: bool,
    progress: bool,
) -> dict[str, Any]:
    """``zdebias filter`` in this process with a second one to write the output; the summary.

    The second process, forked before anything is read, reads the file (``size`` bytes) while
    this one does (``read_input()``), then waits; once Algorithm 1 has run it writes
    ``kept.jsonl`` and ``rejected.jsonl`` while this one computes the statistics of the kept
    rows. The same bytes as :func:`~zdebias.stats.zfilter.z_filter` and
    :func:`~zdebias.data.writers.publish_files` write (and as :func:`filter_sharded`).
    """
    from zdebias.data.writers import publish_folder
    from zdebias.stats.zfilter import filter_summary, z_filter_arrays

    workers = _Workers([_Shard(path, read, 0, size, {})])
    done = False
    try:
        workers.send("keep_records", [()])
        records, report = read_input()
        given = report.labels if report.task != "?" else None
        fm, y, arrays, labels = z_filter_arrays(records, settings, labels=given, progress=progress)

        def build(work: Path) -> dict[str, Any]:
            workers.gather()  # its reading, long done
            n_parts = _write_in_workers(workers, work, arrays, [len(records)], fm)
            # meanwhile: the summary and `zdebias stats` of the kept records
            summary = filter_summary(fm, y, labels, arrays, settings)
            of_kept = _kept_summary_of(fm, arrays, records, settings, labels)
            workers.gather()
            return _finish(work, n_parts, path, summary, of_kept, report)

        full = publish_folder(out, build, overwrite=overwrite)
        done = True
        return full
    finally:
        workers.close(kill=not done)


def _status(show: bool, text: str) -> Any:
    if not show:
        return None
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:  # nothing to animate; a bare newline would be all it leaves
        return None
    status = console.status(text)
    status.start()
    return status


__all__ = [
    "CHUNK_ROWS",
    "KEEP_ROWS",
    "SHARD_MIN_BYTES",
    "WRITER_MIN_BYTES",
    "filter_records",
    "filter_sharded",
    "kept_summary",
    "kept_summary_of",
    "matrix_describes_kept",
    "plan_shards",
    "writer_size",
]
