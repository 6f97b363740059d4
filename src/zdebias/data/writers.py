"""Atomic writers: a temp file (or folder) beside the target, renamed into place when complete.

Output and model folders are built in a hidden sibling (:func:`work_dir_for`) and published
with :func:`publish_dir`: an existing non-empty folder is refused unless ``overwrite``; a
symlink, the current directory or one of its parents is always refused.

Every temporary file or folder is named ``.NAME.tmp-HOST-PID-RANDOM`` (``old-`` for an older
output being replaced): a writer killed before
it could clean up leaves one behind, and the next writer into that folder removes those whose
process (same host) is gone (:func:`remove_stale_temps`), and the ``.NAME.lock`` files of
killed publishers that no one holds (:func:`~zdebias.data.locks.remove_stale_lock`).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import IO, Any, TypeVar

from zdebias.data.locks import output_lock, remove_stale_lock
from zdebias.data.ownership import MARKER, check_ours, marker_doc, owner_of
from zdebias.data.schema import Record
from zdebias.errors import ConfigError

T = TypeVar("T")

#: the files and folders this process has put in place (renamed to their final path), in
#: order: a command stopped by Ctrl-C says whether it wrote anything
#: (:func:`zdebias.cli.interrupted_line`)
PUBLISHED: list[Path] = []


@contextlib.contextmanager
def atomic_open(
    path: str | Path, mode: str = "w", *, temp_dir: str | Path | None = None
) -> Iterator[IO[Any]]:
    """Open a temp file beside ``path`` (in ``temp_dir``, on the same file system, where
    given); rename it to ``path`` only if the block succeeds.

    No reader ever sees half a file, and a failed write leaves no file behind.
    """
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path} is a folder; expected a file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    where = path.parent if temp_dir is None else Path(temp_dir)
    remove_stale_temps(where)
    prefix = _temp_prefix(path.name if temp_dir is None else f"{path.parent.name}{path.name}")
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=where)
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
        PUBLISHED.append(path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _host() -> str:
    """A short tag of this machine, so a folder shared between hosts is swept only for ours."""
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def _temp_prefix(name: str, kind: str = "tmp") -> str:
    return f".{name}.{kind}-{_host()}-{os.getpid()}-"


_TEMP = re.compile(
    r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]+)-[^/]+$"
)
_SWEPT: set[Path] = set()


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is a temporary name zdebias gives (:func:`_temp_prefix`): only those
    are ever swept, never a user's ``.notes.tmp``."""
    return _TEMP.match(name) is not None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def remove_stale_temps(folder: str | Path, *, again: bool = False) -> list[str]:
    """Remove the temporary files and folders a killed zdebias writer left in ``folder``
    (named by :func:`_temp_prefix`, their process on this host gone); returns their names.
    An older output that :func:`publish_dir` had moved aside when its writer was killed, with
    nothing published in its place yet, is put back instead of removed. The lock files of
    killed publishers are removed too (:func:`~zdebias.data.locks.remove_stale_lock`).

    Done once per folder and process unless ``again``; never follows a symlink.
    """
    folder = Path(os.path.abspath(folder))
    if (folder in _SWEPT and not again) or not folder.is_dir():
        return []
    _SWEPT.add(folder)
    host, removed = _host(), []
    for entry in os.scandir(folder):
        if entry.name.endswith(".lock"):
            if remove_stale_lock(entry.path):
                removed.append(entry.name)
            continue
        match = _TEMP.match(entry.name)
        if not match or match["host"] != host or _alive(int(match["pid"])):
            continue
        with contextlib.suppress(OSError):
            is_dir = entry.is_dir(follow_symlinks=False)
            saved, target = Path(entry.path) / "old", folder / match["name"]
            if match["kind"] == "old" and is_dir and os.path.lexists(saved):
                if not os.path.lexists(target):
                    os.replace(saved, target)
            if is_dir:
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(entry.name)
    return removed


def current_umask() -> int:
    """The process umask (read by setting it and putting it back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(obj: Any, path: str | Path, *, temp_dir: str | Path | None = None) -> Path:
    """Write one JSON document atomically (indented, UTF-8; ``temp_dir``: :func:`atomic_open`)."""
    with atomic_open(path, temp_dir=temp_dir) as fh:
        json.dump(obj, fh, indent=2, ensure_ascii=False, default=_json_default)
        fh.write("\n")
    return Path(path)


def write_gzip(data: bytes, path: str | Path) -> Path:
    """``data`` gzipped into ``path`` atomically, level 9, with no time stamp or file name in
    the header: the same data gives the same bytes wherever it is written."""
    import gzip

    target = Path(path)
    with atomic_open(target, "wb") as fh:
        fh.write(gzip.compress(data, compresslevel=9, mtime=0))
    return target


def write_gzip_json(doc: Any, path: str | Path) -> Path:
    """``doc`` as compact, key-sorted JSON, gzipped by :func:`write_gzip`."""
    text = json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return write_gzip(text.encode(), path)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


#: Records encoded per write call.
JSONL_BLOCK = 4096


#: Records per task when several processes encode one JSONL file.
JSONL_TASK = 50_000
_ENCODE: dict[str, Any] = {}


#: Most JSON texts of shared meta items and lists one :class:`RecordEncoder` remembers.
SHARED_JSON = 100_000


class RecordEncoder:
    """One record's JSONL line, exactly ``json.JSONEncoder(ensure_ascii=False).encode(
    record.to_dict())`` (the same bytes), 2-3x faster: string fields go through json's C
    string encoder, and a list or dict shared by many records' ``meta`` (the filter's
    ``rejected_by`` lists, and the meta dicts it shares) is encoded once. Records must not
    change while being written.
    """

    def __init__(self) -> None:
        self._encode = json.JSONEncoder(ensure_ascii=False, default=_json_default).encode
        self._string = json.encoder.encode_basestring  # what the encoder uses for str
        #: id of a dict met inside a meta list, or the ids of a list's items → (the object(s),
        #: kept alive so that their ids stay theirs; the JSON)
        self._shared: dict[Any, tuple[Any, str]] = {}
        #: meta key → its JSON and ": " (string keys only)
        self._heads: dict[Any, str] = {}

    def __call__(self, record: Record) -> str:
        cut = self.split(record)
        if cut is None:
            return self._encode(record.to_dict())
        head, meta = cut
        return head + meta + "}"

    def split(self, record: Record) -> tuple[str, str] | None:
        """The record's line but its final ``}`` as the part up to ``"meta": `` and the meta
        JSON, or None where only the plain encoder is sure to be exact."""
        r, string = record, self._string
        meta = self._meta(r.meta)
        if meta is not None and type(r.id) is str and type(r.label) is str:
            if r.text is None and type(r.premise) is str and type(r.hypothesis) is str:
                return (
                    f'{{"id": {string(r.id)}, "premise": {string(r.premise)}, '
                    f'"hypothesis": {string(r.hypothesis)}, "label": {string(r.label)}, '
                    '"meta": '
                ), meta
            if type(r.text) is str and r.premise is None and r.hypothesis is None:
                return (
                    f'{{"id": {string(r.id)}, "text": {string(r.text)}, '
                    f'"label": {string(r.label)}, "meta": '
                ), meta
        return None

    def meta_items(self, items: dict[str, Any]) -> str:
        """The JSON of some meta items as they appear inside a meta object (no braces)."""
        text = self._meta(items)
        if text is None:
            raise TypeError("meta items need string keys")
        return text[1:-1]

    def _meta(self, meta: Any) -> str | None:
        """``meta`` as JSON, or None where only the plain encoder is sure to be exact."""
        if type(meta) is not dict:
            return None
        if not meta:
            return "{}"
        known = self._shared.get(id(meta))
        if known is not None and known[0] is meta:  # a meta dict shared by many records
            return known[1]
        parts = []
        heads = self._heads
        shared = self._shared
        seen = 0  # values that are lists met before (the same objects)
        for key, value in meta.items():
            head = heads.get(key)
            if head is None:
                if type(key) is not str:
                    return None
                head = self._string(key) + ": "
                if len(heads) < SHARED_JSON:
                    heads[key] = head
            kind = type(value)
            if kind is str:
                parts.append(head + self._string(value))
            elif kind is list:
                text, met = self._list(value)
                seen += met
                parts.append(head + text)
            else:
                parts.append(head + self._encode(value))
        joined = "{" + ", ".join(parts) + "}"
        if seen == len(meta) and len(shared) < SHARED_JSON:  # a dict of shared lists: shared too
            shared[id(meta)] = (meta, joined)
        return joined

    def _list(self, value: list[Any]) -> tuple[str, bool]:
        """A list of a meta as JSON, and whether this very list was met before: the same list,
        or one with the same items (by identity), as an earlier one reuses its JSON."""
        shared = self._shared
        known = shared.get(id(value))
        if known is not None and known[0] is value:
            return known[1], True
        key = tuple(map(id, value))
        known = shared.get(key)
        if known is None:
            # the items are kept (in the key's tuple) so that their ids stay theirs
            known = (tuple(value), "[" + ", ".join(map(self._item, value)) + "]")
            if len(shared) < SHARED_JSON:
                shared[key] = known
        if len(shared) < SHARED_JSON:
            shared[id(value)] = (value, known[1])
        return known[1], False

    def _item(self, value: Any) -> str:
        kind = type(value)
        if kind is str:
            return self._string(value)
        if kind is dict:
            known = self._shared.get(id(value))
            if known is None:
                known = (value, self._encode(value))
                if len(self._shared) < SHARED_JSON:
                    self._shared[id(value)] = known
            return known[1]
        return self._encode(value)


class EncodedLines:
    """Records encoded as JSONL lines ahead of writing (a process with time to spare), each
    writable as it is or with meta items appended (the z-filter's ``rejected_by`` lists): the
    bytes :class:`RecordEncoder` writes for the record, or for a copy with those items added
    at the end of its ``meta``. A record the encoder would not take its fast route for, or
    whose meta already holds an appended key, is kept as it is and encoded when written.
    """

    def __init__(self, records: Iterable[Record], appended: Iterable[str] = ()) -> None:
        self.encode = RecordEncoder()
        appended = set(appended)
        #: each record's line without its final "}" (or "" for one kept as a record)
        self.lines: list[str] = []
        #: where each line's meta JSON starts (-1: a record kept as it is)
        self.cuts: list[int] = []
        #: row → record, for the records kept as they are
        self.records: dict[int, Record] = {}
        for i, record in enumerate(records):
            cut = self.encode.split(record)
            if cut is None or (appended and not appended.isdisjoint(record.meta)):
                self.records[i] = record
                self.lines.append("")
                self.cuts.append(-1)
            else:
                head, meta = cut
                self.lines.append(head + meta)
                self.cuts.append(len(head))

    def __len__(self) -> int:
        return len(self.lines)

    def line(self, row: int) -> str:
        """Row ``row``'s line, without the newline."""
        if self.cuts[row] < 0:
            return self.encode(self.records[row])
        return self.lines[row] + "}"

    def line_with(self, row: int, items: dict[str, Any], items_json: str) -> str:
        """Row ``row``'s line with ``items`` added at the end of its meta (``items_json``:
        their :meth:`RecordEncoder.meta_items`), without the newline."""
        cut = self.cuts[row]
        if cut < 0:
            r = self.records[row]
            return self.encode(
                Record(r.id, r.label, r.premise, r.hypothesis, r.text, {**r.meta, **items})
            )
        line = self.lines[row]
        if len(line) - cut == 2:  # "{}": no meta of its own
            return line[:cut] + "{" + items_json + "}}"
        return line[:-1] + ", " + items_json + "}}"


def _encode_rows(start: int, end: int) -> str:
    """Lines ``start:end`` of the JSONL being written (in a forked worker)."""
    encode = RecordEncoder()
    records = _ENCODE["records"]
    return "".join([encode(records[i]) + "\n" for i in range(start, end)])


def _write_jsonl_parallel(records: list[Record], path: str | Path, num_proc: int) -> int:
    from zdebias.data.process import forked_pool

    n = len(records)
    starts = list(range(0, n, JSONL_TASK))
    ends = [min(start + JSONL_TASK, n) for start in starts]
    _ENCODE["records"] = records  # the forked workers read them, nothing is pickled
    try:
        with (
            atomic_open(path) as fh,
            forked_pool(num_proc) as pool,
        ):
            for text in pool.map(_encode_rows, starts, ends):
                fh.write(text)
    finally:
        _ENCODE.clear()
    return n


def write_jsonl(records: Iterable[Record], path: str | Path, *, num_proc: int = 1) -> int:
    """Write records as JSONL atomically; returns how many were written.

    ``num_proc`` > 1: a list of more than :data:`JSONL_TASK` records is encoded by that many
    forked processes, in order; the file is the same byte for byte.
    """
    if (
        num_proc > 1
        and isinstance(records, list)
        and len(records) > JSONL_TASK
        and "fork" in _start_methods()
    ):
        return _write_jsonl_parallel(records, path, num_proc)
    encode = RecordEncoder()
    n = 0
    with atomic_open(path) as fh:
        it = iter(records)
        while block := [encode(r) for r in islice(it, JSONL_BLOCK)]:
            fh.write("\n".join(block))
            fh.write("\n")
            n += len(block)
    return n


#: the file formats an output's suffix names (``.json``: JSON Lines, as HF ``datasets`` reads
#: a ``.json`` file of one object a line)
SUFFIX_FORMATS = {
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
}
#: rows per parquet row group / write call
ROWS_PER_BATCH = 4096


def format_of_name(path: str | Path) -> str | None:
    """The format :data:`SUFFIX_FORMATS` gives ``path``'s suffix (None: not one of them)."""
    return SUFFIX_FORMATS.get(Path(path).suffix.lower())


def record_row(record: Record) -> dict[str, Any]:
    """A record as a flat table row: ``id``, ``premise``/``hypothesis`` or ``text``,
    ``label``, and ``meta`` as a JSON string (read back into ``meta`` by the readers)."""
    row = record.to_dict()
    row["meta"] = json.dumps(row["meta"], ensure_ascii=False, default=_json_default)
    return row


def _cell(value: Any) -> str:
    """A CSV / TSV cell: text as it is, nothing as empty, any other value as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=_json_default)


def write_rows(
    rows: Iterable[Mapping[str, Any]],
    path: str | Path,
    fmt: str,
    *,
    columns: list[str],
    schema: Any = None,
    whole: bool = False,
) -> int:
    """Write table rows (dicts) atomically as ``fmt``: ``jsonl``, ``csv``, ``tsv`` (the csv
    module: a header of ``columns``, fields quoted where needed) or ``parquet`` (pyarrow,
    a row group per :data:`ROWS_PER_BATCH` rows; ``schema``: its arrow schema, default
    every column a string); returns how many. Only ``columns`` are written, in that order
    (``whole``: JSONL rows as they are). Streams: memory holds one batch of rows."""
    n = 0
    it = iter(rows)
    if fmt == "jsonl":
        encode = json.JSONEncoder(ensure_ascii=False, default=_json_default).encode
        with atomic_open(path) as fh:
            while block := [
                encode(row if whole else {c: row.get(c) for c in columns})
                for row in islice(it, JSONL_BLOCK)
            ]:
                fh.write("\n".join(block) + "\n")
                n += len(block)
        return n
    if fmt in ("csv", "tsv"):
        import csv

        with atomic_open(path, "w") as fh:
            writer = csv.writer(fh, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
            writer.writerow(columns)
            for row in it:
                writer.writerow([_cell(row.get(c)) for c in columns])
                n += 1
        return n
    if fmt != "parquet":
        raise ConfigError(f"cannot write format {fmt!r}; expected one of jsonl, csv, tsv, parquet")
    import pyarrow as pa
    import pyarrow.parquet as pq

    if schema is None:
        schema = pa.schema([(c, pa.string()) for c in columns])
    with atomic_open(path, "wb") as fh, pq.ParquetWriter(fh, schema) as writer:
        while batch := list(islice(it, ROWS_PER_BATCH)):
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            n += len(batch)
    return n


def _record_columns(records: Iterable[Record]) -> tuple[list[str], Iterable[Record]]:
    """The table columns of some records (from the first: a pair or a text), and the
    records, still all there."""
    it = iter(records)
    first = next(it, None)
    if first is None:
        return ["id", "premise", "hypothesis", "label", "meta"], ()
    return list(first.to_dict()), itertools.chain((first,), it)


def write_table(records: Iterable[Record], path: str | Path, fmt: str) -> int:
    """Write records atomically as a ``csv``, ``tsv`` or ``parquet`` table of
    :func:`record_row` rows (``meta`` a JSON string column); returns how many."""
    columns, records = _record_columns(records)
    return write_rows(map(record_row, records), path, fmt, columns=columns)


def write_parquet(records: Iterable[Record], path: str | Path) -> int:
    """Write records as parquet atomically (``meta`` as a JSON string column)."""
    return write_table(records, path, "parquet")


def _start_methods() -> list[str]:
    import multiprocessing

    return multiprocessing.get_all_start_methods()


def write_records(records: Iterable[Record], path: str | Path, *, num_proc: int = 1) -> int:
    """Write records in the format the file name asks for (``.parquet``, ``.csv``, ``.tsv``;
    JSONL for any other name)."""
    fmt = format_of_name(path)
    if fmt in ("parquet", "csv", "tsv"):
        return write_table(records, path, fmt)
    return write_jsonl(records, path, num_proc=num_proc)


def write_together(files: Mapping[str | Path, Any]) -> list[Path]:
    """Write several output files of one command so that they change together: each is
    written in full under a temporary name, then all are renamed; a failure before the renames
    leaves every old file as it was; they are renamed in the order given. Lists of records are
    written as JSONL (parquet by a ``.parquet`` name), ``str`` as text, ``bytes`` as they are,
    anything else as JSON."""
    staged: list[tuple[Path, Path]] = []
    try:
        for target, content in files.items():
            path = Path(target)
            if path.is_dir():
                raise ConfigError(f"{path} is a folder; expected a file name")
            path.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temps(path.parent)
            fd, tmp_name = tempfile.mkstemp(
                prefix=_temp_prefix(path.name), suffix=".tmp", dir=path.parent
            )
            os.close(fd)
            tmp = Path(tmp_name)
            staged.append((tmp, path))
            records = isinstance(content, list | tuple) and all(
                isinstance(r, Record) for r in content
            )
            if isinstance(content, str | bytes):
                with atomic_open(tmp, "wb" if isinstance(content, bytes) else "w") as fh:
                    fh.write(content)
            elif records and path.name.endswith(".parquet"):
                write_parquet(content, tmp)
            elif records:
                write_jsonl(content, tmp)
            else:
                write_json(content, tmp)
        for tmp, path in staged:
            os.replace(tmp, path)
            PUBLISHED.append(path)
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    return [path for _, path in staged]


def write_files(
    folder: str | Path, files: Mapping[str, Any], *, num_proc: int = 1
) -> dict[str, Path]:
    """Write records lists (``.jsonl`` / ``.parquet`` names) and JSON documents (any other name)
    into ``folder`` by file name, each atomically; returns their paths. ``num_proc``: see
    :func:`write_jsonl`."""
    folder = Path(folder)
    for name, content in files.items():
        if name.endswith((".jsonl", ".parquet")):
            write_records(content, folder / name, num_proc=num_proc)
        else:
            write_json(content, folder / name)
    return {name: folder / name for name in files}


#: the ownership marker (:mod:`zdebias.data.ownership`), written last into an output folder
OUTPUT_MARKER = MARKER


def _absolute(out: str | Path) -> Path:
    """``out`` made absolute and normalised (``..`` folded) without following symlinks."""
    return Path(os.path.abspath(out))


def mark_owned(folder: str | Path, kind: str, **extra: Any) -> Path:
    """Write the ownership marker into ``folder`` (:func:`~zdebias.data.ownership.marker_doc`).

    Its temp file is made beside the folder, not in it, so the folder never holds a file
    without the marker: processes that claim one new folder together (``sample --worker 0/2``
    and ``1/2`` started at once) find it empty or marked, never foreign. A mount point, or a
    parent zdebias cannot write into, gets the temp file inside, as any other file."""
    folder = Path(folder)
    target = folder / MARKER
    beside = folder.parent if not os.path.ismount(folder) else None
    if beside is not None and not os.access(beside, os.W_OK | os.X_OK):
        beside = None
    return write_json(marker_doc(kind, **extra), target, temp_dir=beside)


def claim(folder: str | Path, kind: str, *, adopt: bool = False, **extra: Any) -> Path:
    """Start using ``folder`` (new, empty or zdebias's own) for a run that writes into it in
    place: create it and mark it unless marked; a foreign folder is refused. ``adopt``: the
    caller has checked that the folder holds this very run, written by a zdebias too old to
    mark it; it is marked and used."""
    path = Path(folder)
    if not adopt:
        check_ours(path)
    path.mkdir(parents=True, exist_ok=True)
    if owner_of(path) is None:
        mark_owned(path, kind, **extra)
    return path


def check_out_dir(
    out: str | Path,
    *,
    overwrite: bool,
    inputs: Iterable[str | Path] = (),
) -> None:
    """Fail with :class:`ConfigError` when :func:`publish_dir` would refuse ``out``.

    A non-empty folder is replaced only with ``overwrite`` and only if zdebias wrote it (its
    marker, :mod:`zdebias.data.ownership`); a file only with ``overwrite``. ``inputs``: paths
    the command reads; ``out`` may be none of them nor a folder holding one.
    """
    path = _absolute(out)
    if path.is_symlink():
        raise ConfigError(f"{out} is a symbolic link; choose a real folder for --out")
    cwd = Path.cwd().resolve()
    if path.exists() and (path.resolve() == cwd or path.resolve() in cwd.parents):
        raise ConfigError(f"{out} is the current directory or a parent of it; choose another --out")
    for given in inputs:
        source = _absolute(given)
        if path == source or path in source.parents:
            raise ConfigError(f"{out} is or holds the input {given}; choose another --out")
    check_ours(out)
    if path.exists() and (not path.is_dir() or any(path.iterdir())) and not overwrite:
        raise ConfigError(f"{out} exists and is not empty; pass --overwrite to replace it")


def work_dir_for(out: str | Path) -> Path:
    """A new empty hidden folder next to ``out`` (same filesystem, so the final rename is atomic).

    Creates ``out``'s parent if needed. The caller removes the folder if the work fails.
    """
    path = _absolute(out)
    if not path.name:
        raise ConfigError(f"{out} is not a folder name; choose another --out")
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path.parent)
    return Path(tempfile.mkdtemp(prefix=_temp_prefix(path.name), dir=path.parent))


def publish_dir(tmp: str | Path, out: str | Path, *, overwrite: bool) -> Path:
    """Rename the finished folder ``tmp`` to ``out``; returns ``out``.

    ``tmp`` must be on ``out``'s filesystem (see :func:`work_dir_for`). An existing ``out``
    (refused unless ``overwrite``) is first moved aside and removed only once ``tmp`` is in
    place; if that rename fails the old ``out`` is put back, so ``out`` is always either the
    old or the new folder, never a mix. ``out`` is checked again under its lock
    (:func:`~zdebias.data.locks.output_lock`): an output another process published meanwhile
    is replaced only with ``overwrite``.
    """
    with output_lock(out):
        return _replace_dir(Path(tmp), out, overwrite=overwrite)


def _replace_dir(tmp: Path, out: str | Path, *, overwrite: bool) -> Path:
    check_out_dir(out, overwrite=overwrite)
    path = _absolute(out)
    if not tmp.is_dir():
        raise ValueError(f"{tmp} is not a folder")
    if not path.exists():
        os.replace(tmp, path)
        PUBLISHED.append(path)
        return Path(out)
    old = Path(tempfile.mkdtemp(prefix=_temp_prefix(path.name, "old"), dir=path.parent)) / "old"
    try:
        os.replace(path, old)
        try:
            os.replace(tmp, path)
            PUBLISHED.append(path)
        except BaseException:
            os.replace(old, path)
            raise
    finally:
        with contextlib.suppress(OSError):
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old.parent)
            else:
                old.unlink(missing_ok=True)
                old.parent.rmdir()
    return Path(out)


def check_output_folder(out: str | Path, *, overwrite: bool) -> None:
    """:func:`check_out_dir` for an output folder: a file there is refused too."""
    out = Path(out)
    check_out_dir(out, overwrite=overwrite)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} exists and is not a folder")


def publish_files(
    out: str | Path, files: dict[str, Any], *, overwrite: bool = False, num_proc: int = 1
) -> dict[str, Path]:
    """Publish an output folder as a whole: records lists / JSON documents by file name.

    Everything is written into a temporary sibling folder, which :func:`publish_dir` renames
    into place once complete, so no reader ever sees new files next to an older run's. An
    existing non-empty ``out`` is refused unless ``overwrite`` (and then only a folder zdebias
    wrote). ``num_proc``: processes that encode large JSONL files (:func:`write_jsonl`).
    """
    out = Path(out)
    publish_folder(
        out, lambda work: write_files(work, files, num_proc=num_proc), overwrite=overwrite
    )
    return {name: out / name for name in files}


def publish_folder(out: str | Path, build: Callable[[Path], T], *, overwrite: bool = False) -> T:
    """Publish the folder ``build(work)`` writes as a whole (see :func:`publish_files`);
    returns what ``build`` returned. ``out`` gets :data:`OUTPUT_MARKER`, written last. The
    output's lock is held from the first check to the rename, so a second process publishing
    the same ``out`` fails with one line."""
    out = Path(out)
    with output_lock(out):
        check_output_folder(out, overwrite=overwrite)
        work = work_dir_for(out)
        try:
            result = build(work)
            files = sorted(str(p.relative_to(work)) for p in work.rglob("*") if p.is_file())
            mark_owned(work, "output", files=files)
            os.chmod(work, 0o777 & ~current_umask())
            publish_dir(work, out, overwrite=overwrite)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    return result
