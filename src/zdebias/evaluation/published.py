"""Compact predictions: what an evaluation needs to be recomputed without its models or run folder.

An evaluate stage keeps, beside its results, ``predictions.json.gz``: for every method and
seed the label it predicted on each row of each suite (one character per row, an index into
the suite's ``classes``), and for every suite its gold labels the same way, its rows' ordered
digest, HANS-style heuristic and subcase codes, and a shortcut split's verdict and carried
shortcuts per row. Label ids and codes only: no text of the evaluation sets is copied.

A published copy (:func:`detach`) drops the gold labels too, which are the datasets' own: each
suite names instead where its rows are read under the data folder (``source``: a path relative
to it, reader options and the row positions a subset or split slice took), with the digest of
its gold codes; :func:`attach` (and :func:`read_predictions` given ``data``) reads them back
and checks both the rows' digest and the gold codes' digest.

:func:`documents` replays the scoring of :func:`~zdebias.evaluation.suites.evaluate_models`
and :func:`~zdebias.evaluation.reliance.add_reliance` on those labels, so every table, group
metric and test the stage printed is rebuilt from the file alone, in seconds (docs/results.md).

>>> compact(["b", "a", "b"], ["a", "b"]), expand("101", ["a", "b"])
('101', ['b', 'a', 'b'])
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from zdebias.data.schema import Record
from zdebias.errors import ConfigError

if TYPE_CHECKING:
    from zdebias.evaluation.documents import EvaluationDocument
    from zdebias.stats.summaries import ShortcutSplitSummary

#: the compact file's ``kind`` and version
KIND = "zdebias-predictions"
VERSION = 1
#: its name in an evaluate stage's folder
FILE = "predictions.json.gz"
#: the code of a row no shortcut decides (its verdict is None)
FREE_CODE = "."
#: the run fields a document keeps besides its scores (``_run_info``'s and the labels)
RUN_FIELDS = (
    "model",
    "seed",
    "loss",
    "input",
    "base_model",
    "did_not_learn",
    "bias_expert",
    "best_dev_accuracy",
)
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def compact(labels: Sequence[str], classes: Sequence[str]) -> str:
    """One character per label: its index in ``classes`` (``0-9a-z``)."""
    index = {c: _DIGITS[i] for i, c in enumerate(classes)}
    return "".join(index[label] for label in labels)


def expand(codes: str, classes: Sequence[str]) -> list[str]:
    """The labels :func:`compact` coded."""
    return [classes[_DIGITS.index(c)] for c in codes]


def _classes(labels: Iterable[str], order: Sequence[str]) -> list[str]:
    seen = set(labels)
    if len(seen) > len(_DIGITS):
        raise ConfigError(f"{len(seen)} labels: compact predictions code at most {len(_DIGITS)}")
    ranked = {name: i for i, name in enumerate(order)}
    return sorted(seen, key=lambda lab: (ranked.get(lab, len(ranked)), lab))


def suite_entry(records: Sequence[Record], order: Sequence[str]) -> dict[str, Any]:
    """A suite's rows as codes: ``classes``, ``gold``, ``rows`` (the ordered digest the
    results carry), and ``heuristic`` / ``subcase`` / ``shortcut`` where rows have them."""
    from zdebias.evaluation.suites import GROUP_KEY, SUBGROUP_KEY, rows_digest

    gold = [str(r.label) for r in records]
    out: dict[str, Any] = {"n": len(records), "rows": rows_digest(records)}
    for key in (GROUP_KEY, SUBGROUP_KEY):
        values = [r.meta.get(key) for r in records]
        if any(v is not None for v in values):
            names = sorted({str(v) for v in values if v is not None})
            codes = [None if v is None else names.index(str(v)) for v in values]
            out[key] = {"names": names, "rows": codes}
    cuts = [(r.meta or {}).get("shortcut") for r in records]
    if any(isinstance(c, dict) for c in cuts):
        out["shortcut"] = _shortcuts(cuts)
    out["gold"] = gold
    out["order"] = list(order)
    return out


def _shortcuts(cuts: Sequence[Any]) -> dict[str, Any]:
    """Per row: the verdict (None: free) and the shortcuts it carries (None: not recorded)."""
    verdicts: list[str | None] = []
    carries: list[list[str] | None] = []
    for c in cuts:
        info = c if isinstance(c, dict) else {}
        verdicts.append(None if info.get("label") is None else str(info["label"]))
        have = info.get("carries")
        carries.append([str(x) for x in have] if isinstance(have, list) else None)
    names = sorted({v for v in verdicts if v is not None})
    features = sorted({f for row in carries if row for f in row})
    return {
        "verdicts": names,
        "verdict": "".join(FREE_CODE if v is None else _DIGITS[names.index(v)] for v in verdicts),
        "features": features,
        "carries": [None if row is None else [features.index(f) for f in row] for row in carries],
    }


def _rows(entry: Mapping[str, Any]) -> list[Record]:
    """Records that score as the suite's did: ids, gold labels and the meta the scores read."""
    from zdebias.evaluation.suites import GROUP_KEY, SUBGROUP_KEY

    n = entry["n"]
    metas: list[dict[str, Any]] = [{} for _ in range(n)]
    for key in (GROUP_KEY, SUBGROUP_KEY):
        if key in entry:
            names = entry[key]["names"]
            for meta, i in zip(metas, entry[key]["rows"], strict=True):
                if i is not None:
                    meta[key] = names[i]
    cut = entry.get("shortcut")
    if cut:
        for meta, code, have in zip(metas, cut["verdict"], cut["carries"], strict=True):
            info: dict[str, Any] = {
                "label": None if code == FREE_CODE else cut["verdicts"][_DIGITS.index(code)]
            }
            if have is not None:
                info["carries"] = [cut["features"][i] for i in have]
            meta["shortcut"] = info
    gold = expand(entry["gold"], entry["classes"])
    return [Record(str(i), gold[i], None, None, None, metas[i]) for i in range(n)]


def write_predictions(
    docs: Sequence[Mapping[str, Any]],
    predicted: Sequence[Sequence[Mapping[str, Sequence[Record]]]],
    path: str | Path,
    *,
    split: Mapping[str, Any] | None = None,
    tables: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the compact file of an evaluation: ``docs`` (one results document per method),
    ``predicted`` (per method, per run: suite → its records with ``meta.pred``, as
    ``evaluate --predictions`` writes them), ``split`` (the shortcut split the documents were
    graded on, as :func:`~zdebias.evaluation.reliance.read_split` read it, or None),
    ``tables``: the settings its tables were made with (baselines, family, ...)."""
    from zdebias.data.writers import write_gzip_json

    suites: dict[str, Any] = {}
    methods = []
    for doc, runs in zip(docs, predicted, strict=True):
        kept_runs = []
        for run, by_suite in zip(doc["runs"], runs, strict=True):
            preds: dict[str, str] = {}
            mappings: dict[str, str] = {}
            for name, records in by_suite.items():
                entry = suites.get(name)
                if entry is None:
                    order = [*run["labels"], "non-entailment"]
                    entry = suites[name] = suite_entry(records, order)
                    entry["classes"] = _classes(entry["gold"], order)
                labels = [str(r.meta["pred"]) for r in records]
                extra = sorted(set(labels) - set(entry["classes"]))
                if extra:  # a prediction outside the gold labels (a 3-way model on a 2-way set)
                    entry["classes"] = _classes([*entry["classes"], *extra], entry["order"])
                if [str(r.label) for r in records] != entry["gold"]:
                    raise ConfigError(f"suite {name!r}: runs were scored on different rows")
                preds[name] = labels  # type: ignore[assignment]  # coded below
                mappings[name] = run["results"][name]["mapping"]
            kept = {k: run[k] for k in RUN_FIELDS if k in run}
            if "train_filter" in run:
                kept["train_filter"] = run["train_filter"]
            kept_runs.append(
                {**kept, "labels": run["labels"], "mapping": mappings, "predicted": preds}
            )
        head = {k: v for k, v in doc.items() if k not in ("runs", "summary", "shortcut_split")}
        methods.append({**head, "runs": kept_runs})
    for method in methods:  # code once every suite's classes are final
        for run in method["runs"]:
            run["predicted"] = {
                name: compact(labels, suites[name]["classes"])
                for name, labels in run["predicted"].items()
            }
    for entry in suites.values():
        entry["gold"] = compact(entry.pop("gold"), entry["classes"])
        entry.pop("order")
    out = {
        "kind": KIND,
        "version": VERSION,
        "suites": suites,
        "split": _split_head(split, docs[0]) if docs else None,
        "methods": methods,
        "tables": dict(tables or {}),
    }
    write_gzip_json(out, path)  # the same predictions give the same bytes
    return out


def _split_head(split: Mapping[str, Any] | None, doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The split summary fields the reliance and group scores read (no rows), with the
    warnings it had before :func:`~zdebias.evaluation.reliance.add_reliance` added its own."""
    from zdebias.evaluation.reliance import bias_model_warnings

    graded = doc.get("shortcut_split")
    if split is None or graded is None:
        return None
    keep = ("by", "test", "test_digest", "counts", "labels", "used", "deciding_features")
    head = {k: split[k] for k in keep if k in split}
    head.update({k: graded[k] for k in ("folder", "by", "test", "suite", "test_digest")})
    added = len(bias_model_warnings(doc, (split.get("used") or {}).get("bias_model")))
    added += 0 if graded["counts"].get("conflicting") else 1
    warnings = list(graded.get("warnings", []))
    head["warnings"] = warnings[: len(warnings) - added]
    return head


def read_predictions(path: str | Path, data: str | Path | None = None) -> dict[str, Any]:
    """A compact predictions file, checked for its kind and version; a published copy's gold
    labels are read back from ``data`` (default ``$ZDEBIAS_DATA``), :func:`attach`."""
    p = Path(path)
    try:
        doc = json.loads(gzip.decompress(p.read_bytes()))
    except (OSError, EOFError, ValueError) as err:
        raise ConfigError(f"{p}: not a compact predictions file ({err})") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise ConfigError(f"{p}: not a compact predictions file (kind {KIND!r})")
    if doc.get("version") != VERSION:
        raise ConfigError(f"{p}: version {doc.get('version')!r}; this zdebias reads {VERSION}")
    if any("gold" not in entry for entry in doc["suites"].values()):
        root = data if data is not None else os.environ.get("ZDEBIAS_DATA")
        if not root:
            raise ConfigError(
                f"{p}: a published copy without the datasets' gold labels; they are read from "
                "the data folder: pass data= (--data) or set ZDEBIAS_DATA"
            )
        try:
            attach(doc, Path(root))
        except ConfigError as err:
            raise ConfigError(f"{p}: {err}") from None
    return doc


def gold_digest(codes: str) -> str:
    """The digest a published copy keeps of a suite's gold codes."""
    return hashlib.sha256(codes.encode()).hexdigest()[:16]


def detach(
    compacted: Mapping[str, Any], sources: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """A copy of ``compacted`` without the suites' gold labels: each suite gets its ``source``
    (``path`` under the data folder, reader options, ``take``: the positions of its rows in
    that file, or None for all of them, in order) and ``gold_digest``."""
    out = json.loads(json.dumps(compacted))
    for name, entry in out["suites"].items():
        if name not in sources:
            raise ConfigError(f"suite {name!r}: no source under the data folder given")
        entry["gold_digest"] = gold_digest(entry.pop("gold"))
        entry["source"] = dict(sources[name])
    return out


def suite_rows(source: Mapping[str, Any], data: Path) -> list[Record]:
    """The rows a published suite's ``source`` names, read under ``data``."""
    from zdebias.evaluation.suites import Suite, load_suite

    options = {k: v for k, v in source.items() if k not in ("path", "take")}
    records, _ = load_suite(Suite("source", str(data / source["path"]), **options))
    take = source.get("take")
    if take is None:
        return records
    if take and max(take) >= len(records):
        raise ConfigError(f"{data / source['path']}: {len(records)} rows; a row {max(take)} taken")
    return [records[i] for i in take]


def attach(compacted: dict[str, Any], data: Path) -> dict[str, Any]:
    """Put back (in place) the gold labels a published copy left out, from the datasets under
    ``data``; each suite's rows must have the digest the evaluation recorded, and its gold
    codes the digest :func:`detach` kept."""
    from zdebias.evaluation.suites import rows_digest

    for name, entry in compacted["suites"].items():
        if "gold" in entry:
            continue
        source = entry.get("source")
        if not source:
            raise ConfigError(f"suite {name!r} has neither gold labels nor a source")
        records = suite_rows(source, data)
        if len(records) != entry["n"] or rows_digest(records) != entry["rows"]:
            raise ConfigError(
                f"suite {name!r}: {data / source['path']} does not hold the rows the evaluation "
                f"scored ({len(records)} rows read, {entry['n']} scored, or other rows)"
            )
        codes = compact([str(r.label) for r in records], entry["classes"])
        if gold_digest(codes) != entry["gold_digest"]:
            raise ConfigError(f"suite {name!r}: the gold labels read differ from the scored ones")
        entry["gold"] = codes
    return compacted


def documents(compacted: Mapping[str, Any], *, min_size: int | None = None) -> list[dict[str, Any]]:
    """The results documents the evaluation wrote, rebuilt from its compact predictions:
    every suite's scores, flat metrics and summary, and with a split its reliance and groups."""
    from zdebias.evaluation.catalogue import flat_scores, suite_metrics
    from zdebias.evaluation.groups import MIN_GROUP_SIZE
    from zdebias.evaluation.metrics import summarize
    from zdebias.evaluation.registry import Scored
    from zdebias.evaluation.reliance import SUITES, add_reliance
    from zdebias.evaluation.suites import score_predictions

    suites = compacted["suites"]
    rows = {name: _rows(entry) for name, entry in suites.items()}
    out = []
    for method in compacted["methods"]:
        chosen = suite_metrics(method.get("extra_metrics"))
        runs = []
        for run in method["runs"]:
            results: dict[str, Any] = {}
            flat: dict[str, float] = {}
            for name, codes in run["predicted"].items():
                entry = suites[name]
                classes = entry["classes"]
                labels = expand(codes, classes)
                onehot = np.zeros((len(labels), len(classes)))
                onehot[np.arange(len(labels)), [classes.index(x) for x in labels]] = 1.0
                scored = score_predictions(onehot, classes, rows[name])
                scored["mapping"] = run["mapping"][name]
                scored["rows"] = entry["rows"]
                results[name] = scored
                gold = [r.label for r in rows[name]]
                flat.update(flat_scores(chosen, Scored(name, gold, labels, rows[name], scored)))
            info = {k: run[k] for k in (*RUN_FIELDS, "train_filter") if k in run}
            runs.append({**info, "labels": run["labels"], "results": results, "metrics": flat})
        keys = list(runs[0]["metrics"])
        summary = {
            k: summarize([r["metrics"][k] for r in runs])
            for k in keys
            if all(k in r["metrics"] for r in runs)
        }
        doc = {**{k: v for k, v in method.items() if k != "runs"}, "runs": runs}
        doc["summary"] = summary
        split = compacted.get("split")
        if split is not None:
            slices = {
                name: rows[suite]
                for name, suite in SUITES.items()
                if suite in suites and split["counts"].get(name)
            }
            quiet = logging.getLogger("zdebias")
            level = quiet.level
            quiet.setLevel(logging.ERROR)  # the stage said its warnings when it ran
            try:
                whole = cast("EvaluationDocument", doc)  # as evaluate_models made it
                graded = cast("ShortcutSplitSummary", dict(split))  # as read_split read it
                add_reliance(whole, graded, rows=slices, min_size=min_size or MIN_GROUP_SIZE)
            finally:
                quiet.setLevel(level)
        out.append(doc)
    return out


__all__ = [
    "FILE",
    "KIND",
    "attach",
    "compact",
    "detach",
    "documents",
    "expand",
    "gold_digest",
    "read_predictions",
    "suite_entry",
    "suite_rows",
    "write_predictions",
]
