"""HF ``datasets`` inputs and outputs: hub names, ``save_to_disk`` folders, Arrow files.

- ``hf:NAME[@CONFIG][:SPLIT[@REVISION]]``: :func:`datasets.load_dataset`, not streaming, so
  the data is cached and a later read works offline from the cache
  (``hf:stanfordnlp/snli:train``, ``hf:nyu-mll/glue@sst2:validation@bcdcba7``). NAME may be a
  local folder of data files, as ``load_dataset`` allows.
- a ``save_to_disk`` folder (``dataset_info.json`` + ``state.json``; a ``DatasetDict``
  folder, ``dataset_dict.json``, needs ``DIR::SPLIT`` unless it has one split);
- an ``.arrow`` file, in the IPC stream format ``datasets`` writes or the IPC file format.

Each source yields ``(0, column names)`` then ``(row number, row)`` from 1, like the other
readers; integer labels of a ``ClassLabel`` column are read as its names. ``datasets`` is
imported only here, and only when such an input is read or written.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError

#: Files that mark a ``save_to_disk`` folder: one Dataset, or a DatasetDict.
DATASET_FILES = ("state.json", "dataset_info.json")
DATASET_DICT_FILE = "dataset_dict.json"

Rows = Iterator[tuple[int, Any]]


def _datasets() -> Any:
    try:
        import datasets
    except ImportError as err:  # pragma: no cover - datasets is a dependency
        raise ConfigError(f"reading HF datasets needs the 'datasets' package: {err}") from None
    return datasets


def parse_spec(spec: str) -> tuple[str, str | None, str, str | None]:
    """``hf:NAME[@CONFIG][:SPLIT[@REVISION]]`` → (name, config, split, revision); the split
    defaults to ``train``."""
    body = spec[3:] if spec.startswith("hf:") else spec
    head, _, tail = body.partition(":")
    name, _, config = head.partition("@")
    split, _, revision = tail.partition("@")
    if not name:
        raise ConfigError(f"{spec}: no dataset name; expected hf:NAME[@CONFIG][:SPLIT[@REVISION]]")
    return name, config or None, split or "train", revision or None


def label_names(features: Any) -> list[str] | None:
    """The names of a ``ClassLabel`` ``label`` / ``gold_label`` column, if there is one."""
    names = None
    for key in ("label", "gold_label"):
        feat = features.get(key) if features else None
        if feat is not None and hasattr(feat, "names"):
            names = list(feat.names)
    return names


def load_hub(spec: str) -> Any:
    """The ``datasets.Dataset`` of an ``hf:`` spec (downloaded once, then from the cache)."""
    datasets = _datasets()
    name, config, split, revision = parse_spec(spec)
    try:
        return datasets.load_dataset(name, config, split=split, revision=revision)
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DataError(f"could not load HF dataset: {first}", path=spec) from None


def fingerprint(spec: str) -> dict[str, Any]:
    """What identifies an ``hf:`` input's content, for recipe hashes: the spec, the loaded
    dataset's fingerprint (it changes with the resolved revision and the data files) and
    its size."""
    ds = load_hub(spec)
    return {"hf": spec, "fingerprint": ds._fingerprint, "n_rows": ds.num_rows}


def is_saved_dataset(path: Path) -> bool:
    """Whether ``path`` is a folder ``save_to_disk`` wrote (a Dataset or a DatasetDict)."""
    return path.is_dir() and (
        all((path / f).is_file() for f in DATASET_FILES) or (path / DATASET_DICT_FILE).is_file()
    )


def load_saved(path: Path, split: str | None) -> Any:
    """The Dataset of a ``save_to_disk`` folder (``split``: which one of a DatasetDict)."""
    datasets = _datasets()
    try:
        ds = datasets.load_from_disk(str(path))
    except Exception as err:
        raise DataError(f"not a readable datasets folder: {err}", path=str(path)) from None
    if isinstance(ds, datasets.DatasetDict):
        names = list(ds)
        if split is None and len(names) == 1:
            split = names[0]
        if split not in ds:
            raise DataError(
                f"folder holds splits {', '.join(names)}; name one as {path}::SPLIT",
                path=str(path),
            )
        return ds[split]
    if split is not None:
        raise DataError(f"one dataset, no splits; drop '::{split}'", path=str(path))
    return ds


def dataset_rows(ds: Any) -> Rows:
    """``(0, columns)`` then ``(i, row)`` of a ``datasets.Dataset``, rows from 1."""
    yield 0, list(ds.column_names)
    yield from enumerate(ds, 1)


def hub_rows(spec: str) -> tuple[Rows, list[str] | None]:
    """Rows of an ``hf:`` spec and its label names."""
    ds = load_hub(spec)
    return dataset_rows(ds), label_names(ds.features)


def saved_rows(path: Path, split: str | None) -> tuple[Rows, list[str] | None]:
    """Rows of a ``save_to_disk`` folder and its label names."""
    ds = load_saved(path, split)
    return dataset_rows(ds), label_names(ds.features)


def arrow_rows(path: Path) -> tuple[Rows, list[str] | None]:
    """Rows of an Arrow IPC file (stream or file format), read batch by batch."""
    import pyarrow as pa

    if not path.is_file():
        raise DataError("no such file", path=str(path))
    with path.open("rb") as fh:
        is_file_format = fh.read(6) == b"ARROW1"
    try:
        source = pa.memory_map(str(path), "r")
        reader = pa.ipc.open_file(source) if is_file_format else pa.ipc.open_stream(source)
    except (pa.ArrowInvalid, OSError) as err:
        raise DataError(f"not a readable Arrow file: {err}", path=str(path)) from None
    schema = reader.schema
    names = None
    if schema.metadata and b"huggingface" in schema.metadata:
        with contextlib.suppress(Exception):
            names = label_names(_datasets().Features.from_arrow_schema(schema))

    def batches() -> Iterator[Any]:
        if is_file_format:
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)
        else:
            yield from reader

    def rows() -> Rows:
        yield 0, list(schema.names)
        n = 0
        try:
            for batch in batches():
                for item in batch.to_pylist():
                    n += 1
                    yield n, item
        except pa.ArrowInvalid as err:
            raise DataError(f"corrupt Arrow data: {err}", path=str(path), line=n + 1) from None

    return rows(), names


def write_saved(records: Iterable[Record], folder: Path, labels: Iterable[str] | None) -> int:
    """Write ``records`` into the (empty) folder ``folder`` with ``save_to_disk``: columns
    ``id``, ``premise``/``hypothesis`` or ``text``, ``label`` (a ``ClassLabel`` of ``labels``
    when given, else names) and ``meta`` (a JSON string). Returns the number of rows."""
    datasets = _datasets()
    rows = [r.to_dict() for r in records]
    pair = not rows or "premise" in rows[0]
    texts = ["premise", "hypothesis"] if pair else ["text"]
    columns: dict[str, list[Any]] = {c: [row[c] for row in rows] for c in ["id", *texts]}
    label_list = list(labels) if labels is not None else None
    if label_list:
        index = {name: i for i, name in enumerate(label_list)}
        columns["label"] = [index[row["label"]] for row in rows]
        label_feature = datasets.ClassLabel(names=label_list)
    else:
        columns["label"] = [row["label"] for row in rows]
        label_feature = datasets.Value("string")
    columns["meta"] = [json.dumps(row["meta"], ensure_ascii=False, default=str) for row in rows]
    features = datasets.Features(
        {
            **{c: datasets.Value("string") for c in ["id", *texts]},
            "label": label_feature,
            "meta": datasets.Value("string"),
        }
    )
    ds = datasets.Dataset.from_dict(columns, features=features)
    quiet = not datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        ds.save_to_disk(str(folder))
    finally:
        if not quiet:
            datasets.enable_progress_bars()
    return len(rows)


def publish_saved(
    records: Iterable[Record], out: str | Path, labels: Iterable[str] | None, *, overwrite: bool
) -> int:
    """:func:`write_saved` into a hidden sibling of ``out``, renamed into place when complete
    (with the output marker, so ``--overwrite`` may later replace it). Returns the rows."""
    from zdebias.data.writers import publish_folder

    return publish_folder(out, lambda work: write_saved(records, work, labels), overwrite=overwrite)


__all__ = [
    "arrow_rows",
    "dataset_rows",
    "fingerprint",
    "hub_rows",
    "is_saved_dataset",
    "label_names",
    "load_hub",
    "load_saved",
    "parse_spec",
    "publish_saved",
    "saved_rows",
    "write_saved",
]
