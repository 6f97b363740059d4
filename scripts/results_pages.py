"""The results pages' tables, from committed files: publish a run's predictions, rebuild the tables.

    python scripts/results_pages.py publish runs/snli20k-cpu --out docs/results/data/snli20k-cpu \\
        --data ../shared/data --source-name snli_20k/train.jsonl
    python scripts/results_pages.py rebuild docs/results/data/snli20k-cpu   # every table
    python scripts/results_pages.py check docs/results.md docs/results/*.md  # pages == rebuilt
    python scripts/results_pages.py check --write docs/results.md           # regenerate blocks
    python scripts/results_pages.py figure docs/results/data/snli20k-cpu \
        --out docs/results/tradeoff.png                                    # the trade-off

``publish`` keeps, per recipe: each evaluate stage's compact predictions
(``STAGE.predictions.json.gz``, :mod:`zdebias.evaluation.published`: the models' label ids per
row; no text and no gold label of the datasets, which ``rebuild`` reads back from the data
folder, ``--data`` or ``$ZDEBIAS_DATA``, checking each suite's row and gold digests), the
hypothesis-only model's out-of-fold predictions on D0 (``STAGE.oof.json.gz``, in D0's row
order, tied to its content digest) and ``run.json`` (per stage: rows, metrics, times; per
training seed: steps and best dev accuracy). ``rebuild`` makes every table from those files
alone, in seconds. A page holds each table between ``<!-- rebuilt: DIR NAME -->`` and
``<!-- /rebuilt -->``; ``check`` fails when one differs from its rebuild, ``--write`` replaces it.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import os
import re
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "scripts") not in sys.path:  # training_sets, its neighbour
    sys.path.insert(0, str(ROOT / "scripts"))
RUN_FILE = "run.json"
OOF_KIND = "zdebias-oof"
BLOCK = re.compile(r"(<!-- rebuilt: (\S+) (\S+) -->\n)(.*?)(<!-- /rebuilt -->)", re.S)
DONE = ("done", "skipped")


# ----------------------------------------------------------------------------------- publish
def publish(
    run: Path,
    out: Path,
    data: Path,
    source_name: str | None,
    times_from: Sequence[Path] = (),
) -> list[Path]:
    """Write a run folder's compact predictions (without the datasets' gold labels, which are
    read back from ``data``), out-of-fold predictions on D0 (``data / source_name``) and
    ``run.json``; ``times_from``: run folders whose stages were linked into ``run`` after they
    ran there (their manifests hold those stages' times)."""
    import yaml

    from zdebias.data.writers import write_gzip, write_gzip_json, write_json
    from zdebias.evaluation.published import detach, read_predictions

    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    out.mkdir(parents=True, exist_ok=True)
    written = []
    stages: dict[str, Any] = {}
    trainings: dict[str, Any] = {}
    for stage in manifest["stages"]:
        if stage.get("status") not in DONE:
            continue
        name, kind = stage["name"], stage["stage"]
        stages[name] = {
            "kind": kind,
            **{k: stage.get(k) for k in ("seconds", "cpu_seconds", "rows_in", "rows_out")},
            "metrics": stage.get("metrics"),
        }
        folder = run / name
        if kind == "evaluate" and (folder / "predictions.json.gz").is_file():
            target = out / f"{name}.predictions.json.gz"
            compacted = read_predictions(folder / "predictions.json.gz")
            published = detach(compacted, _sources(run, compacted, data))
            write_gzip_json(_relative(published, data), target)
            written.append(target)
        if kind in ("filter", "subset"):  # the rows kept, as D0's ids in order
            kept = (stage.get("outputs") or {}).get("data")
            if kept:
                target = out / f"{name}.ids.txt.gz"
                ids = [json.loads(line)["id"] for line in (run / kept["path"]).open()]
                write_gzip(("\n".join(ids) + "\n").encode(), target)
                written.append(target)
        if kind == "train-classifier":
            runs_file = folder / "runs.json"
            if runs_file.is_file():
                runs = json.loads(runs_file.read_text(encoding="utf-8"))["runs"]
                trainings[name] = [_training(r, folder) for r in runs]
            crossed = sorted(folder.glob("**/cross_fit_predictions.jsonl"))
            target = out / f"{name}.oof.json.gz"
            if crossed and source_name:  # the model folder (seed-N) holds the file
                if not target.is_file():  # minutes of prediction: kept once written
                    _write_oof(crossed[0].parent, data, source_name, target)
                written.append(target)
    for other in times_from:
        theirs = json.loads((other / "manifest.json").read_text(encoding="utf-8"))
        for stage in theirs["stages"]:
            mine = stages.get(stage["name"])
            if mine and stage.get("status") == "done" and mine["kind"] == stage["stage"]:
                if (stage.get("cpu_seconds") or 0) > (mine.get("cpu_seconds") or 0):
                    mine.update(seconds=stage.get("seconds"), cpu_seconds=stage["cpu_seconds"])
    config = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    classifiers: dict[str, str] = {}  # method name → the stage that trained it
    for stage in (config.get("stages") or {}).values():
        if stage.get("stage") != "evaluate":
            continue
        for method, ref in (stage.get("classifiers") or {}).items():
            if not (isinstance(ref, str) and ref in trainings):
                continue
            if classifiers.setdefault(method, ref) != ref:  # one name, one training
                raise SystemExit(
                    f"{run / 'config.yaml'}: {method!r} names both {classifiers[method]} and "
                    f"{ref}; give each training its own name"
                )
    target = out / RUN_FILE
    doc = {"name": manifest.get("name"), "stages": stages, "trainings": trainings}
    write_json({**doc, "classifiers": classifiers}, target)
    return [*written, target]


def _training(run: dict[str, Any], stage: Path) -> dict[str, Any]:
    best = run.get("best") or {}
    metrics = stage / str(run.get("folder")) / "metrics.json"
    n_train = json.loads(metrics.read_text(encoding="utf-8")).get("n_train")
    return {
        "seed": run.get("seed"),
        "n_train": n_train,
        "steps": run.get("steps"),
        "best_dev_accuracy": best.get("dev_accuracy"),
        "wall_time_s": run.get("wall_time_s"),
        "did_not_learn": run.get("did_not_learn"),
    }


def _write_oof(folder: Path, data: Path, source_name: str, target: Path) -> None:
    """D0's out-of-fold hypothesis-only predictions, as codes in D0's row order (D0's gold
    labels are not copied: :func:`oof_gold` reads them from the data folder)."""
    from training_sets import content_digest

    from zdebias.classify.hypo_only import out_of_fold_predictions
    from zdebias.data.readers import read_records
    from zdebias.evaluation.published import compact

    source = data / source_name
    records = read_records(source)
    oof = out_of_fold_predictions(str(folder))
    info = json.loads((folder / "zdebias_classifier.json").read_text(encoding="utf-8"))
    classes = list(info["labels"])
    missing = [r.id for r in records if (r.id, r.hypothesis) not in oof]
    if missing:
        raise SystemExit(f"{folder}: no out-of-fold prediction for {len(missing)} rows of {source}")
    # the final model on the same rows, which saw them all: what a frozen bias expert gives
    # PoE's training rows unless told to read the out-of-fold probabilities
    from zdebias.classify.train import aligned_probs
    from zdebias.data.writers import write_gzip_json

    own = aligned_probs(folder, records, classes, what="bias model", progress=True)
    folds = aligned_probs(folder, records, classes, what="bias model", out_of_fold=True)
    gold = [classes.index(r.label) for r in records]
    doc = {
        "kind": OOF_KIND,
        "version": 1,
        "source": source_name,
        "n": len(records),
        "rows": content_digest(records),
        "classes": classes,
        "predicted": compact([oof[(r.id, r.hypothesis)] for r in records], classes),
        "in_sample": compact([classes[i] for i in own.argmax(axis=1)], classes),
        # the probability each gives the gold label, in percent
        "gold_percent": [round(100 * float(folds[i, g])) for i, g in enumerate(gold)],
        "gold_percent_in_sample": [round(100 * float(own[i, g])) for i, g in enumerate(gold)],
    }
    write_gzip_json(doc, target)


def _relative(doc: Any, data: Path) -> Any:
    """``doc`` with paths under ``data`` written ``${ZDEBIAS_DATA}/...`` and paths under the
    repository relative to it: a published file names no machine's folders."""
    if isinstance(doc, dict):
        return {k: _relative(v, data) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_relative(v, data) for v in doc]
    if isinstance(doc, str):
        for prefix, new in ((f"{data.resolve()}/", "${ZDEBIAS_DATA}/"), (f"{ROOT}/", "")):
            doc = doc.replace(prefix, new)
    return doc


def _sources(run: Path, compacted: dict[str, Any], data: Path) -> dict[str, dict[str, Any]]:
    """Where each suite's rows are read under ``data``: a suite read from the data folder
    names its file; one read from the run folder (a subset, a split's slice) names the
    recipe's data input its rows came from and their positions in it. Each is checked by
    reading it: the rows' digest must be the one the evaluation recorded."""
    import yaml

    from zdebias.evaluation.published import suite_rows
    from zdebias.evaluation.suites import Suite, load_suite, rows_digest

    root = data.resolve()
    config = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    options = ("format", "task", "columns", "label_map", "split", "where", "limit")

    def under(spec: dict[str, Any]) -> dict[str, Any] | None:
        base, sep, tail = str(spec["path"]).partition("::")
        path = Path(base).resolve()
        if not path.is_relative_to(root):
            return None
        kept = {k: spec[k] for k in options if spec.get(k)}
        return {"path": str(path.relative_to(root)) + sep + tail, **kept}

    specs = {s["name"]: s for m in compacted["methods"] for s in m["suites"]}
    # where a run-folder suite's rows may come from: the recipe's data inputs and the suites
    # read from the data folder itself (a split's test set often is one)
    given = [under(dict(v)) for v in (config.get("data") or {}).values() if isinstance(v, dict)]
    given += [under(dict(s)) for s in specs.values()]
    inputs = [s for i, s in enumerate(given) if s and s not in given[:i]]
    loaded: dict[int, tuple[list[Any], dict[str, int]]] = {}  # each input read once
    out: dict[str, dict[str, Any]] = {}
    for name, entry in compacted["suites"].items():
        spec = specs[name]
        source = under(spec)
        if source is None:  # a run folder's file: find the input its rows came from
            ids = [r.id for r in load_suite(Suite(name, spec["path"], task=spec.get("task")))[0]]
            for i, candidate in enumerate(inputs):
                if i not in loaded:
                    rows = suite_rows(candidate, root)
                    loaded[i] = (rows, {r.id: n for n, r in enumerate(rows)})
                rows, at = loaded[i]
                if all(x in at for x in ids):
                    source = {**candidate, "take": [at[x] for x in ids]}
                    records = [rows[at[x]] for x in ids]
                    break
            if source is None:
                raise SystemExit(f"suite {name!r} ({spec['path']}): no recipe input holds its rows")
        else:
            records = suite_rows(source, root)
        if rows_digest(records) != entry["rows"]:
            raise SystemExit(f"suite {name!r}: {source['path']} read back holds other rows")
        out[name] = source
    return out


def oof_gold(doc: dict[str, Any], data: Path) -> str:
    """D0's gold labels as the out-of-fold file's codes, read from ``data`` and checked
    against the file's content digest."""
    from training_sets import content_digest

    from zdebias.data.readers import read_records
    from zdebias.evaluation.published import compact

    records = read_records(data / doc["source"])
    if content_digest(records) != doc["rows"]:
        raise SystemExit(f"{data / doc['source']}: not the rows the out-of-fold file was made on")
    return compact([r.label for r in records], doc["classes"])


def published_rows(folder: Path, stage: str) -> int:
    """How many rows a published filter or subset stage kept (its ``ids.txt.gz``)."""
    text = gzip.decompress((folder / f"{stage}.ids.txt.gz").read_bytes()).decode()
    return len(text.split())


def read_oof(path: Path) -> dict[str, Any]:
    """A published out-of-fold predictions file."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    if doc.get("kind") != OOF_KIND:
        raise SystemExit(f"{path}: not out-of-fold predictions (kind {OOF_KIND!r})")
    return doc


# ----------------------------------------------------------------------------------- rebuild
def _pts(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}"


def _cell(test: dict[str, Any] | None) -> str:
    """``−7.2 [−9.1, −5.3]*``: the difference in points, its 95 % interval, ``*`` where it
    stays significant after Holm's correction over the table."""
    if test is None:
        return "–"
    text = _pts(test["difference"], signed=True)
    if test.get("ci"):
        lo, hi = test["ci"]
        text += f" [{_pts(lo, True)}, {_pts(hi, True)}]"
    return text + ("*" if test.get("significant") else "")


#: the evaluate stages the first table reads: snli20k-cpu's, else snli20k-core-cpu's
MAIN = ("evaluate", "evaluate_core")
INDEPENDENT = ("evaluate_independent", "evaluate_core_independent")
#: GD-NLI Table 13 (BERT-base, all of SNLI): D_SNLI and Z(D_SNLI), in percent
PAPER_TABLE_13 = {"SNLI": (90.45, 84.93), "SNLI-hard": (80.34, 80.52)}
#: GD-NLI Table 2's PoE row (BERT-base, all of SNLI): D_SNLI and PoE, in percent
PAPER_TABLE_2_POE = {"SNLI": (90.45, 90.25), "SNLI-hard": (80.34, 82.92)}
#: (paper table, our method) → the paper's levels per suite
PAPER_ROWS = {
    ("Table 13", "MiniLM w/ Z(D0)"): PAPER_TABLE_13,
    ("Table 2", "MiniLM PoE w/ D0"): PAPER_TABLE_2_POE,
    ("Table 2", "MiniLM PoE (out-of-fold bias) w/ D0"): PAPER_TABLE_2_POE,
    ("Table 2", "MiniLM w/ Z-Aug"): {"SNLI": (90.45, 90.67), "SNLI-hard": (80.34, 81.78)},
    ("Table 2", "MiniLM w/ Par-Z"): {"SNLI": (90.45, 88.11), "SNLI-hard": (80.34, 82.81)},
    ("Table 2", "MiniLM w/ Seq-Z"): {"SNLI": (90.45, 88.08), "SNLI-hard": (80.34, 82.82)},
    ("Table 2", "MiniLM PoE w/ Seq-Z"): {"SNLI": (90.45, 87.65), "SNLI-hard": (80.34, 84.48)},
}


def _stage_file(folder: Path, names: Sequence[str]) -> Path | None:
    for name in names:
        path = folder / f"{name}.predictions.json.gz"
        if path.is_file():
            return path
    return None


@functools.cache
def _rebuilt(path: Path, data: Path) -> dict[str, Any]:
    from zdebias.pipeline.stages.classify import rebuilt_tables

    return rebuilt_tables(path, data)[0]


BASELINES = ("MiniLM w/ D0", "MiniLM w/ random subset")


@functools.cache
def _sizes(folder: Path) -> dict[str, int]:
    """Each published method's training rows (its largest seed's), from ``run.json``."""
    run = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
    return {
        method: max(t.get("n_train") or 0 for t in run["trainings"][stage])
        for method, stage in (run.get("classifiers") or {}).items()
    }


def _controls(name: str, folder: Path) -> tuple[str, ...]:
    """The baselines a method is graded against: D0, and the random subset of Z(D0)'s size
    unless the method trained on at least 90 % as many rows as D0 (PoE on D0, Z-Aug: then D0
    itself is its same-size control); the sizes are the trainings' own (``run.json``)."""
    sizes = _sizes(folder)
    if name not in sizes or BASELINES[0] not in sizes:
        raise SystemExit(f"{folder / RUN_FILE}: no training size for {name!r} or D0; republish")
    return BASELINES[:1] if sizes[name] >= 0.9 * sizes[BASELINES[0]] else BASELINES


#: the first table's columns: title, which evaluation (main / independent), metric
COLUMNS = (
    ("in-distribution (SNLI test)", "main", "SNLI"),
    ("worst group", "independent", "shortcut-worst-group"),
    ("conflicting", "independent", "shortcut-conflicting"),
    ("SNLI-hard", "main", "SNLI-hard"),
)


def _split_folder(results: dict[str, Any]) -> str | None:
    docs = results["documents"]
    return (docs[0].get("shortcut_split") or {}).get("folder") if docs else None


@functools.cache
def _methods(folder: Path, data: Path) -> dict[str, dict[str, Any]]:
    """Every method of every published evaluate stage, its runs (by seed) holding the first
    table's metrics: the suites' from any stage, the split's only from stages graded on the
    independent split (the one of :data:`INDEPENDENT`). A method evaluated by several
    stages (D0 beside each method's own stage) keeps one value per metric and seed."""
    independent = _split_folder(_rebuilt(_stage_file(folder, INDEPENDENT), data))
    keys = [key for _t, _w, key in COLUMNS]
    merged: dict[str, dict[str, Any]] = {}
    for file in sorted(folder.glob("*.predictions.json.gz")):
        results = _rebuilt(file, data)
        graded = _split_folder(results) == independent
        for doc in results["documents"]:
            mine = merged.setdefault(doc["name"], {"name": doc["name"], "runs": {}})
            for run in doc["runs"]:
                metrics = mine["runs"].setdefault(str(run["seed"]), {})
                for key in keys:
                    if key in run["metrics"] and key not in metrics:
                        if graded or not key.startswith("shortcut-"):
                            metrics[key] = run["metrics"][key]
    return {
        name: {
            "name": name,
            "runs": [{"seed": seed, "metrics": m} for seed, m in doc["runs"].items()],
        }
        for name, doc in merged.items()
    }


#: the first table's order (a method not named here follows, in the order it was published)
ORDER = (
    "MiniLM w/ D0",
    "MiniLM w/ random subset",
    "MiniLM w/ Z(D0)",
    "MiniLM w/ Par-Z",
    "MiniLM w/ Seq-Z",
    "MiniLM PoE w/ Seq-Z",
    "MiniLM w/ Z-Aug",
    "MiniLM PoE w/ D0",
    "MiniLM PoE (out-of-fold bias) w/ D0",
    "MiniLM learned-mixin w/ D0",
    "MiniLM conf-reg w/ D0",
)
#: diagnostics, not methods a user would pick: only in the variants table, outside the first
#: table's Holm family
PROBES = ("MiniLM PoE (D0 expert) w/ Seq-Z",)


def _ordered(names: Sequence[str]) -> list[str]:
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted((n for n in names if n not in PROBES), key=lambda n: rank.get(n, len(ORDER)))


@functools.cache
def _summary(folder: Path, data: Path) -> dict[str, Any]:
    """The first table's tests: every method against each baseline on :data:`COLUMNS`, with
    Holm's correction over all of them together; and each method's level per column."""
    from zdebias.evaluation.metrics import summarize
    from zdebias.evaluation.significance import adjust, compare_results

    everything = _methods(folder, data)
    methods = {name: everything[name] for name in _ordered(list(everything))}
    keys = [key for _t, _w, key in COLUMNS]
    comparisons = []
    for base in BASELINES:
        ordered = [methods[base]] + [
            doc
            for name, doc in methods.items()
            if name not in (base, BASELINES[0]) and base in _controls(name, folder)
        ]
        comparisons.append((base, compare_results(ordered, keys=keys, adjusted=False)))
    adjust([c for _b, c in comparisons], family=keys)
    tests = {}
    for base, comp in comparisons:
        for item in comp["comparisons"]:
            for key, test in item["tests"].items():
                tests[(item["name"], base, key)] = test
    levels: dict[str, dict[str, Any]] = {}
    for name, doc in methods.items():
        for key in keys:
            values = [run["metrics"].get(key) for run in doc["runs"]]
            ok = values and all(v is not None for v in values)
            levels.setdefault(name, {})[key] = summarize(values) if ok else None
    return {"tests": tests, "levels": levels, "names": list(methods), "n_tests": len(tests)}


def summary_table(folder: Path, data: Path) -> str:
    """Each method against D0 and against the same-size random control: in-distribution
    accuracy, worst-group and conflicting accuracy on the split by the independent bias model,
    and the official hard set; 95 % intervals, Holm over the whole table; then each method's
    level (mean ± std over its seeds)."""
    summary = _summary(folder, data)
    methods = [n for n in summary["names"] if n not in BASELINES] + [BASELINES[1]]
    head = ["Method", "vs"] + [title for title, _w, _k in COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * len(COLUMNS)]
    for method in methods:
        for base in _controls(method, folder):
            if method == base:
                continue
            cells = [_cell(summary["tests"].get((method, base, key))) for _t, _w, key in COLUMNS]
            vs = base.removeprefix("MiniLM w/ ")
            lines.append(f"| {method} | {vs} | " + " | ".join(cells) + " |")
    lines += ["", "| Method (level) | seeds | " + " | ".join(t for t, _w, _k in COLUMNS) + " |"]
    lines.append("|---|---:|" + "---:|" * len(COLUMNS))
    for name in summary["names"]:
        cells = summary["levels"][name]
        n = max((c["n_runs"] for c in cells.values() if c), default=0)
        shown = [
            f"{_pts(c['mean'])} ± {_pts(c['std'])}" if c else "–"
            for c in (cells.get(key) for _t, _w, key in COLUMNS)
        ]
        lines.append(f"| {name} | {n} | " + " | ".join(shown) + " |")
    return "\n".join(lines) + "\n"


#: variants of a method graded against the method itself (PoE's settings a user would try)
VARIANTS = {
    "MiniLM PoE w/ D0": ("MiniLM PoE (out-of-fold bias) w/ D0",),
    # the losses a user would try, each with the same out-of-fold expert
    "MiniLM PoE (out-of-fold bias) w/ D0": ("MiniLM learned-mixin w/ D0", "MiniLM conf-reg w/ D0"),
    # the paper's "improves further when combined with PoE", and the expert PoE is given
    "MiniLM w/ Seq-Z": ("MiniLM PoE w/ Seq-Z", "MiniLM PoE (D0 expert) w/ Seq-Z"),
}


@functools.cache
def compare_variants(folder: Path, data: Path) -> list[dict[str, Any]]:
    """Each method of :data:`VARIANTS` with its variants, compared paired by seed on the first
    table's columns, Holm over these tests together."""
    from zdebias.evaluation.significance import adjust, compare_results

    methods = _methods(folder, data)
    keys = [key for _t, _w, key in COLUMNS]
    found = []
    for base, names in VARIANTS.items():
        others = [methods[n] for n in names if n in methods]
        if base in methods and others:
            found.append(compare_results([methods[base], *others], keys=keys, adjusted=False))
    adjust(found, family=keys)
    return found


def variants_table(folder: Path, data: Path) -> str:
    """Each variant against its method, on the first table's columns, paired by seed, with
    Holm over this table's tests (a question of its own: which setting of the method)."""
    keys = [key for _t, _w, key in COLUMNS]
    head = ["Variant", "vs"] + [title for title, _w, _k in COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * len(COLUMNS)]
    for comp in compare_variants(folder, data):
        for item in comp["comparisons"]:
            cells = [_cell(item["tests"].get(key)) for key in keys]
            lines.append(f"| {item['name']} | {comp['baseline']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def poe_headline(folder: Path, data: Path) -> str:
    """PoE against D0 and its out-of-fold variant against it, in one sentence (README)."""
    summary = _summary(folder, data)
    tests = summary["tests"]
    poe, oof = "MiniLM PoE w/ D0", "MiniLM PoE (out-of-fold bias) w/ D0"

    def diff(method: str, key: str) -> str:
        t = tests[(method, BASELINES[0], key)]
        lo, hi = t["ci"]
        return f"{_pts(t['difference'], True)} [{_pts(lo, True)}, {_pts(hi, True)}]"

    variant = next(c for c in compare_variants(folder, data) if c["baseline"] == poe)[
        "comparisons"
    ][0]["tests"]["SNLI"]
    return (
        f"PoE with a hypothesis-only expert, against D0 (3 seeds, 95 % intervals): SNLI-hard "
        f"{diff(poe, 'SNLI-hard')} with the expert's in-sample probabilities and "
        f"{diff(oof, 'SNLI-hard')} with its out-of-fold ones, at a cost on SNLI test of "
        f"{diff(poe, 'SNLI')} and {diff(oof, 'SNLI')}; on the rows where the independent bias "
        f"model's shortcut misleads {diff(poe, 'shortcut-conflicting')} and "
        f"{diff(oof, 'shortcut-conflicting')}. The out-of-fold expert recovers "
        f"{_pts(variant['difference'])} points of SNLI test ({_cell(variant)}).\n"
    )


#: the generator recipes' sets and PoE on one of them, as the paper pairs them on SNLI
SETS = ("MiniLM w/ Par-Z", "MiniLM w/ Seq-Z", "MiniLM PoE w/ Seq-Z")


def sets_headline(folder: Path, data: Path) -> str:
    """The generator recipes' sets and PoE + Seq-Z against D0 and against Seq-Z, in one
    paragraph (README and the page quote it)."""
    summary = _summary(folder, data)
    tests, levels = summary["tests"], summary["levels"]
    found = [m for m in SETS if m in levels]
    if not found:
        return ""

    def listed(method: str, get: Any) -> str:
        keys = (("SNLI", "SNLI test"), ("shortcut-conflicting", "conflicting"))
        keys += (("SNLI-hard", "SNLI-hard"),)
        return ", ".join(f"{title} {_cell(get(method, key))}" for key, title in keys)

    parts = []
    for method in found:
        n = max(c["n_runs"] for c in levels[method].values() if c)
        own = listed(method, lambda m, k: tests.get((m, BASELINES[0], k)))
        parts.append(f"{method.removeprefix('MiniLM ')} ({n} seeds): {own}")
    text = (
        "Against D0, paired by seed (95 % intervals, `*` significant after Holm over the "
        f"first table's {summary['n_tests']} tests): " + "; ".join(parts) + "."
    )
    variant = next(
        (c for c in compare_variants(folder, data) if c["baseline"] == "MiniLM w/ Seq-Z"), None
    )
    if variant:
        item = variant["comparisons"][0]
        pairs = {t.get("n_pairs") for t in item["tests"].values() if t} - {None}
        paired = f" (the {max(pairs)} seeds they share)" if pairs else ""
        against = listed(item["name"], lambda _m, k: item["tests"].get(k))
        name = item["name"].removeprefix("MiniLM ")
        text += f" {name} against Seq-Z{paired}, Holm over the variants table: {against}."
    return text + "\n"


def headline(folder: Path, data: Path) -> str:
    """The first table's result for Z(D0), in one paragraph (README and the page quote it)."""
    summary = _summary(folder, data)
    tests = summary["tests"]
    z = "MiniLM w/ Z(D0)"
    run = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
    kept = run["stages"]["zfilter"]["rows_out"]["kept"]
    total = kept + run["stages"]["zfilter"]["rows_out"]["rejected"]
    names = {
        "SNLI": "SNLI test",
        "shortcut-conflicting": "the rows of SNLI test where an independent bias model's "
        "shortcut misleads",
        "shortcut-worst-group": "the worst group",
        "SNLI-hard": "SNLI-hard",
    }

    def listed(base: str) -> str:
        parts = []
        for _t, _w, key in COLUMNS:
            t = tests[(z, base, key)]
            lo, hi = t["ci"] or (None, None)
            ci = f" [{_pts(lo, True)}, {_pts(hi, True)}]" if lo is not None else ""
            mark = ", significant after Holm" if t.get("significant") else ""
            parts.append(f"{names[key]} {_pts(t['difference'], True)}{ci}{mark}")
        return "; ".join(parts)

    n = max(c["n_runs"] for c in summary["levels"][z].values() if c)
    return (
        f"A MiniLM trained on Z(D0), the {kept:,} of {total:,} SNLI pairs z-filtering keeps, "
        f"against one trained on all of D0 ({n} seeds each, differences in points with 95 % "
        f"intervals, paired by seed, Holm over the table's {summary['n_tests']} tests): "
        f"{listed(BASELINES[0])}. Against a random subset of the same size: "
        f"{listed(BASELINES[1])}.\n"
    )


def reproduction_table(folder: Path, data: Path) -> str:
    """GD-NLI's differences against all of SNLI beside ours against D0 (:data:`PAPER_ROWS`:
    Table 13's z-filtered SNLI, Table 2's sets and PoE): the paper's difference, ours with its 95 %
    interval and the Holm-corrected p of the first table, and whether the paper's difference
    lies in our interval."""
    summary = _summary(folder, data)
    lines = [
        "| GD-NLI | suite | paper: D → method | Δ paper | here: D0 → method | Δ here [95 % CI] "
        "| p (Holm) | reproduced? |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for (table, ours), rows in PAPER_ROWS.items():
        for suite, (before, after) in rows.items():
            t = summary["tests"].get((ours, BASELINES[0], suite))
            if t is None:
                continue
            paper = (after - before) / 100
            lo, hi = t["ci"] or (None, None)
            if lo is not None and hi is not None and lo <= paper <= hi:
                verdict = "yes: the paper's Δ is in our interval"
            elif t.get("significant") and (t["difference"] > 0) == (paper > 0):
                verdict = "the direction, not the size"
            else:
                verdict = "no"
            p = "–" if t.get("p_holm") is None else f"{t['p_holm']:.3g}"
            lines.append(
                f"| {table}: {ours.removeprefix('MiniLM ')} | {suite} | {before:.2f} → {after:.2f} "
                f"| {_pts(paper, True)} | {_pts(t['baseline']['mean'])} → "
                f"{_pts(t['other']['mean'])} | {_cell(t)} | {p} | {verdict} |"
            )
    return "\n".join(lines) + "\n"


def trainings_table(folder: Path) -> str:
    """Every training's seeds: steps, best dev accuracy, and a flag on a seed that trained far
    worse than its siblings (more than ``OUTLIER_POINTS`` below their median) or not at all."""
    run = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
    lines = [
        "| Training | seeds | steps | best dev accuracy per seed | flagged |",
        "|---|---:|---:|---|---|",
    ]
    for name, seeds in run["trainings"].items():
        devs = [s["best_dev_accuracy"] for s in seeds]
        flags = [f"seed {s['seed']}: did not learn" for s in seeds if s.get("did_not_learn")]
        flags += [f"seed {s['seed']}: {why}" for s, why in outliers(seeds)]
        shown = ", ".join(_pts(d) for d in devs)
        steps = sorted({s["steps"] for s in seeds})
        lines.append(
            f"| {name} | {len(seeds)} | {', '.join(map(str, steps))} | {shown} | "
            f"{'; '.join(flags) or '–'} |"
        )
    return "\n".join(lines) + "\n"


def outliers(seeds: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """Seeds whose best dev accuracy lies more than ``OUTLIER_POINTS`` points below the
    median of the others (:func:`zdebias.evaluation.tables.outlier_runs`, which the evaluate
    stage's tables flag too)."""
    from zdebias.evaluation.tables import outlier_runs

    by_seed = {str(s.get("seed")): s for s in seeds}
    return [
        (
            by_seed[str(o["seed"])],
            f"dev {_pts(o['dev'])} against the others' median {_pts(o['median'])}",
        )
        for o in outlier_runs(seeds)
    ]


def bias_expert_table(folder: Path, data: Path) -> str:
    """The hypothesis-only model on D0's rows, and on the rows z-filtering kept (Z(D0), most
    of the Seq-Z and Par-Z sets): out of fold (each row by a model that did not see it)
    against the final model (which saw every row): accuracy and the probability of the gold
    label, which PoE divides the main model's by."""
    from zdebias.data.readers import read_records

    lines = [
        "| which rows | predicted by | rows | accuracy | mean p(gold) | p(gold) ≥ 0.9 "
        "| p(gold) < 0.2 |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    kept_file = folder / "zfilter.ids.txt.gz"
    kept = set(gzip.decompress(kept_file.read_bytes()).decode().split())
    for file in sorted(folder.glob("*.oof.json.gz")):
        doc = read_oof(file)
        gold = oof_gold(doc, data)
        ids = [r.id for r in read_records(data / doc["source"])]
        for rows, chosen in (
            ("all of D0", range(len(ids))),
            ("Z(D0)", [i for i, x in enumerate(ids) if x in kept]),
        ):
            for what, codes, percent in (
                ("out of fold", doc["predicted"], doc["gold_percent"]),
                ("the final model (in sample)", doc["in_sample"], doc["gold_percent_in_sample"]),
            ):
                n = len(chosen)
                right = sum(codes[i] == gold[i] for i in chosen) / n
                mean = sum(percent[i] for i in chosen) / n / 100
                sure = sum(percent[i] >= 90 for i in chosen) / n
                wrong = sum(percent[i] < 20 for i in chosen) / n
                lines.append(
                    f"| {rows} | {what} | {n:,} | {_pts(right)} | {mean:.3f} | {_pts(sure)} % "
                    f"| {_pts(wrong)} % |"
                )
    return "\n".join(lines) + "\n"


def datasets_table(folder: Path) -> str:
    """Rows each filter or subset kept, and the significant features each `stats` stage found."""
    run = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
    lines = ["| Stage | kind | rows | significant features |", "|---|---|---:|---:|"]
    for name, stage in run["stages"].items():
        out, metrics = stage.get("rows_out") or {}, stage.get("metrics") or {}
        if stage["kind"] == "stats":
            lines.append(f"| {name} | stats | | {metrics.get('n_significant', '–')} |")
        elif stage["kind"] in ("filter", "subset") and ("kept" in out or "total" in out):
            rows = out.get("kept", out.get("total"))
            lines.append(f"| {name} | {stage['kind']} | {rows:,} | |")
    return "\n".join(lines) + "\n"


def time_table(folder: Path) -> str:
    """Wall and CPU seconds per stage, and the total in CPU-hours."""
    run = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
    lines = ["| Stage | kind | wall (s) | CPU (s) |", "|---|---|---:|---:|"]
    total = 0.0
    for name, stage in run["stages"].items():
        cpu = stage.get("cpu_seconds") or 0.0
        total += cpu
        lines.append(
            f"| {name} | {stage['kind']} | {stage.get('seconds') or 0:,.0f} | {cpu:,.0f} |"
        )
    lines.append(f"| total | | | {total:,.0f} ({total / 3600:.2f} CPU-hours) |")
    return "\n".join(lines) + "\n"


def rebuild(folder: Path, data: Path) -> dict[str, str]:
    """Every table of a published recipe folder, by name (gold labels read under ``data``)."""
    from zdebias.pipeline.stages.classify import rebuilt_tables

    out: dict[str, str] = {}
    for file in sorted(folder.glob("*.predictions.json.gz")):
        stage = file.name.removesuffix(".predictions.json.gz")
        out[stage] = rebuilt_tables(file, data)[1]
    if _stage_file(folder, MAIN) and _stage_file(folder, INDEPENDENT):
        out["summary"] = summary_table(folder, data)
        out["headline"] = headline(folder, data)
        out["reproduction"] = reproduction_table(folder, data)
        if compare_variants(folder, data):
            out["variants"] = variants_table(folder, data)
            out["poe_headline"] = poe_headline(folder, data)
        sets = sets_headline(folder, data)
        if sets:
            out["sets_headline"] = sets
    if list(folder.glob("*.oof.json.gz")):
        out["bias_expert"] = bias_expert_table(folder, data)
    if (folder / RUN_FILE).is_file():
        out["trainings"] = trainings_table(folder)
        out["datasets"] = datasets_table(folder)
        out["time"] = time_table(folder)
    return out


def figure(folder: Path, out: Path, data: Path) -> Path:
    """In-distribution accuracy against worst-group accuracy per method, with 95 % t
    intervals over seeds: the trade-off a user chooses on."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy import stats

    methods = _methods(folder, data)

    def spread(values: list[float]) -> tuple[float, float]:
        mean = statistics.fmean(values)
        if len(values) < 2:
            return 100 * mean, 0.0
        half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
        return 100 * mean, 100 * float(half)

    fig, ax = plt.subplots(figsize=(8.4, 4.2), dpi=110)
    for name in _ordered(list(methods)):
        doc = methods[name]
        x_values = [run["metrics"].get("SNLI") for run in doc["runs"]]
        y_values = [run["metrics"].get("shortcut-worst-group") for run in doc["runs"]]
        if None in x_values or None in y_values:
            continue
        x, dx = spread(x_values)
        y, dy = spread(y_values)
        marker = "os^Dv<>ph*"[len(ax.containers) % 10]  # a shape as well as a colour
        label = name.removeprefix("MiniLM ")
        ax.errorbar(x, y, xerr=dx, yerr=dy, fmt=marker, capsize=3, label=label)
    ax.set_xlabel("SNLI test accuracy (%)")
    ax.set_ylabel("worst-group accuracy (%), independent split")
    ax.set_title("In-distribution against worst group (95 % intervals over seeds)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))  # beside the points
    fig.tight_layout()
    fig.savefig(out, metadata={"Software": None})
    plt.close(fig)
    return out


def check(pages: Sequence[Path], write: bool, data: Path) -> int:
    """Compare (or, with ``write``, replace) every rebuilt block of ``pages``."""
    cache: dict[Path, dict[str, str]] = {}
    bad = 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        parts = []
        at = 0
        for match in BLOCK.finditer(text):
            folder = (page.parent / match.group(2)).resolve()
            if folder not in cache:
                cache[folder] = rebuild(folder, data)
            table = cache[folder].get(match.group(3))
            if table is None:
                raise SystemExit(f"{page}: no table {match.group(3)!r} in {folder}")
            if table != match.group(4):
                bad += 1
                print(f"{page}: {match.group(2)} {match.group(3)} differs from its rebuild")
            parts += [text[at : match.start(4)], table]
            at = match.end(4)
        new = "".join([*parts, text[at:]])
        if write and new != text:
            page.write_text(new, encoding="utf-8")
    return 0 if write or not bad else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("publish", help="compact a run folder's predictions into a folder")
    p.add_argument("run", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--source-name", help="D0's file under --data, for the out-of-fold predictions")
    p.add_argument(
        "--times-from", type=Path, nargs="*", default=[], help="run folders stages came from"
    )
    r = sub.add_parser("rebuild", help="print every table of a published folder")
    r.add_argument("folder", type=Path)
    f = sub.add_parser("figure", help="draw the accuracy / worst-group trade-off")
    f.add_argument("folder", type=Path)
    f.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("check", help="pages' rebuilt blocks equal their rebuild")
    c.add_argument("pages", type=Path, nargs="+")
    c.add_argument("--write", action="store_true", help="replace the blocks instead")
    for command in (p, r, f, c):
        command.add_argument(
            "--data",
            type=Path,
            default=os.environ.get("ZDEBIAS_DATA"),
            help="the datasets' folder, whose gold labels the tables read (default $ZDEBIAS_DATA)",
        )
    args = parser.parse_args(argv)
    if args.data is None:
        parser.error("the datasets' folder is needed: --data DIR or ZDEBIAS_DATA")
    if args.command == "publish":
        found = publish(args.run, args.out, args.data, args.source_name, args.times_from)
        for path in found:
            print(path)
        return 0
    if args.command == "rebuild":
        for name, table in rebuild(args.folder, args.data).items():
            print(f"## {name}\n\n{table}")
        return 0
    if args.command == "figure":
        print(figure(args.folder, args.out, args.data))
        return 0
    return check(args.pages, args.write, args.data)


if __name__ == "__main__":
    raise SystemExit(main())
