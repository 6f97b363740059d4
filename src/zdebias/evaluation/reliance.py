"""Reliance on shortcuts: accuracy on a shortcut split's slices and the gap between them.

A folder written by ``zdebias shortcut-split`` (:mod:`zdebias.stats.shortcut_split`) holds a
test set's aligned, conflicting and free rows. Evaluated as three suites
(:data:`SUITES`), each run gets its accuracy on each slice and the gap aligned − conflicting
(:data:`GAP`, a flat metric, so that ``compare`` and the evaluate stage t-test it between
methods over seeds like any suite).

>>> run = {"results": {"shortcut-aligned": {"accuracy": 0.9},
...                    "shortcut-conflicting": {"accuracy": 0.6}}, "metrics": {}}
>>> round(run_reliance(run)["gap"], 2)
0.3
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from zdebias.data.documents import checked, read_document
from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.evaluation.cells import format_cell
from zdebias.evaluation.groups import (
    MIN_GROUP_SIZE,
    OTHER,
    GroupAccuracy,
    aligned_loss,
    aligned_loss_line,
    grouping,
    shortcut_masks,
    view_of,
)
from zdebias.evaluation.suites import Suite, load_suite, summarize
from zdebias.stats.shortcut_split import rows_digest

if TYPE_CHECKING:
    from zdebias.evaluation.documents import EvaluationDocument, EvaluationRun
    from zdebias.stats.summaries import ShortcutSplitSummary

log = logging.getLogger("zdebias")

#: slice → the suite name its rows are evaluated under
SUITES = {
    "aligned": "shortcut-aligned",
    "conflicting": "shortcut-conflicting",
    "free": "shortcut-free",
}
#: the flat metric of the gap aligned − conflicting
GAP = "reliance-gap"
#: the flat metric of the worst-group accuracy (gold label × verdict, :mod:`.groups`)
WORST_GROUP = "shortcut-worst-group"
#: what the gap means, in one sentence (the reports print it)
MEANING = (
    "The reliance gap is a model's accuracy on the aligned rows (the training set's "
    "shortcuts point to the gold label) minus its accuracy on the conflicting rows (they "
    "point to another label): the more a model leans on those shortcuts, the larger the gap; "
    "a debiased training set should shrink it without lowering the aligned accuracy much."
)


_Count = Annotated[StrictInt, Field(ge=0)]


class _Counts(BaseModel):
    aligned: _Count
    conflicting: _Count
    free: _Count


class _Digests(BaseModel):
    aligned: str
    conflicting: str
    free: str


class _SplitSummary(BaseModel):
    """The fields of a split's ``summary.json`` that evaluate reads (others pass through)."""

    model_config = ConfigDict(extra="allow")
    counts: _Counts
    n_test: _Count | None = None
    test_digest: str | None = None
    digests: _Digests | None = None
    by: str | None = None
    test: str | None = None
    warnings: list[str] = []


def read_split(folder: str | Path) -> ShortcutSplitSummary:
    """The ``summary.json`` of a shortcut-split folder (or that file itself), checked: one
    :class:`ConfigError` line for a missing, unreadable or foreign summary, or one whose
    counts do not add up."""
    path = Path(folder)
    if path.is_file():
        path = path.parent
    file = path / "summary.json"
    missing = f"{path}: not a shortcut split (no summary.json; run zdebias shortcut-split)"
    summary = read_document(file, missing=missing)  # a key given twice is refused there
    split = checked(summary, _SplitSummary, file, what="a shortcut split's summary")
    total = sum(split.counts.model_dump().values())
    if split.n_test is not None and total != split.n_test:
        raise ConfigError(
            f"{file}: field 'counts': the slices hold {total:,} rows, but n_test says "
            f"{split.n_test:,}; not a shortcut split's summary"
        )
    return cast("ShortcutSplitSummary", {**summary, "folder": str(path)})  # checked above


def _short(digest: str) -> str:
    return digest[:12]


def check_split(
    split: ShortcutSplitSummary, suites: Sequence[Suite], *, task: str | None = None
) -> dict[str, Any]:
    """Check that ``split`` (:func:`read_split`) grades the rows it was made with: each slice
    file holds as many rows as ``summary.json`` counts, with the recorded row digest
    (:func:`~zdebias.stats.shortcut_split.rows_digest`); a mismatch is a
    :class:`ConfigError` naming the file. Returns ``{"suite", "warnings", "rows"}``: the
    suite whose rows are the split's test set (None when none is), what could not be
    checked or does not match, and each slice file's records. A summary without digests (an
    older split) has only its counts checked and says so in a warning; a suite that reads
    the file the split was made from, with other rows, is an error."""
    folder = Path(split["folder"])
    summary = folder / "summary.json"
    digests = split.get("digests") or {}
    warnings: list[str] = []
    rows: dict[str, list[Record]] = {}
    for name, suite in SUITES.items():
        count = split["counts"][name]
        file = folder / f"{name}.jsonl"
        if not file.exists():
            if count:
                raise ConfigError(f"{file}: missing; {summary} counts {count:,} {name} rows")
            continue
        records, _info = load_suite(Suite(suite, str(file), format="jsonl", task=task), empty=True)
        rows[name] = records
        if len(records) != count:
            raise ConfigError(
                f"{file}: {len(records):,} labelled rows, but {summary} records {count:,} "
                f"{name} rows: the file changed after the split was made; restore it or "
                "remake the split (zdebias shortcut-split)"
            )
        got = rows_digest(records)
        if name in digests and got != digests[name]:
            raise ConfigError(
                f"{file}: its {count:,} rows are not the {name} rows the split wrote (row "
                f"digest {_short(got)}, {summary} records {_short(digests[name])}); restore "
                "it or remake the split (zdebias shortcut-split)"
            )
    want = split.get("test_digest")
    test = split.get("test") or "its test set"
    n_test = split.get("n_test", sum(split["counts"].values()))
    if not want or not digests:
        warnings.append(
            f"{summary} records no row digests (a split made before splits recorded them): "
            "only its slices' row counts are checked, not their rows nor which suite it "
            "splits; remake it with zdebias shortcut-split"
        )
        return {"suite": None, "warnings": warnings, "rows": rows}
    seen = []
    for s in suites:
        records, _info = load_suite(s)
        got = rows_digest(records)
        if got == want:
            return {"suite": s.name, "warnings": warnings, "rows": rows}
        whole = not (s.where or s.limit)  # a selection of the file is not the file
        if whole and split.get("test") and _same_input(s.path, split["test"]):
            raise ConfigError(
                f"suite {s.name!r} ({s.path}) reads the file the split was made from, but not "
                f"its rows: {len(records):,} rows now, {n_test:,} then (row digest "
                f"{_short(got)}, {summary} records {_short(want)}); remake the split "
                "(zdebias shortcut-split)"
            )
        seen.append(f"{s.name} {len(records):,} rows")
    warnings.append(
        f"no suite here is the test set the split was made from ({test}, {n_test:,} rows; "
        f"the suites: {', '.join(seen) or 'none'}): the reliance gap is measured on the "
        "split's own rows, not on any suite here"
    )
    return {"suite": None, "warnings": warnings, "rows": rows}


def _same_input(a: str, b: str) -> bool:
    """Whether two input paths name the same file (as written, or resolved)."""
    if a == b:
        return True
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError):
        return False


def split_suites(split: ShortcutSplitSummary, *, task: str | None = None) -> list[Suite]:
    """One suite per slice of ``split`` (:func:`read_split`) that has rows."""
    folder = Path(split["folder"])
    return [
        Suite(suite, str(folder / f"{name}.jsonl"), format="jsonl", task=task)
        for name, suite in SUITES.items()
        if split["counts"].get(name)
    ]


def evaluate_with_split(
    models: Sequence[str | Path],
    suites: Sequence[Suite],
    shortcut_split: str | Path | None,
    settings: Any = None,
    **options: Any,
) -> EvaluationDocument:
    """:func:`~zdebias.evaluation.suites.evaluate_models` of ``models`` on ``suites`` plus,
    with ``shortcut_split`` (a ``zdebias shortcut-split`` folder or its summary.json), the
    split's slices as suites and each run's reliance (:func:`add_reliance`); ``options``:
    evaluate_models' keywords."""
    from zdebias.classify.settings import InferenceSettings
    from zdebias.evaluation.suites import evaluate_models

    if "metrics" not in options and getattr(settings, "metrics", None):
        options["metrics"] = settings.metrics  # the user's metrics (EvaluateSettings)
    min_size = getattr(settings, "min_group_size", None) or MIN_GROUP_SIZE
    # what this function honours itself (the split, metrics, group size) is taken here
    settings = InferenceSettings.take(settings) if settings is not None else None
    if shortcut_split is None:
        return evaluate_models(models, suites, settings, **options)
    split = read_split(shortcut_split)
    task = suites[0].task if suites else None
    found = check_split(split, suites, task=task)  # before any model loads
    split = {**split, "suite": found["suite"]}
    split["warnings"] = [*split.get("warnings", []), *found["warnings"]]
    doc = evaluate_models(models, [*suites, *split_suites(split, task=task)], settings, **options)
    return add_reliance(doc, split, rows=found["rows"], min_size=min_size)


def run_reliance(run: EvaluationRun) -> dict[str, Any]:
    """One run's accuracy per slice (None for an empty slice) and the gap; the gap is also
    put in ``run["metrics"]`` (:data:`GAP`) when both sides have rows."""
    results = run.get("results", {})
    acc = {
        name: (float(results[suite]["accuracy"]) if suite in results else None)
        for name, suite in SUITES.items()
    }
    gap = None
    if acc["aligned"] is not None and acc["conflicting"] is not None:
        gap = acc["aligned"] - acc["conflicting"]
        run.setdefault("metrics", {})[GAP] = gap
    return {**acc, "gap": gap}


def split_rows(split: ShortcutSplitSummary, *, task: str | None = None) -> dict[str, list[Record]]:
    """Each slice file's records (with their ``meta.shortcut``), in file order."""
    folder = Path(split["folder"])
    out = {}
    for name, suite in SUITES.items():
        file = folder / f"{name}.jsonl"
        if split["counts"].get(name) and file.exists():
            out[name] = load_suite(Suite(suite, str(file), format="jsonl", task=task))[0]
    return out


def _row_keys(
    rows: dict[str, list[Record]],
) -> tuple[list[str], list[str | None], list[list[str] | None], list[tuple[str, int]]]:
    """Gold labels, verdicts (None: free), carried shortcuts (None: not recorded) of the
    split's rows, slice by slice, and the ``(suite, n)`` the outcomes come from in order."""
    gold: list[str] = []
    verdicts: list[str | None] = []
    carries: list[list[str] | None] = []
    parts = []
    for name, records in rows.items():
        if not records:  # an empty slice is not evaluated: no outcomes to read
            continue
        parts.append((SUITES[name], len(records)))
        for r in records:
            info = r.meta.get("shortcut") if isinstance(r.meta, dict) else None
            info = info if isinstance(info, dict) else {}
            if "label" in info:
                verdict = info["label"]
            else:  # a split that recorded no verdict per row: its slice says what it can
                verdict = {"aligned": r.label, "conflicting": OTHER, "free": None}[name]
            gold.append(str(r.label))
            verdicts.append(None if verdict is None else str(verdict))
            have = info.get("carries")
            carries.append([str(x) for x in have] if isinstance(have, list) else None)
    return gold, verdicts, carries, parts


def add_groups(
    doc: EvaluationDocument,
    split: ShortcutSplitSummary,
    rows: dict[str, list[Record]],
    *,
    min_size: int = MIN_GROUP_SIZE,
) -> None:
    """Each run's ``groups`` (:class:`~zdebias.evaluation.groups.GroupAccuracy` of its
    outcomes on the split's rows) and ``shortcuts`` (:func:`shortcut_view` of the split's
    top shortcuts, when its rows record which they carry); the worst-group accuracy as the
    flat metric :data:`WORST_GROUP`, summarized over runs. A run scored before outcomes were
    kept gets neither."""
    from zdebias.evaluation.catalogue import registered_metrics

    gold, verdicts, carries, parts = _row_keys(rows)
    metric: GroupAccuracy = registered_metrics()["groups"].factory(min_size=min_size)
    labels = split.get("labels") or None
    cuts = [
        {"feature": str(d["feature"]), "label": str(d["label"])}
        for d in split.get("deciding_features") or []
        if isinstance(d, dict) and "feature" in d and "label" in d
    ]
    recorded = any(c is not None for c in carries)
    masks = shortcut_masks(cuts, gold, carries) if cuts and recorded else []
    groups = grouping(gold, verdicts, labels=labels)
    worst = []
    for run in doc["runs"]:
        results = run.get("results", {})
        outcomes = [results.get(suite, {}).get("outcomes") for suite, _n in parts]
        sizes = [n for _s, n in parts]
        if any(not isinstance(o, str) or len(o) != n for o, n in zip(outcomes, sizes, strict=True)):
            continue
        joined = "".join(outcomes).encode()  # type: ignore[arg-type]
        correct = np.frombuffer(joined, dtype=np.uint8) == ord("1")
        run["groups"] = metric.score(groups, correct)
        if masks:
            run["shortcuts"] = view_of(cuts, masks, correct)
        if run["groups"]["worst_group_accuracy"] is not None:
            run.setdefault("metrics", {})[WORST_GROUP] = run["groups"]["worst_group_accuracy"]
            worst.append(run["groups"]["worst_group_accuracy"])
    if worst and len(worst) == len(doc["runs"]):
        doc["summary"][WORST_GROUP] = summarize(worst)


def bias_model_overlap(split_bias: dict[str, Any] | None, run: dict[str, Any]) -> str | None:
    """Why a run's bias expert is not independent of the split's bias model (docs/design.md
    §13: a split must not be made with a bias model a compared method used), or None: the expert
    *is* the split's model (a split made with ``--hypo-only-model DIR``, PoE with ``--bias-model
    DIR``), or it learnt from the rows the split's model was trained on (the same
    ``train_rows_digest``). ``split_bias``: the split summary's ``used.bias_model``;
    ``run``: a results run with ``bias_expert`` (read from its classifier folder)."""
    expert = run.get("bias_expert")
    if not split_bias or not isinstance(expert, dict):
        return None
    family = str(split_bias.get("family") or "")
    loss = expert.get("loss") or "its loss"
    model = expert.get("model")
    if model and family.startswith("trained:") and _same_input(family[8:], str(model)):
        return f"its {loss} bias expert ({model}) is the split's bias model"
    digest = split_bias.get("train_digest")
    if digest and expert.get("train_rows_digest") == digest:
        what = f"({model})" if model else "(a joint hypothesis-only head)"
        return (
            f"its {loss} bias expert {what} learnt from the rows the split's bias model "
            f"({family or 'partial-input model'}) was trained on"
        )
    return None


def filter_model_overlap(split_bias: dict[str, Any] | None, run: dict[str, Any]) -> str | None:
    """Why a run's training rows are not independent of the split's bias model, or None: they
    are a z-filter's kept rows (``train_filter``, recorded by ``train-classifier``) and the
    filter's ``hypo-only-pred`` feature came from the split's model: the same trained folder,
    the same predictions digest, or a model of the same family trained on the same rows (the
    same ``train_digest``; another family on those rows, ``--bias-model ngram-lr``, is not
    warned about)."""
    record = run.get("train_filter")
    if not split_bias or not isinstance(record, dict):
        return None
    model = record.get("hypo_only_model")
    if not isinstance(model, dict):
        return None
    family = str(split_bias.get("family") or "")
    theirs = str(model.get("family") or "")
    where = f"its training rows were z-filtered ({record.get('summary')}) with"
    if family.startswith("trained:") and theirs.startswith("trained:"):
        if _same_input(family[8:], theirs[8:]):
            return f"{where} the split's bias model ({family[8:]}) as the hypo-only feature"
    digest = split_bias.get("predictions_digest")
    if digest and model.get("predictions_digest") == digest:
        return f"{where} the split's bias model's predictions as the hypo-only feature"
    digest = split_bias.get("train_digest")
    if digest and model.get("train_digest") == digest and theirs == family:
        return (
            f"{where} a hypo-only feature of the split's bias model's family ({family}), learnt "
            "from the rows the split's bias model was trained on"
        )
    return None


def bias_model_warnings(doc: Mapping[str, Any], split_bias: dict[str, Any] | None) -> list[str]:
    """One warning per reason a method's runs share the split's bias model
    (:func:`bias_model_overlap`, :func:`filter_model_overlap`), with how many runs."""
    expert = (
        "the split grades it with its own bias model, so its conflicting rows are the ones its "
        "expert already discounts"
    )
    filtered = (
        "the split grades it with the model that chose its training rows, so its conflicting "
        "rows are the ones the filter balanced away"
    )
    reasons: dict[tuple[str, str], int] = {}
    for run in doc["runs"]:
        for why, tail in (
            (bias_model_overlap(split_bias, run), expert),
            (filter_model_overlap(split_bias, run), filtered),
        ):
            if why:
                reasons[why, tail] = reasons.get((why, tail), 0) + 1
    n = len(doc["runs"])
    return [
        f"method {doc.get('name')!r} ({k} of {n} run{'' if n == 1 else 's'}): {why}: {tail}; "
        "make the split with an independent bias model (another family, trained on rows the "
        "method's expert never saw: shortcut-split --bias-model ngram-lr on other training rows)"
        for (why, tail), k in reasons.items()
    ]


def add_reliance(
    doc: EvaluationDocument,
    split: ShortcutSplitSummary,
    *,
    rows: dict[str, list[Record]] | None = None,
    min_size: int = MIN_GROUP_SIZE,
) -> EvaluationDocument:
    """``doc`` (an evaluation results document whose suites include the split's) with each
    run's ``reliance``, ``groups`` and ``shortcuts`` (:func:`add_groups`; ``rows``: the
    slices' records, read from the split's folder when not given), the gap's and the
    worst group's ``summary`` over runs and ``shortcut_split`` (what was split, by what,
    the counts, warnings and :data:`MEANING`)."""
    gaps = []
    for run in doc["runs"]:
        run["reliance"] = run_reliance(run)
        if run["reliance"]["gap"] is not None:
            gaps.append(run["reliance"]["gap"])
    if gaps and len(gaps) == len(doc["runs"]):
        doc["summary"][GAP] = summarize(gaps)
    if rows is None:
        rows = split_rows(split)
    add_groups(doc, split, rows, min_size=min_size)
    warnings = list(split.get("warnings", []))
    split_bias = (split.get("used") or {}).get("bias_model")
    warnings += bias_model_warnings(doc, split_bias)
    if not split["counts"].get("conflicting"):
        warnings.append("the split has no conflicting rows: no gap")
    for line in warnings:
        log.warning("shortcut split %s: %s", split["folder"], line)
    doc["shortcut_split"] = {
        "folder": split["folder"],
        "by": split.get("by"),
        "test": split.get("test"),
        "suite": split.get("suite"),
        "test_digest": split.get("test_digest"),
        "counts": split["counts"],
        "bias_model": split_bias,
        "warnings": warnings,
        "meaning": MEANING,
    }
    return doc


#: the reliance table's columns, in order: conflicting and worst group first, the gap beside
#: its two parts
COLUMNS = ("worst-group", "conflicting", "aligned", "gap", "free")
HEADERS = {
    "worst-group": "worst group",
    "conflicting": "conflicting",
    "aligned": "aligned",
    "gap": "gap (aligned − conflicting)",
    "free": "free",
}


def _over_runs(doc: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    values = [run.get("metrics", {}).get(key) for run in doc["runs"]]
    ok = values and all(v is not None for v in values)
    return summarize([float(v) for v in values]) if ok else None


def reliance_table(
    docs: Sequence[Mapping[str, Any]], comparison: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Per document with a shortcut split: its name and, per column of :data:`COLUMNS`, a
    summary over runs (``{mean, std, n_runs}``, None where absent); ``comparison`` adds the
    gap's t-test (``test``) and, against the first document, ``aligned_loss``
    (:func:`~zdebias.evaluation.groups.aligned_loss` of the means)."""
    tests = {
        item["name"]: item["tests"].get(GAP) for item in (comparison or {}).get("comparisons", [])
    }
    keys = {**SUITES, "gap": GAP, "worst-group": WORST_GROUP}
    rows = []
    for doc in docs:
        if "shortcut_split" not in doc:
            continue
        cells = {name: _over_runs(doc, key) for name, key in keys.items()}
        rows.append({"name": doc.get("name"), "cells": cells, "test": tests.get(doc.get("name"))})
    if comparison is not None and rows:
        base = rows[0]
        means = lambda row: {  # noqa: E731
            k: (row["cells"][k] or {}).get("mean") for k in ("aligned", "conflicting")
        }
        for row in rows[1:]:
            row["aligned_loss"] = aligned_loss(means(base), means(row))
    return rows


def reliance_notes(rows: Sequence[dict[str, Any]], baseline: str | None = None) -> list[str]:
    """The aligned-loss lines of a compared reliance table (:func:`reliance_table`)."""
    base = baseline if baseline is not None else (rows[0]["name"] if rows else "")
    lines = [
        aligned_loss_line(str(row["name"]), str(base), row.get("aligned_loss")) for row in rows
    ]
    return [line for line in lines if line]


def _group_cells(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Group name → gold, verdict, slice, n (first run) and the accuracy over runs."""
    runs = [run["groups"] for run in doc["runs"] if run.get("groups")]
    if not runs or len(runs) != len(doc["runs"]):
        return {}
    out = {}
    for name, cell in runs[0]["groups"].items():
        values = [r["groups"].get(name, {}).get("accuracy") for r in runs]
        ok = all(v is not None for v in values)
        out[name] = {**cell, "summary": summarize([float(v) for v in values]) if ok else None}
    return out


def groups_table(docs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The gold label × verdict groups of the documents with groups: ``methods`` (names),
    ``rows`` (per group, conflicting groups first: ``name``, ``slice``, ``n``, ``cells``: a
    summary over runs per method) and ``worst`` (per method, one line: the worst group over
    the groups with enough rows, how many qualify); None when no run has groups."""
    tables = [(doc, _group_cells(doc)) for doc in docs if "shortcut_split" in doc]
    tables = [(doc, cells) for doc, cells in tables if cells]
    if not tables:
        return None
    names: dict[str, dict[str, Any]] = {}
    for _doc, cells in tables:
        for name, cell in cells.items():
            names.setdefault(name, cell)
    order = {"conflicting": 0, "aligned": 1, "free": 2}
    rows = [
        {
            "name": name,
            "slice": cell["slice"],
            "n": cell["n"],
            "cells": [(cells.get(name) or {}).get("summary") for _doc, cells in tables],
        }
        for name, cell in sorted(names.items(), key=lambda kv: order[kv[1]["slice"]])
    ]
    worst_lines = []
    for doc, _cells in tables:
        first = doc["runs"][0]["groups"]
        worst = [run["groups"]["worst_group"] for run in doc["runs"]]
        which = sorted({w["group"] for w in worst if w})
        k, m, size = first["n_qualifying"], first["n_groups"], first["min_size"]
        if not which:
            worst_lines.append(
                f"{doc.get('name')}: no group has {size} rows or more (of {m}): no "
                "worst-group accuracy"
            )
            continue
        worst_lines.append(
            f"{doc.get('name')}: worst group over the {k} of {m} groups with {size} rows or "
            f"more: {format_cell(_over_runs(doc, WORST_GROUP))} ({', '.join(which)})"
        )
    methods = [str(doc.get("name")) for doc, _ in tables]
    return {"methods": methods, "rows": rows, "worst": worst_lines}


def groups_markdown(docs: Sequence[Mapping[str, Any]]) -> str:
    """:func:`groups_table` in Markdown, then its worst-group lines; empty without groups."""
    table = groups_table(docs)
    if table is None:
        return ""
    header = ["gold × verdict", "slice", "n", *table["methods"]]
    lines = ["| " + " | ".join(header) + " |", "|---|---" + "|---:" * (len(header) - 2) + "|"]
    for row in table["rows"]:
        accs = [format_cell(cell) for cell in row["cells"]]
        lines.append("| " + " | ".join([row["name"], row["slice"], f"{row['n']:,}", *accs]) + " |")
    return "\n".join([*lines, "", *table["worst"]])


def shortcuts_table(docs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Per top shortcut of the split: ``name`` (``feature → label``), the rows that carry it
    where it points to the gold label (``n_to_gold``) and elsewhere (``n_elsewhere``), and
    per method the accuracy on each (``cells``: to gold, elsewhere, …; mean ± std over
    runs); None when the split's rows do not record the shortcuts they carry."""
    with_view = [d for d in docs if d["runs"] and all(r.get("shortcuts") for r in d["runs"])]
    if not with_view:
        return None
    rows = []
    for i, cut in enumerate(with_view[0]["runs"][0]["shortcuts"]):
        cells = []
        for doc in with_view:
            for side in ("to_gold", "elsewhere"):
                values = [run["shortcuts"][i][side]["accuracy"] for run in doc["runs"]]
                ok = all(v is not None for v in values)
                cells.append(summarize(values) if ok else None)
        rows.append(
            {
                "name": f"{cut['feature']} → {cut['label']}",
                "n_to_gold": cut["to_gold"]["n"],
                "n_elsewhere": cut["elsewhere"]["n"],
                "cells": cells,
            }
        )
    return {"methods": [str(d.get("name")) for d in with_view], "rows": rows}


def shortcuts_markdown(docs: Sequence[Mapping[str, Any]]) -> str:
    """:func:`shortcuts_table` in Markdown; empty without it."""
    table = shortcuts_table(docs)
    if table is None:
        return ""
    header = ["shortcut → label", "rows to gold", "rows elsewhere"]
    for name in table["methods"]:
        header += [f"{name}: to gold", f"{name}: elsewhere"]
    lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
    for row in table["rows"]:
        cells = [row["name"].replace("|", "\\|"), f"{row['n_to_gold']:,}"]
        cells += [f"{row['n_elsewhere']:,}", *[format_cell(c) for c in row["cells"]]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def reliance_markdown(
    docs: Sequence[Mapping[str, Any]], comparison: dict[str, Any] | None = None
) -> str:
    """The reliance table in Markdown (worst group and conflicting first, the gap beside its
    two parts) with :data:`MEANING`, the aligned-loss lines of a comparison, the split's
    warnings, then the gold label × verdict groups and the per-shortcut view; empty when no
    document has a shortcut split."""
    rows = reliance_table(docs, comparison)
    if not rows:
        return ""
    tested = comparison is not None and any(row["test"] for row in rows)
    header = ["Method", *[HEADERS[k] for k in COLUMNS]]
    if tested and comparison is not None:
        header += ["Δ gap vs " + str(comparison["baseline"]), "p", "p (Holm)"]
    lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
    for row in rows:
        cells = [format_cell(row["cells"][k]) for k in COLUMNS]
        if tested:
            test = row["test"]
            if test:
                p = "–" if test["p"] is None else f"{test['p']:.4f}"
                holm = "–" if test.get("p_holm") is None else f"{test['p_holm']:.4f}"
                holm += "*" if test.get("significant") and test.get("p_holm") is not None else ""
                cells += [f"{100 * test['difference']:+.2f}", p, holm]
            else:
                cells += ["", "", ""]
        lines.append("| " + " | ".join([str(row["name"]), *cells]) + " |")
    split = next(doc["shortcut_split"] for doc in docs if "shortcut_split" in doc)
    counts = ", ".join(f"{k} {v:,}" for k, v in split["counts"].items())
    of = f" of suite {split['suite']!r}" if split.get("suite") else ""
    out = [
        f"Shortcut split {split['folder']}{of} (by {split['by']}: {counts}); accuracy in %.",
        "",
        *lines,
        "",
        MEANING,
    ]
    baseline = comparison.get("baseline") if comparison else None
    out += reliance_notes(rows, baseline) if comparison is not None else []
    warned = []
    for doc in docs:
        for line in (doc.get("shortcut_split") or {}).get("warnings", []):
            if line not in warned:
                warned.append(line)
                if comparison is not None and "its own bias model" in line:
                    log.warning("shortcut split %s: %s", split["folder"], line)  # compare too
    out += [f"Warning: {line}" for line in warned]
    groups = groups_markdown(docs)
    if groups:
        out += ["", "Accuracy per gold label × shortcut verdict (%):", "", groups]
    view = shortcuts_markdown(docs)
    if view:
        out += [
            "",
            "Per shortcut, accuracy (%) on the rows that carry it, where it points to the gold "
            "label and where it points elsewhere:",
            "",
            view,
        ]
    return "\n".join(out)


__all__ = [
    "COLUMNS",
    "GAP",
    "MEANING",
    "SUITES",
    "WORST_GROUP",
    "add_groups",
    "add_reliance",
    "bias_model_overlap",
    "bias_model_warnings",
    "check_split",
    "evaluate_with_split",
    "filter_model_overlap",
    "groups_markdown",
    "groups_table",
    "read_split",
    "reliance_markdown",
    "reliance_notes",
    "reliance_table",
    "run_reliance",
    "shortcuts_markdown",
    "shortcuts_table",
    "split_rows",
    "split_suites",
]
