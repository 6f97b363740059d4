"""Publish the training sets of a recipe run compactly, and rebuild them exactly.

A training set made of rows of a shared source file (a subset of D0, a pool sample, a
filter's output) is published as its ordered row ids; rows the source does not have
(generated or transformed rows) are published as their own rows (``NAME.own.jsonl.gz``), but
no text of the source is copied into them: a premise, hypothesis or text equal to a text of a
source row is written as a reference to it (``"premise_from": [ROW_ID, "premise"]``), which
the rebuild resolves from the source. ``sets.json`` records, per set, the row count and a
digest of its content (id, label, premise, hypothesis, text of every row, in order), so a
rebuild can be checked::

    python scripts/training_sets.py publish runs/snli-pool-cpu d0 z_aug d0_random d0_pool \\
        --source ../shared/data/snli_20k/train.jsonl --source-name snli_20k/train.jsonl \\
        --out docs/data/snli-pool-cpu --recipe configs/snli-pool-cpu.yaml
    python scripts/training_sets.py rebuild docs/data/snli-pool-cpu --data ../shared/data \\
        --out rebuilt/                      # NAME.jsonl per set; fails on any digest mismatch

The rebuilt files hold what training reads; the run's own files also carry ``meta`` (e.g.
Z-Aug's ``type`` tags), which the digest leaves out. Publications of the older form, whose own
rows were written whole (``rows_file``: ``NAME.rows.jsonl.gz``), still rebuild;
``externalize FOLDER --data DATA`` rewrites them in the referencing form, digests unchanged.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from zdebias.data.readers import read_records
from zdebias.data.schema import Record
from zdebias.data.writers import write_gzip, write_json, write_records

SETS_FILE = "sets.json"


def content_digest(records: list[Record]) -> str:
    """sha256 of the rows' id, label, premise, hypothesis and text, one JSON line each."""
    h = hashlib.sha256()
    for r in records:
        row = [r.id, r.label, r.premise, r.hypothesis, r.text]
        h.update(json.dumps(row, ensure_ascii=False).encode() + b"\n")
    return h.hexdigest()


def _stage_data(run: Path, name: str) -> Path:
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    for stage in manifest["stages"]:
        if stage["name"] == name:
            return run / stage["outputs"]["data"]["path"]
    raise SystemExit(f"{run}: no stage {name!r} in manifest.json")


def publish(
    run: Path, names: list[str], source: Path, source_name: str, out: Path, recipe: str
) -> dict:
    """Write ``NAME.ids.txt.gz`` (and ``NAME.own.jsonl.gz`` for rows not in the source, their
    source texts as references) per stage, and ``sets.json``."""
    source_records = read_records(source)
    by_id = {r.id: r for r in source_records}
    texts = _text_index(source_records)
    out.mkdir(parents=True, exist_ok=True)
    sets: dict[str, Any] = {}
    for name in names:
        records = read_records(_stage_data(run, name))
        own = [r for r in records if r.id not in by_id or _content(by_id[r.id]) != _content(r)]
        entry: dict[str, Any] = {
            "stage": name,
            "rows": len(records),
            "from_source": len(records) - len(own),
            "digest": content_digest(records),
            "ids": f"{name}.ids.txt.gz",
        }
        write_gzip("".join(f"{r.id}\n" for r in records).encode(), out / entry["ids"])
        if own:
            entry["own_file"] = f"{name}.own.jsonl.gz"
            _write_own(own, texts, out / entry["own_file"])
        sets[name] = entry
    doc = {"source": source_name, "recipe": recipe, "sets": sets}
    write_json(doc, out / SETS_FILE)
    return doc


def _content(r: Record) -> tuple[Any, ...]:
    return (r.label, r.premise, r.hypothesis, r.text)


def _bare(r: Record) -> Record:
    return Record(r.id, r.label, r.premise, r.hypothesis, r.text)


TEXT_FIELDS = ("premise", "hypothesis", "text")


def _text_index(source: list[Record]) -> dict[str, list[str]]:
    """Each text of the source (any text field) → ``[row id, field]`` of its first row, in
    source order and field order."""
    index: dict[str, list[str]] = {}
    for r in source:
        for field in TEXT_FIELDS:
            value = getattr(r, field)
            if value is not None:
                index.setdefault(value, [r.id, field])
    return index


def _own_row(r: Record, texts: dict[str, list[str]]) -> dict[str, Any]:
    """The JSON form of an own row: id, label, and each text field, or ``FIELD_from`` (a
    reference to the source row holding the very same text)."""
    row: dict[str, Any] = {"id": r.id, "label": r.label}
    for field in TEXT_FIELDS:
        value = getattr(r, field)
        if value is None:
            continue
        if value in texts:
            row[f"{field}_from"] = texts[value]
        else:
            row[field] = value
    return row


def _write_own(own: list[Record], texts: dict[str, list[str]], path: Path) -> None:
    lines = (json.dumps(_own_row(r, texts), ensure_ascii=False) + "\n" for r in own)
    write_gzip("".join(lines).encode(), path)


def _read_own(path: Path, by_id: dict[str, Record]) -> list[Record]:
    """The own rows of ``path``, their references resolved from the source rows ``by_id``."""
    records: list[Record] = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            fields: dict[str, str | None] = {}
            for field in TEXT_FIELDS:
                fields[field] = row.get(field)
                if f"{field}_from" in row:
                    rid, source_field = row[f"{field}_from"]
                    known = rid in by_id and source_field in TEXT_FIELDS
                    value = getattr(by_id[rid], source_field) if known else None
                    if value is None:
                        raise ValueError(
                            f"{path}:{n}: {field} refers to {source_field!r} of row {rid!r}, "
                            "which the source does not have"
                        )
                    fields[field] = value
            records.append(
                Record(
                    row["id"], row["label"], fields["premise"], fields["hypothesis"], fields["text"]
                )
            )
    return records


def rebuild(folder: Path, data: Path) -> dict[str, list[Record]]:
    """Every published set, rebuilt from ``folder`` and the source under ``data``; raises
    ``ValueError`` when a set's row count or digest differs from ``sets.json``."""
    doc = json.loads((folder / SETS_FILE).read_text(encoding="utf-8"))
    by_id = {r.id: r for r in read_records(data / doc["source"])}
    built: dict[str, list[Record]] = {}
    for name, entry in doc["sets"].items():
        own: dict[str, Record] = {}
        if "own_file" in entry:
            own = {r.id: r for r in _read_own(folder / entry["own_file"], by_id)}
        elif "rows_file" in entry:  # the older form: own rows written whole
            own = {r.id: r for r in read_records(folder / entry["rows_file"])}
        with gzip.open(folder / entry["ids"], "rt", encoding="utf-8") as fh:
            ids = [line.rstrip("\n") for line in fh if line.strip()]
        missing = [(n, i) for n, i in enumerate(ids, 1) if i not in own and i not in by_id]
        if missing:
            line, rid = missing[0]
            raise ValueError(
                f"{folder / entry['ids']}:{line}: id {rid!r} is neither in {doc['source']} nor "
                f"in the set's own rows ({len(missing):,} such ids)"
            )
        records = [_bare(own[i] if i in own else by_id[i]) for i in ids]
        if len(records) != entry["rows"]:
            raise ValueError(f"{name}: {len(records)} rows rebuilt, {entry['rows']} recorded")
        if content_digest(records) != entry["digest"]:
            raise ValueError(f"{name}: the rebuilt rows differ from the recorded digest")
        built[name] = records
    return built


def externalize(folder: Path, data: Path) -> list[Path]:
    """Rewrite a publication of the older form (``rows_file``: own rows whole) in the
    referencing form (``own_file``), checking every set's digest before and after; returns the
    old rows files, which the caller removes (``git rm``)."""
    rebuild(folder, data)
    doc = json.loads((folder / SETS_FILE).read_text(encoding="utf-8"))
    texts = _text_index(read_records(data / doc["source"]))
    old: list[Path] = []
    for name, entry in doc["sets"].items():
        if "rows_file" not in entry:
            continue
        own = read_records(folder / entry["rows_file"])
        own_file = f"{name}.own.jsonl.gz"
        _write_own(own, texts, folder / own_file)
        old.append(folder / entry["rows_file"])
        # the same place in the entry, under the new key
        doc["sets"][name] = {
            ("own_file" if k == "rows_file" else k): (own_file if k == "rows_file" else v)
            for k, v in entry.items()
        }
    write_json(doc, folder / SETS_FILE)
    rebuild(folder, data)
    return old


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    pub = sub.add_parser("publish", help="ids (and own rows) of a run's training sets")
    pub.add_argument("run", type=Path)
    pub.add_argument("stages", nargs="+")
    pub.add_argument("--source", type=Path, required=True, help="the file the rows come from")
    pub.add_argument("--source-name", required=True, help="its path under the data folder")
    pub.add_argument("--out", type=Path, required=True)
    pub.add_argument("--recipe", required=True, help="the recipe the run was made with")
    reb = sub.add_parser("rebuild", help="rebuild and check every published set")
    reb.add_argument("folder", type=Path)
    reb.add_argument("--data", type=Path, required=True, help="the shared data folder")
    reb.add_argument("--out", type=Path, help="write NAME.jsonl per set here")
    ext = sub.add_parser("externalize", help="rewrite own rows whole as references")
    ext.add_argument("folder", type=Path)
    ext.add_argument("--data", type=Path, required=True, help="the shared data folder")
    args = parser.parse_args()
    if args.command == "externalize":
        try:
            old = externalize(args.folder, args.data)
        except ValueError as err:
            sys.exit(f"externalize failed: {err}")
        for path in old:
            print(f"{path}: replaced (remove it)")
        return
    if args.command == "publish":
        doc = publish(args.run, args.stages, args.source, args.source_name, args.out, args.recipe)
        for name, entry in doc["sets"].items():
            print(f"{name}: {entry['rows']:,} rows ({entry['from_source']:,} from the source)")
        return
    try:
        built = rebuild(args.folder, args.data)
    except ValueError as err:
        sys.exit(f"rebuild failed: {err}")
    for name, records in built.items():
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            write_records(records, args.out / f"{name}.jsonl")
        print(f"{name}: {len(records):,} rows, digest matches")


if __name__ == "__main__":
    main()
