"""Confidence filtering (GD-NLI §2.2.2, docs/design.md §7): keep a sample only if a classifier
trained on the original data gives its label a probability above τ; or, DISCO's rule
(docs/design.md §12), only if the judge's probability of its label rises by more than δ from a
reference pair.

:func:`confidence_mask` and :func:`~zdebias.classify.judge.delta_p_mask` are the pure parts
(arrays in, mask out; the references and the summary's counts are in
:mod:`zdebias.classify.judge`); :func:`confidence_filter` runs a classifier over records and
partitions them: kept + rejected = input, in input order, with ``meta["confidence"]`` =
p(label) on every record.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from zdebias.classify import judge
from zdebias.classify.settings import ConfidenceSettings
from zdebias.data.schema import Record
from zdebias.data.writers import write_files
from zdebias.errors import ConfigError, DataError

#: τ of Table 8 (the default ``threshold`` of :class:`ConfidenceSettings`).
DEFAULT_TAU = 0.95
CONFIDENCE_KEY = "confidence"
log = logging.getLogger("zdebias")
#: meta keys of the delta-p rule: p(label) of the reference pair and the rise to the sample
REFERENCE_KEY, DELTA_KEY = "confidence_reference", "delta_p"
#: δ values whose kept counts a delta-p summary reports
PROFILE_DELTAS = (0.0, 0.1, 0.25, 0.5)


def confidence_mask(probs: np.ndarray, gold: np.ndarray, tau: float) -> np.ndarray:
    """``probs[i, gold[i]] > tau`` for each row: ``[N, L]`` floats, ``[N]`` ints → ``[N]`` bools."""
    if not 0.0 <= tau <= 1.0:
        raise ConfigError(f"tau must lie in [0, 1], got {tau}")
    probs = np.asarray(probs)
    gold = np.asarray(gold, dtype=np.int64)
    if probs.ndim != 2 or gold.shape != (probs.shape[0],):
        raise ValueError(f"probabilities {probs.shape} and labels {gold.shape} do not match")
    return probs[np.arange(len(gold)), gold] > tau


#: τ values whose kept counts every summary reports, to pick τ without rerunning the model.
PROFILE_TAUS = (0.5, 0.8, 0.9, 0.95, 0.99)


def confidence_profile(p_gold: np.ndarray) -> dict[str, Any]:
    """Quartiles of p(label) and how many samples each τ in :data:`PROFILE_TAUS` would keep."""
    if len(p_gold) == 0:
        return {"p_label_quartiles": None, "kept_at_tau": {str(t): 0 for t in PROFILE_TAUS}}
    q = np.quantile(p_gold, [0.25, 0.5, 0.75])
    return {
        "p_label_quartiles": [round(float(v), 4) for v in q],
        "kept_at_tau": {str(t): int((p_gold > t).sum()) for t in PROFILE_TAUS},
    }


def confidence_filter(
    records: Sequence[Record],
    model: Any,
    settings: ConfidenceSettings | None = None,
    *,
    originals: Sequence[Record] | None = None,
    progress: bool = True,
    **overrides: Any,
) -> tuple[list[Record], list[Record], dict[str, Any]]:
    """Split ``records`` into (kept, rejected, summary) by the classifier ``model``'s p(label).

    ``model`` is a classifier folder / reference or a loaded classifier: the judge (trained on
    D0, the paper's setting, or debiased: PoE, or trained on Z(D0)). ``settings``: a
    :class:`~zdebias.classify.settings.ConfidenceSettings` (``rule`` tau or delta-p,
    ``threshold`` τ, ``delta`` δ, DISCO's rejections, the held-out ``fidelity_judge`` and
    ``hypothesis_only`` classifiers, ``batch_size``, ``device``, ``ray``: score on Ray
    actors); ``overrides``: any of its
    fields by keyword. ``originals``: the records counterfactual edits were made from (the
    delta-p rule's references; default: read from ``settings.originals``). Every record's label
    must be one the classifier predicts. The summary has kept counts and pass rates per label,
    per cell (samples tagged ``meta.cell`` / ``meta.feature``) and per premise
    (``meta.premise_id``); they are also logged.
    """
    from zdebias.classify.on_ray import classifier_for
    from zdebias.classify.predict import LoadedClassifier

    s = ConfidenceSettings.of(settings, **overrides)
    if s.rule == "delta-p":  # a missing original fails before any model runs
        refs, kinds = _references(records, s, originals)
    clf = (
        model
        if isinstance(model, LoadedClassifier)
        else classifier_for(model, s, progress=progress)
    )
    gold = gold_indices(records, clf.labels, "classifier")
    probs = _probs(clf, records, s, progress)
    p_gold = probs[np.arange(len(records)), gold]
    extra: list[dict[str, Any]] = [{} for _ in records]
    if s.rule == "delta-p":
        p_ref = _probs(clf, refs, s, progress)[np.arange(len(records)), gold]
        keep = judge.delta_p_mask(p_gold, p_ref, s.delta)
        for i in range(len(records)):
            extra[i] = {REFERENCE_KEY: float(p_ref[i]), DELTA_KEY: float(p_gold[i] - p_ref[i])}
    else:
        keep = confidence_mask(probs, gold, s.threshold)
    reasons = [
        judge.disco_rejection(
            r, reject_added_negation=s.reject_added_negation, max_overlap=s.max_overlap
        )
        for r in records
    ]
    for i, reason in enumerate(reasons):
        if reason is not None:
            keep[i] = False
            extra[i]["rejected_by"] = reason
    kept: list[Record] = []
    rejected: list[Record] = []
    for i, r in enumerate(records):
        meta = {**r.meta, CONFIDENCE_KEY: float(p_gold[i]), **extra[i]}
        (kept if keep[i] else rejected).append(r.replace(meta=meta))
    summary = {
        "model": str(model) if not isinstance(model, LoadedClassifier) else None,
        "tau": s.threshold if s.rule == "tau" else None,
        "n_input": len(records),
        "n_kept": len(kept),
        "n_rejected": len(rejected),
        "kept_share": len(kept) / len(records) if records else 0.0,
        "per_label": judge.pass_counts([r.label for r in records], keep, order=clf.labels),
        **confidence_profile(p_gold),
    }
    summary.update(_judge_summary(records, keep, s))
    if s.rule == "delta-p":
        summary.update(delta=s.delta, reference=dict(sorted(Counter(kinds).items())))
        summary.update(delta_profile(p_gold - p_ref))
    if any(r is not None for r in reasons):
        summary["rejected_by"] = dict(sorted(Counter(r for r in reasons if r).items()))
    if s.fidelity_judge is not None:
        summary["label_fidelity"] = _measure(records, keep, s.fidelity_judge, s, progress)
    if s.hypothesis_only is not None:
        summary["hypothesis_only_accuracy"] = _measure(
            records, keep, s.hypothesis_only, s, progress, hypothesis_only=True
        )
    log_pass_rates(summary)
    return kept, rejected, summary


def delta_profile(rise: np.ndarray) -> dict[str, Any]:
    """Quartiles of the rise of p(label) and how many samples each δ in
    :data:`PROFILE_DELTAS` would keep."""
    q = np.quantile(rise, [0.25, 0.5, 0.75]) if len(rise) else None
    return {
        "delta_p_quartiles": None if q is None else [round(float(v), 4) for v in q],
        "kept_at_delta": {str(d): int((rise > d).sum()) for d in PROFILE_DELTAS},
    }


def gold_indices(records: Sequence[Record], labels: Sequence[str], what: str) -> np.ndarray:
    """Each record's label as an index into ``labels`` (a ``what``'s); an unknown label fails
    with the record."""
    index = {name: i for i, name in enumerate(labels)}
    gold = np.empty(len(records), dtype=np.int64)
    for i, r in enumerate(records):
        if r.label not in index:
            raise DataError(
                f"record {r.id!r} has label {r.label!r}, which the {what} does "
                f"not predict ({', '.join(labels)})",
                field="label",
            )
        gold[i] = index[r.label]
    return gold


def _probs(clf: Any, records: Sequence[Record], s: ConfidenceSettings, progress: bool) -> Any:
    """``[N, L]`` probabilities of ``clf`` (loaded here, or on Ray actors) for ``records``."""
    (probs,) = clf.predict_each([records], batch_size=s.batch_size, progress=progress)
    return probs


def _references(
    records: Sequence[Record], s: ConfidenceSettings, originals: Sequence[Record] | None
) -> tuple[list[Record], list[str]]:
    """The delta-p rule's reference pair of each record and its kind."""
    if originals is None and s.originals is not None:
        from zdebias.data.readers import read_records

        originals = read_records(s.originals)
    by_id = {r.id: r for r in originals or ()}
    pairs = [judge.reference_record(r, by_id) for r in records]
    return [p for p, _ in pairs], [k for _, k in pairs]


def _judge_summary(
    records: Sequence[Record], keep: np.ndarray, s: ConfidenceSettings
) -> dict[str, Any]:
    """The rule, and pass rates per cell and per premise where samples say them."""
    out: dict[str, Any] = {"rule": s.rule}
    cells = [judge.cell_of(r) for r in records]
    if any(c is not None for c in cells):
        out["per_cell"] = judge.pass_counts(cells, keep)
    premises = judge.premise_counts(records, keep)
    if premises is not None:
        out["premises"] = premises
    return out


def _measure(
    records: Sequence[Record],
    keep: np.ndarray,
    path: str,
    s: ConfidenceSettings,
    progress: bool,
    *,
    hypothesis_only: bool = False,
) -> dict[str, Any]:
    """Agreement of the classifier at ``path`` (``hypothesis_only``: one that reads the
    hypothesis alone) with the samples' labels, on the input and on the kept samples."""
    from zdebias.classify.predict import hf_progress, load_classifier

    flag = "--hypothesis-only" if hypothesis_only else "--fidelity-judge"
    with hf_progress(progress):
        clf = load_classifier(path, device=s.device)
    if hypothesis_only:
        if clf.input not in (None, "hypothesis-only"):
            raise ConfigError(
                f"{flag} {path!r} reads {clf.input!r} input; it must be a hypothesis-only "
                "classifier (train-classifier --input-kind hypothesis-only)"
            )
        clf.input = "hypothesis-only"
    gold_indices(records, clf.labels, f"{flag} classifier")
    pred = [clf.labels[i] for i in _probs(clf, records, s, progress).argmax(axis=1).tolist()]
    gold = [r.label for r in records]
    picked = np.flatnonzero(keep).tolist()
    return {
        "model": path,
        "input": judge.agreement(pred, gold),
        "kept": judge.agreement([pred[i] for i in picked], [gold[i] for i in picked]),
    }


def log_pass_rates(summary: dict[str, Any]) -> None:
    """Tell on stderr what the judge deleted: kept / n per label and per cell, and the
    measures of the set."""
    for title, key in (("label", "per_label"), ("cell", "per_cell")):
        for name, c in summary.get(key, {}).items():
            log.info(
                "judge: %s %s kept %d of %d (%.1f%%)",
                title,
                name,
                c["kept"],
                c["n"],
                100 * c["pass_rate"],
            )
    if "premises" in summary:
        p = summary["premises"]
        log.info("judge: %d of %d premises keep no sample", p["all_rejected"], p["n"])
    for key in ("label_fidelity", "hypothesis_only_accuracy"):
        if key in summary:
            m = summary[key]
            log.info(
                "judge: %s %s on the input, %s on the kept samples",
                key,
                m["input"]["share"],
                m["kept"]["share"],
            )


def write_partition(
    kept: Sequence[Record],
    rejected: Sequence[Record],
    summary: dict[str, Any],
    out_dir: str | Path,
) -> dict[str, Path]:
    """Write ``kept.jsonl``, ``rejected.jsonl`` and ``summary.json`` (each atomically)."""
    files = {"kept.jsonl": kept, "rejected.jsonl": rejected, "summary.json": summary}
    return {Path(name).stem: path for name, path in write_files(out_dir, files).items()}
