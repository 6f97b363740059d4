"""Score classifiers on labelled evaluation sets ("suites", docs/design.md §9).

A suite is ``NAME=PATH``: any input :mod:`zdebias.data` reads (SNLI-hard JSONL, MNLI-hard
triplets ``DIR::test``, the HANS file, ANLI, the Liu et al. sets, any labelled file). Scoring is
a pure function of a probability array (:func:`score_predictions`); :func:`evaluate_models`
runs each model over each suite and returns one JSON-ready results document.

A three-way NLI model on a two-way set (HANS: ``entailment`` / ``non-entailment``) predicts
``non-entailment`` when p(neutral) + p(contradiction) > p(entailment). Sets whose records carry
``meta["heuristic"]`` (HANS) are also scored per heuristic × gold label and per subcase.

>>> hans = parse_suite("hans=heuristics_evaluation_set.txt")   # doctest: +SKIP
>>> doc = evaluate_models(["runs/clf"], [hans])                  # doctest: +SKIP
>>> doc["summary"]["hans"]["mean"]                               # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from zdebias.classify.learned import recorded_did_not_learn
from zdebias.classify.settings import InferenceSettings
from zdebias.data.options import ReadOptions
from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.evaluation.metrics import Accuracy, HeuristicCells, label_metrics
from zdebias.evaluation.metrics import summarize as summarize  # re-exported, as before

if TYPE_CHECKING:
    from zdebias.evaluation.documents import EvaluationDocument, EvaluationRun

FORMAT_NAME = "zdebias-evaluation"
FORMAT_VERSION = 1
NON_ENTAILMENT = "non-entailment"
#: Meta keys that split a suite into groups (HANS), outer and inner.
GROUP_KEY = "heuristic"
SUBGROUP_KEY = "subcase"


@dataclass(frozen=True)
class Suite:
    """One evaluation set: a name for the tables and the path (plus reader options; the
    path's own ``PATH::KEY=VALUE`` options replace them, :meth:`ReadOptions.for_input`)."""

    name: str
    path: str
    format: str | None = None
    task: str | None = None
    split: str | None = None
    on_error: str = "raise"
    columns: dict[str, str] | None = None
    label_map: dict[str, str] | None = None
    where: dict[str, str] | None = None
    limit: int | None = None

    def reader(self) -> ReadOptions:
        """The reader settings of this suite."""
        return ReadOptions.of(
            None,
            **{k: v for k, v in asdict(self).items() if k not in ("name", "path") and v},
        )


def parse_suite(spec: str, **options: Any) -> Suite:
    """``NAME=PATH`` → :class:`Suite` (a bare path takes its file name as the name; a path
    may end in ``::KEY=VALUE`` options of its own)."""
    name, sep, path = spec.partition("=")
    if not sep or "::" in name:
        path = spec
        name = Path(spec.split("::")[0]).name.split(".")[0]
    name, path = name.strip(), path.strip()
    if not name or not path:
        raise ConfigError(f"bad suite {spec!r}: expected NAME=PATH")
    if "/" in name:
        raise ConfigError(f"bad suite name {name!r}: '/' is reserved for sub-results")
    return Suite(name, path, **options)


def load_suite(suite: Suite, *, empty: bool = False) -> tuple[list[Record], dict[str, Any]]:
    """The suite's records and a description (path, format, task, counts, skipped rows);
    a suite with no labelled records is an error unless ``empty``."""
    records, rep = suite.reader().read(suite.path)
    info = {
        "name": suite.name,
        "path": suite.path,
        "format": rep.format,
        "task": rep.task,
        "n": len(records),
        "n_skipped_unlabelled": rep.n_unlabelled,
        "n_skipped_errors": rep.n_errors,
    }
    if rep.where:  # the suite's own (PATH::where=...) or the command's
        info.update(where=rep.where, n_skipped_by_where=rep.n_skipped_by_where)
    if not records and not empty:
        why = f": {rep.where_none}" if rep.where_none else ""
        raise ConfigError(f"suite {suite.name!r} ({suite.path}) has no labelled records{why}")
    return records, info


def map_predictions(
    probs: np.ndarray, model_labels: Sequence[str], gold_labels: set[str]
) -> tuple[list[str], str]:
    """Predicted label names for a set whose gold labels are ``gold_labels``.

    Returns ``(predictions, mapping)`` with mapping ``direct`` (argmax over the model's labels)
    or ``non-entailment-sum`` (two-way set, model with ``entailment`` and other labels: every
    non-entailment probability is summed; a tie goes to non-entailment).
    """
    model_labels = list(model_labels)
    if probs.ndim != 2 or probs.shape[1] != len(model_labels):
        raise ValueError(f"probabilities of shape {probs.shape} for {len(model_labels)} labels")
    if gold_labels <= set(model_labels):
        return [model_labels[i] for i in probs.argmax(axis=1)], "direct"
    if gold_labels <= {"entailment", NON_ENTAILMENT} and "entailment" in model_labels:
        ent = model_labels.index("entailment")
        p_ent = probs[:, ent]
        p_non = probs.sum(axis=1) - p_ent
        return [
            "entailment" if e > n else NON_ENTAILMENT for e, n in zip(p_ent, p_non, strict=True)
        ], "non-entailment-sum"
    raise ConfigError(
        f"the set's labels ({', '.join(sorted(gold_labels))}) cannot be read off a model that "
        f"predicts {', '.join(model_labels)}"
    )


def _cell(n: int, correct: int) -> dict[str, Any]:
    return {"n": n, "n_correct": correct, "accuracy": correct / n if n else float("nan")}


def rows_digest(records: Sequence[Record]) -> str:
    """A short digest of the rows scored, in order (id, label and texts): two runs' outcomes
    pair row by row only when it is the same."""
    h = hashlib.sha256()
    for r in records:
        fields = (r.id, r.label, r.premise, r.hypothesis, r.text)
        h.update("\x1f".join("" if f is None else str(f) for f in fields).encode() + b"\n")
    return h.hexdigest()[:16]


def score_predictions(
    probs: np.ndarray, model_labels: Sequence[str], records: Sequence[Record]
) -> dict[str, Any]:
    """Accuracy of probabilities ``[N, L]`` on ``records``, with breakdowns.

    Returns ``accuracy``, ``n``, ``n_correct``, ``mapping``, ``per_label`` (accuracy per gold
    label), ``confusion`` (gold → predicted → count), ``macro_f1``, ``balanced_accuracy`` and
    ``per_label_f1`` (:func:`~zdebias.evaluation.metrics.label_metrics`, on the gold labels)
    and, when records carry
    ``meta["heuristic"]``, ``groups`` (heuristic → gold label → cell, plus ``all``) and
    ``subgroups`` (subcase → cell).
    """
    if len(records) != probs.shape[0]:
        raise ValueError(f"{probs.shape[0]} probability rows for {len(records)} records")
    gold = [r.label for r in records]
    preds, mapping = map_predictions(probs, model_labels, set(gold))
    correct = [g == p for g, p in zip(gold, preds, strict=True)]
    n_correct = sum(correct)
    labels_seen = list(dict.fromkeys(sorted(set(gold), key=_label_order(model_labels))))
    per_label = {
        lab: _cell(
            sum(1 for g in gold if g == lab),
            sum(1 for g, c in zip(gold, correct, strict=True) if g == lab and c),
        )
        for lab in labels_seen
    }
    confusion: dict[str, dict[str, int]] = {lab: {} for lab in labels_seen}
    for g, p in zip(gold, preds, strict=True):
        confusion[g][p] = confusion[g].get(p, 0) + 1
    out: dict[str, Any] = {
        "accuracy": n_correct / len(records),
        "n": len(records),
        "n_correct": n_correct,
        "mapping": mapping,
        "per_label": per_label,
        "confusion": confusion,
        **label_metrics(gold, preds, labels_seen),
        # each row right (1) or wrong (0), and which rows: McNemar's test between two single
        # runs on the same rows (zdebias.evaluation.significance)
        "outcomes": "".join("1" if ok else "0" for ok in correct),
        "rows": rows_digest(records),
    }
    if any(GROUP_KEY in r.meta for r in records):
        groups: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
        subgroups: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for r, ok in zip(records, correct, strict=True):
            heuristic = str(r.meta.get(GROUP_KEY, "?"))
            for key in (r.label, "all"):
                groups[heuristic][key][0] += 1
                groups[heuristic][key][1] += int(ok)
            if SUBGROUP_KEY in r.meta:
                cell = subgroups[f"{heuristic}/{r.meta[SUBGROUP_KEY]}/{r.label}"]
                cell[0] += 1
                cell[1] += int(ok)
        out["groups"] = {
            h: {k: _cell(*cells[k]) for k in [*labels_seen, "all"] if k in cells}
            for h, cells in sorted(groups.items())
        }
        out["subgroups"] = {k: _cell(*v) for k, v in sorted(subgroups.items())}
    return out


def predict_records(
    model: str, records: Sequence[Record], settings: InferenceSettings, *, progress: bool = False
) -> tuple[list[Record], dict[str, Any]]:
    """Each record with ``meta.pred`` / ``meta.probs`` from a classifier, and a summary:
    labels, input kind, and the accuracy where the gold labels fit the model's."""
    from zdebias.classify.on_ray import classifier_for
    from zdebias.classify.predict import with_predictions as predicted

    clf = classifier_for(model, settings, progress=progress)
    (probs,) = clf.predict_each([records], batch_size=settings.batch_size, progress=progress)
    summary: dict[str, Any] = {"labels": clf.labels, "input": clf.input or "auto"}
    try:
        scored = score_predictions(probs, clf.labels, records)
        summary.update(accuracy=scored["accuracy"], mapping=scored["mapping"])
    except ConfigError as err:
        summary.update(accuracy=None, note=str(err))
    return predicted(records, probs, clf.labels, clf.input), summary


def _label_order(model_labels: Sequence[str]) -> Callable[[str], tuple[int, str]]:
    order = {name: i for i, name in enumerate([*model_labels, NON_ENTAILMENT])}
    return lambda lab: (order.get(lab, len(order)), lab)


def flat_metrics(suite: str, result: dict[str, Any]) -> dict[str, float]:
    """``{suite: acc, suite/heuristic: acc, suite/heuristic/label: acc}`` for summaries
    (the registered metrics ``accuracy`` and ``heuristics``)."""
    from zdebias.evaluation.registry import Scored

    scored = Scored(suite, (), (), (), result)
    return {**Accuracy().compute(scored), **HeuristicCells().compute(scored)}


def _run_info(model: str) -> dict[str, Any]:
    """Seed, loss and input of a trained classifier folder, when it has them, and
    ``did_not_learn`` (why) for a training that did not learn
    (:func:`~zdebias.classify.learned.did_not_learn`), ``best_dev_accuracy`` where it was
    recorded (a seed that is an outlier among its siblings is flagged,
    :func:`~zdebias.evaluation.tables.outlier_runs`)."""
    info: dict[str, Any] = {}
    folder = Path(model)
    for name in ("zdebias_classifier.json", "metrics.json"):
        path = folder / name
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):  # unreadable, not UTF-8, not JSON: nothing to show
                continue
            if not isinstance(data, dict):
                continue
            for key in ("seed", "loss", "input", "base_model"):
                if key in data and key not in info:
                    info[key] = data[key]
            if name == "metrics.json" and isinstance(data, dict):
                reason = recorded_did_not_learn(data)  # the loader warns; the document keeps why
                if reason:
                    info["did_not_learn"] = reason
                best = data.get("best")
                if isinstance(best, dict) and isinstance(best.get("dev_accuracy"), int | float):
                    info["best_dev_accuracy"] = float(best["dev_accuracy"])
                bias = _bias_expert(data)
                if bias:
                    info["bias_expert"] = bias
                if isinstance(data.get("train_filter"), dict):  # its rows' z-filter's model
                    info["train_filter"] = data["train_filter"]
    return info


def _bias_expert(metrics: dict[str, Any]) -> dict[str, Any] | None:
    """What a trained classifier's bias expert was (PoE and the other losses that need one):
    ``mode`` (frozen: ``model``, a trained hypothesis-only classifier; joint: a head trained
    with the classifier), ``train_rows_digest`` (the rows it learnt from, when recorded), so
    ``evaluate`` can tell whether a shortcut split grades the run with the same bias model."""
    settings = metrics.get("settings")
    if not isinstance(settings, dict):
        return None
    model, mode = settings.get("bias_model"), settings.get("bias_mode")
    if not model and not (mode == "joint" and metrics.get("loss") == "poe"):
        return None
    out: dict[str, Any] = {"loss": metrics.get("loss"), "mode": mode, "model": model}
    if model:  # a frozen expert: the rows it was trained on, from its own folder
        try:
            own = json.loads((Path(str(model)) / "metrics.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            own = None
        out["train_rows_digest"] = own.get("train_rows_digest") if isinstance(own, dict) else None
    else:  # a joint head learns from the classifier's own training rows
        out["train_rows_digest"] = metrics.get("train_rows_digest")
    return out


class PredictionCache:
    """Probabilities of local classifier folders on record sets, kept as ``KEY.npy`` in a
    folder: the key is a digest of the model folder's bytes, the records, the device, dtype,
    batch size and max length, so a hit is what predicting again would give."""

    def __init__(self, folder: str | Path, sets: Sequence[Sequence[Record]]) -> None:
        from zdebias.models.checkpoints import records_digest

        self.folder = Path(folder)
        self.set_keys = [records_digest(records) for records in sets]
        self.sets = sets
        self.hits = 0

    @staticmethod
    def model_digest(model: str | Path) -> str | None:
        """sha256 over a local folder's file names and bytes; None for a hub name."""
        import hashlib

        path = Path(model)
        if not path.is_dir():
            return None
        h = hashlib.sha256()
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            h.update(f.relative_to(path).as_posix().encode() + b"\0")
            with f.open("rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
            h.update(b"\0")
        return h.hexdigest()

    def predict(
        self, model: str | Path, clf: Any, batch_size: int, *, progress: bool = False
    ) -> list[np.ndarray]:
        """``clf.predict_each`` of the sets, read from the cache where it holds them."""
        from zdebias.data.writers import atomic_open
        from zdebias.models.checkpoints import fingerprint

        digest = self.model_digest(model)
        if digest is None or not hasattr(clf, "model"):
            return clf.predict_each(self.sets, batch_size=batch_size, progress=progress)
        param = next(clf.model.parameters())
        base = [digest, str(param.device), str(param.dtype), batch_size, clf.max_length, clf.input]
        files = [self.folder / f"{fingerprint(base, key)}.npy" for key in self.set_keys]
        out: list[np.ndarray | None] = [np.load(f) if f.is_file() else None for f in files]
        todo = [i for i, probs in enumerate(out) if probs is None]
        self.hits += len(files) - len(todo)
        if todo:
            fresh = clf.predict_each(
                [self.sets[i] for i in todo], batch_size=batch_size, progress=progress
            )
            self.folder.mkdir(parents=True, exist_ok=True)
            for i, probs in zip(todo, fresh, strict=True):
                out[i] = probs
                with atomic_open(files[i], "wb") as fh:
                    np.save(fh, probs)
        return [probs for probs in out if probs is not None]


def novel_rows(sets: Sequence[Sequence[Record]]) -> tuple[list[list[Record]], list[np.ndarray]]:
    """Per set, its rows whose model input (premise, hypothesis, text) no earlier row had; and
    per set, the index of each of its rows in the concatenation of those novel rows. Rows in
    several suites (a shortcut split's slices are rows of the test set) are predicted once.

    >>> a, b = Record("1", "neutral", "p", "h"), Record("2", "neutral", "p", "h2")
    >>> novel, where = novel_rows([[a, b], [b.replace(id="x")]])
    >>> [[r.id for r in rows] for rows in novel], [w.tolist() for w in where]
    ([['1', '2'], []], [[0, 1], [1]])
    """
    index: dict[tuple[str | None, str | None, str | None], int] = {}
    novel: list[list[Record]] = []
    where = []
    for records in sets:
        fresh: list[Record] = []
        idx = np.empty(len(records), dtype=np.int64)
        for k, r in enumerate(records):
            key = (r.premise, r.hypothesis, r.text)
            at = index.get(key)
            if at is None:
                at = index[key] = len(index)
                fresh.append(r)
            idx[k] = at
        novel.append(fresh)
        where.append(idx)
    return novel, where


def evaluate_models(
    models: Sequence[str | Path],
    suites: Sequence[Suite],
    settings: InferenceSettings | None = None,
    *,
    name: str | None = None,
    progress: bool = True,
    predictions_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    metrics: Sequence[str] | None = None,
    **overrides: Any,
) -> EvaluationDocument:
    """Evaluate every model (e.g. one per seed) on every suite; return the results document.

    ``settings``: batch size and device (an :class:`~zdebias.classify.settings.InferenceSettings`
    or :class:`~zdebias.evaluation.settings.EvaluateSettings`); ``overrides``: those fields by
    keyword (``batch_size=256``).

    Document: ``name``, ``suites`` (descriptions), ``runs`` (per model: ``model``, ``seed``...,
    ``results`` per suite, ``metrics`` flat: accuracies, and macro-F1, balanced accuracy and
    per-label accuracy and F1 under :func:`~zdebias.evaluation.metrics.metric_key`),
    ``summary`` (flat metric → mean ± std over runs).
    With ``predictions_dir``, each run's records are also written there with their
    predictions (``run{i}-{suite}.jsonl``; meta ``pred`` as scored, ``probs`` per model label).
    With ``cache_dir``, a local model's probabilities on a suite are kept there and read back
    by any later evaluation of the same model bytes on the same records with the same device,
    dtype and batch size (:class:`PredictionCache`): the same numbers, without predicting.
    ``metrics``: metrics run beside the built-ins (:func:`~zdebias.evaluation.registry.
    suite_metrics`: registered names or ``pkg.module:Class``); the document names them under
    ``extra_metrics``, so ``compare`` tests theirs.
    """
    from zdebias.classify.on_ray import classifier_for
    from zdebias.data.writers import write_records
    from zdebias.evaluation.catalogue import flat_scores, suite_metrics
    from zdebias.evaluation.registry import Scored

    opts = InferenceSettings.of(settings, **overrides)
    if not models:
        raise ConfigError("evaluate needs at least one model")
    if not suites:
        raise ConfigError("evaluate needs at least one --suite NAME=PATH")
    names = [s.name for s in suites]
    dupes = [n for n, c in Counter(names).items() if c > 1]
    if dupes:
        raise ConfigError(f"suite names must be unique; repeated: {', '.join(dupes)}")
    chosen = suite_metrics(metrics)  # an unknown metric fails before any model loads
    loaded = [load_suite(s) for s in suites]
    runs: list[EvaluationRun] = []
    sets = [records for records, _info in loaded]
    novel, where = novel_rows(sets)  # a row in several suites is predicted once
    todo = [rows for rows in novel if rows]
    cache = PredictionCache(cache_dir, todo) if cache_dir is not None and not opts.on_ray else None
    for run_index, model in enumerate(models):
        clf = classifier_for(model, opts, progress=progress)
        if cache is None:
            parts = clf.predict_each(todo, batch_size=opts.batch_size, progress=progress)
        else:
            parts = cache.predict(model, clf, opts.batch_size, progress=progress)
        probs_all = np.concatenate(parts) if parts else np.empty((0, len(clf.labels)))
        scored = [probs_all[idx] for idx in where]
        results: dict[str, Any] = {}
        flat: dict[str, float] = {}
        for suite, records, probs in zip(suites, sets, scored, strict=True):
            results[suite.name] = score_predictions(probs, clf.labels, records)
            preds, _ = map_predictions(probs, clf.labels, {r.label for r in records})
            if predictions_dir is not None:
                rows = (
                    r.replace(
                        meta={
                            **r.meta,
                            "pred": p,
                            "probs": dict(zip(clf.labels, map(float, row), strict=True)),
                        }
                    )
                    for r, p, row in zip(records, preds, probs, strict=True)
                )
                write_records(rows, Path(predictions_dir) / f"run{run_index}-{suite.name}.jsonl")
            gold = [r.label for r in records]
            scored_suite = Scored(suite.name, gold, preds, records, results[suite.name])
            flat.update(flat_scores(chosen, scored_suite))
        run: EvaluationRun = {"model": str(model)}
        run.update(cast("EvaluationRun", _run_info(str(model))))  # what its folder recorded
        run.update({"labels": clf.labels, "results": results, "metrics": flat})
        runs.append(run)
        del clf
    keys = list(runs[0]["metrics"])
    summary = {
        k: summarize([r["metrics"][k] for r in runs])
        for k in keys
        if all(k in r["metrics"] for r in runs)
    }
    doc: EvaluationDocument = {
        "kind": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "name": name or Path(str(models[0])).name,
        "suites": [{**asdict(s), **info} for s, (_r, info) in zip(suites, loaded, strict=True)],
        "runs": runs,
        "summary": summary,
    }
    if metrics:  # the user's metrics, by the names given (absent: a document as before)
        doc["extra_metrics"] = list(dict.fromkeys(metrics))
    return doc


class _GroupCell(BaseModel):
    model_config = ConfigDict(extra="allow")
    gold: str
    verdict: str
    slice: Literal["aligned", "conflicting", "free"]
    n: Annotated[int, Field(ge=0)]
    n_correct: Annotated[int, Field(ge=0)]
    accuracy: float | None


class _Groups(BaseModel):
    """A run's gold label × verdict groups (:mod:`zdebias.evaluation.groups`; optional:
    results files of version 1 written before them have none)."""

    model_config = ConfigDict(extra="allow")
    groups: dict[str, _GroupCell]
    min_size: Annotated[int, Field(ge=1)]
    n_groups: Annotated[int, Field(ge=0)]
    n_qualifying: Annotated[int, Field(ge=0)]
    worst_group: dict[str, Any] | None
    worst_group_accuracy: float | None


class _Side(BaseModel):
    n: Annotated[int, Field(ge=0)]
    n_correct: Annotated[int, Field(ge=0)]
    accuracy: float | None


class _Shortcut(BaseModel):
    model_config = ConfigDict(extra="allow")
    feature: str
    label: str
    to_gold: _Side
    elsewhere: _Side


class _Run(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str
    results: dict[str, dict[str, Any]]
    metrics: dict[str, float | None]
    groups: _Groups | None = None
    shortcuts: list[_Shortcut] | None = None


class _SuiteInfo(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


class _SplitInfo(BaseModel):
    model_config = ConfigDict(extra="allow")
    folder: str
    by: str | None = None
    counts: dict[str, int]
    warnings: list[str] = []


class _Results(BaseModel):
    """The fields of a results document that compare and report read."""

    model_config = ConfigDict(extra="allow")
    kind: Literal["zdebias-evaluation"]
    name: str | None = None
    runs: Annotated[list[_Run], Field(min_length=1)]
    suites: list[_SuiteInfo]
    summary: dict[str, dict[str, Any]] = {}
    shortcut_split: _SplitInfo | None = None


def read_results(path: str | Path) -> EvaluationDocument:
    """Load a results document written by ``zdebias evaluate``, checked: one
    :class:`ConfigError` line for a file that is missing, not UTF-8 JSON, gives a key twice,
    is of another kind or version, or lacks what the tables read."""
    from zdebias.data.documents import checked, read_document

    p = Path(path)
    what = "a zdebias evaluation results file (zdebias evaluate --out FILE)"
    doc = read_document(p, missing=f"{p}: no such results file")
    if not isinstance(doc, dict) or doc.get("kind") != FORMAT_NAME:
        kind = "not an object"
        if isinstance(doc, dict):
            kind = f"kind {doc['kind']!r}" if "kind" in doc else "no kind"
        raise ConfigError(f"{p}: {kind}, not {what}, whose kind is {FORMAT_NAME!r}")
    for key in ("version", "format_version"):
        if key in doc and doc[key] != FORMAT_VERSION:
            raise ConfigError(
                f"{p}: field '{key}': {doc[key]!r}; this zdebias reads version "
                f"{FORMAT_VERSION} of {FORMAT_NAME} (written by a newer zdebias?)"
            )
    checked(doc, _Results, p, what=what)
    for key, summary in doc.get("summary", {}).items():
        if any(
            v is None or (isinstance(v, float) and math.isnan(v)) for v in summary.get("values", [])
        ):
            raise ConfigError(f"{p}: summary {key!r} holds missing values")
    return cast("EvaluationDocument", doc)  # its fields checked above (_Results)
