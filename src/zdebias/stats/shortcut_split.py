"""Shortcut splits of a test set (docs/design.md §13): each test row is *aligned* (the training
set's shortcuts point to its gold label), *conflicting* (they point to another label) or *free*.

The verdict rule. ``rule`` effect (the default since 2026-12-07, docs/design.md §13 amended:
:data:`RULE_EFFECT`, :mod:`zdebias.stats.shortcut_votes`) weighs each significant feature by
its effect, lets a group of overlapping features vote once and the partial-input model only
where it is confident. ``rule`` sum-z, the earlier rule, is described here: the significant
features of the training set (§3: z above the one-sided
critical value at α, Bonferroni over the features present in it; ``<null>`` left out: it is
on every row, so it says nothing about one) that a test row carries each favour a label; the
row's verdict is the label with the largest z summed over them, and none when it carries
none. A tie for the largest sum gives no verdict either (the shortcuts do not point to one
label): the row is free, its tied labels in ``meta.shortcut.tied``. With ``by``
``hypothesis-only`` the verdict is the hypothesis-only model's prediction (Gururangan et al.
2018 made SNLI-hard so); with ``both`` a row is conflicting when either verdict names
another label than its gold one, aligned when the verdicts it has all name its gold label.

Pure functions over arrays: :func:`feature_verdicts`, :func:`slices`; :func:`split_records`
runs them on records (the features extracted once over train and test together).

>>> import numpy as np, scipy.sparse as sp
>>> z = np.array([[5.0, -5.0], [-7.0, 7.0], [0.0, 0.0]])   # f0 favours 0, f1 favours 1
>>> m = sp.csr_matrix(np.array([[1, 1, 0], [1, 0, 1], [0, 0, 1]]))
>>> v, _tied = feature_verdicts(m, z, np.array([True, True, False]))
>>> v.tolist(), slices([v], np.array([1, 1, 0])).tolist()
([1, 0, -1], [0, 1, 2])
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from zdebias.data.labels import label_ids
from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.stats.keep import kept_features
from zdebias.stats.settings import ShortcutSplitSettings
from zdebias.stats.shortcut_votes import label_coincidence
from zdebias.stats.zstats import z_critical, z_from_counts, z_statistics

if TYPE_CHECKING:
    import scipy.sparse as sp

    from zdebias.stats.summaries import ShortcutSplitSummary

#: the slices, in the order of :func:`slices`' codes 0, 1, 2
SLICES = ("aligned", "conflicting", "free")
ALIGNED, CONFLICTING, FREE = range(3)
#: conflicting rows a reliable gap needs: below it, the 95% interval of the accuracy on them
#: is wider than ±5 points in the worst case (p = 0.5: 1.96 · 0.5 / √n > 0.05 for n < 385)
MIN_CONFLICTING = 385
#: features left out of the verdicts: on every row, they say nothing about one
ROW_BLIND = ("<null>",)
#: what a verdict is (summary.json and docs/shortcut-splits.md)
RULE = (
    "a row's verdict is the label with the largest z summed over the training set's "
    "significant features it carries (z > z_critical for some label, <null> left out); none "
    "when it carries none or the largest sum is tied; aligned: the verdict is the gold label, "
    "conflicting: another label, free: no verdict"
)
#: the verdict under the effect rule (the default since 2026-12-07, docs/design.md §13)
RULE_EFFECT = (
    "significant features (z > z_critical for some label, <null> left out) may vote; each "
    "group of overlapping features (the overlap thresholds; an n-gram and the n-grams that "
    "contain it) votes once, its member with the largest effect speaking; a feature's vote "
    "for label l is its effect, the Jeffreys-smoothed log-odds of l among the training rows "
    "carrying it minus the prior's; the partial-input model votes its effect only where its "
    "top probability reaches the threshold calibrated on its out-of-fold training "
    "predictions; a row's verdict is the label with the largest summed effect, none when "
    "nothing votes or the sum ties; aligned: the verdict is the gold label, conflicting: "
    "another label, free: no verdict"
)
#: deciding features listed per row in meta.shortcut
ROW_FEATURES = 5
#: a tie for the largest summed z: sums within this of each other
TIE = 1e-9


def z_table(
    matrix: sp.spmatrix, y: np.ndarray, num_labels: int, label_prior: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(z [F, L], n [F])`` of the training rows: the one place the split takes its z from
    (``label_prior``: uniform or empirical, docs/design.md §14)."""
    z, n, _p = z_statistics(matrix, y, num_labels, label_prior=label_prior)
    return z, n


def imbalance_warning(
    y: np.ndarray, labels: Sequence[str], z_c: float, n_features: int
) -> str | None:
    """The warning for training labels so imbalanced that ``<null>`` (on every row: its z is
    the label imbalance) is significant: frequent features then lean to the majority label
    under the uniform prior of docs/design.md §3, and so do the verdicts."""
    counts = np.bincount(np.asarray(y), minlength=len(labels))[None, :]
    z, _n, p_hat = z_from_counts(counts)
    top = int(z[0].argmax())
    if z[0, top] <= z_c:
        return None
    return (
        f"the training labels are imbalanced ({labels[top]} {100 * p_hat[0, top]:.1f}%: "
        f"<null> z = {z[0, top]:.1f} > z_critical {z_c:.2f} over {n_features:,} features): "
        f"frequent features lean to {labels[top]} against the uniform prior, so many "
        f"verdicts say {labels[top]}; --label-prior empirical tests against the label shares"
    )


def feature_verdicts(
    matrix: sp.spmatrix, z: np.ndarray, significant: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's verdict from the features it carries: ``(verdict [N], tied [N])``.

    ``matrix``: ``[N, F]`` presence of the test rows; ``z``: ``[F, L]`` of the training set;
    ``significant``: ``[F]`` bool, the features that vote. ``verdict``: the label index with
    the largest summed z, -1 for a row with no significant feature or a tie (``tied``).
    """
    import scipy.sparse as sp

    m = sp.csr_matrix(matrix)
    m.data = np.ones_like(m.data, dtype=np.float64)
    cols = np.flatnonzero(np.asarray(significant, dtype=bool))
    sub = m[:, cols]
    sums = np.asarray(sub @ np.asarray(z, dtype=np.float64)[cols])  # [N, L]
    carries = sub.getnnz(axis=1) > 0
    n_rows = m.shape[0]
    if sums.size == 0:
        return np.full(n_rows, -1, dtype=np.int64), np.zeros(n_rows, dtype=bool)
    best = sums.argmax(axis=1)
    top = sums[np.arange(n_rows), best]
    scale = np.maximum(1.0, np.abs(top))
    tied = carries & ((sums >= (top - TIE * scale)[:, None]).sum(axis=1) > 1)
    verdict = np.where(carries & ~tied, best, -1).astype(np.int64)
    return verdict, tied


def slices(verdicts: Sequence[np.ndarray], gold: np.ndarray) -> np.ndarray:
    """The slice code of every row (0 aligned, 1 conflicting, 2 free) from one or more
    verdict arrays (-1: none): conflicting when any verdict names another label than
    ``gold``, aligned when at least one verdict names ``gold`` and none another, else free."""
    gold = np.asarray(gold)
    has = np.zeros(len(gold), dtype=bool)
    other = np.zeros(len(gold), dtype=bool)
    for v in verdicts:
        v = np.asarray(v)
        has |= v >= 0
        other |= (v >= 0) & (v != gold)
    return np.where(other, CONFLICTING, np.where(has, ALIGNED, FREE)).astype(np.int64)


@dataclass
class ShortcutSplit:
    """The test records of each slice (``meta.shortcut`` added; test order kept within a
    slice) and the JSON-ready summary."""

    aligned: list[Record]
    conflicting: list[Record]
    free: list[Record]
    summary: ShortcutSplitSummary
    #: the slice code of each test record, in test order
    codes: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: every test record with its ``meta.shortcut``, in test order
    rows: list[Record] = field(repr=False, default_factory=list)

    def parts(self) -> dict[str, list[Record]]:
        """``{slice name: records}``."""
        return {"aligned": self.aligned, "conflicting": self.conflicting, "free": self.free}


def _hypo_only_columns(
    train: Sequence[Record],
    test: Sequence[Record],
    names: list[str],
    fm: Any,
    cfg: ShortcutSplitSettings,
    labels: tuple[str, ...],
    progress: bool,
) -> np.ndarray:
    """The hypothesis-only model's label index for every test row (-1: none), from the
    ``hypo-only-pred=LABEL`` columns: those of ``fm`` when it has them, else the feature
    extracted alone (trained on the training rows, as the stats use it)."""
    from zdebias.features.extract import extract_features

    wanted = [f"hypo-only-pred={label}" for label in labels]
    index = {name: j for j, name in enumerate(names)}
    matrix = fm.matrix
    if not any(w in index for w in wanted):
        kwargs = {**cfg.feature_kwargs(), "hypo_only_fit": np.arange(len(train))}
        alone = extract_features(
            [*train, *test], ["hypo-only"], labels=labels, progress=progress, **kwargs
        )
        index = {name: j for j, name in enumerate(alone.names)}
        matrix = alone.matrix
    import scipy.sparse as sp

    m = sp.csr_matrix(matrix)[len(train) :]
    out = np.full(m.shape[0], -1, dtype=np.int64)
    for li, name in enumerate(wanted):
        j = index.get(name)
        if j is not None:
            out[np.flatnonzero(m[:, j].toarray().ravel())] = li
    return out


def split_records(
    train: Sequence[Record],
    test: Sequence[Record],
    settings: ShortcutSplitSettings | None = None,
    *,
    labels: Sequence[str],
    progress: bool = False,
    **overrides: Any,
) -> ShortcutSplit:
    """Split ``test`` by the shortcuts of ``train`` (:data:`RULE`); ``labels``: the task's.

    Features are extracted once over train and test together with the training set's
    settings (the fast hypothesis-only model fitted on the training rows only, out of fold
    there, fold-averaged on the test rows); z and the significant features come from the
    training rows alone, at ``settings.alpha`` Bonferroni-corrected by the features present
    in them, as ``zdebias stats`` on the training set reports them.
    """
    from zdebias.features.extract import extract_features

    cfg = ShortcutSplitSettings.of(settings, **overrides)
    labels = tuple(labels)
    train, test = list(train), list(test)
    if not train:
        raise ConfigError("the training set has no labelled records")
    if not test:
        raise ConfigError(
            "the test set has no labelled records: a shortcut split needs the gold labels"
        )
    pair = train[0].is_pair
    if any(r.is_pair != pair for r in test[:1]):
        kind = "pairs" if pair else "single texts"
        raise ConfigError(f"the training set holds {kind} but the test set does not")
    if cfg.by != "features" and not pair:
        raise ConfigError(
            f"--by {cfg.by}: the hypothesis-only model needs premise/hypothesis pairs; "
            "use --by features for single-text tasks"
        )
    if cfg.rule == "effect" and pair and cfg.hypo_only_model and cfg.bias_model == "hypo-only":
        if cfg.by != "features" or cfg.features is None or "hypo-only" in cfg.features:
            raise ConfigError(
                f"--hypo-only-model {cfg.hypo_only_model}: a trained classifier's labels give "
                "no out-of-fold probabilities, so the effect rule cannot gate it; use "
                "--bias-model ngram-lr (an independent cross-fitted model) or --rule sum-z"
            )
    y_train = label_ids(train, labels, "training")
    y_test = label_ids(test, labels, "test")
    n_train = len(train)
    kwargs = {**cfg.feature_kwargs(), "hypo_only_fit": np.arange(n_train)}
    fm = extract_features([*train, *test], cfg.features, labels=labels, progress=progress, **kwargs)
    import scipy.sparse as sp

    matrix = sp.csr_matrix(fm.matrix)
    names = list(fm.names)
    z, n = z_table(matrix[:n_train], y_train, len(labels), cfg.label_prior)
    n_features = int((n > 0).sum())
    z_c = z_critical(n_features, cfg.alpha)
    significant = (z > z_c).any(axis=1)
    blind = np.array([name in ROW_BLIND for name in names], dtype=bool)
    voting = significant & ~blind
    n_significant = int(voting.sum())
    kept = kept_features(names, cfg.keep_features)
    if kept is not None:  # the task's own features (keep_features) never vote
        voting = voting & ~kept.mask
    test_matrix = matrix[n_train:]
    verdicts: dict[str, np.ndarray] = {}
    tied = np.zeros(len(test), dtype=bool)
    used: dict[str, Any] = {}
    deciding: list[dict[str, Any]] | None = None
    if cfg.rule == "effect":
        verdicts, tied, deciding, used = _effect_rule(
            train, test, matrix, fm, y_train, z, voting, names, labels, cfg
        )
    else:
        if cfg.by in ("features", "both"):
            verdicts["features"], tied = feature_verdicts(test_matrix, z, voting)
        if cfg.by in ("hypothesis-only", "both"):
            verdicts["hypothesis-only"] = _hypo_only_columns(
                train, test, names, fm, cfg, labels, progress
            )
    codes = slices(list(verdicts.values()), y_test)
    out = _annotated(
        test, codes, verdicts, tied, test_matrix, z, voting, names, labels, cfg.by, deciding
    )
    summary = _summary(out, codes, y_test, verdicts, tied, labels, cfg, len(train))
    out = with_carried(out, test_matrix, names, summary["deciding_features"])
    summary.update(cast("ShortcutSplitSummary", used))  # the effect rule's keys
    if cfg.rule == "effect":
        summary["rule"] = RULE_EFFECT
    summary["used"] = _used(cfg, pair, train, used)
    coincident = label_coincidence(_one_verdict(verdicts), codes, y_test, labels)
    summary["label_coincident"] = coincident is not None
    if coincident:
        summary["warnings"].append(coincident)
    skew = None
    if "features" in verdicts and cfg.label_prior is None:
        skew = imbalance_warning(y_train, labels, z_c, n_features)
    if skew:
        summary["warnings"].append(skew)
    summary.update(
        {
            "label_prior": cfg.label_prior or "uniform",
            "n_features": n_features,
            "z_critical": z_c,
            "n_significant": n_significant,
        }
    )
    if cfg.label_prior == "empirical":  # cells with too few expected rows: tested exactly
        summary["exact_test"] = _exact_test(matrix[:n_train], y_train, labels, z_c)
    if kept is not None:
        summary["keep_features"] = cfg.keep_features
        summary["kept_features"] = kept.block(significant & ~blind)
        summary["warnings"].extend(kept.warnings())
    parts = {
        name: [r for r, c in zip(out, codes, strict=True) if c == k]
        for k, name in enumerate(SLICES)
    }
    return ShortcutSplit(parts["aligned"], parts["conflicting"], parts["free"], summary, codes, out)


def _one_verdict(verdicts: dict[str, np.ndarray]) -> np.ndarray:
    """One verdict per row for the label-coincidence check: the features' where they have
    one, else the partial-input model's (-1: none)."""
    arrays = list(verdicts.values())
    out = arrays[0].copy()
    for v in arrays[1:]:
        out = np.where(out >= 0, out, v)
    return out


def _used(
    cfg: ShortcutSplitSettings, pair: bool, train: list[Record], used: dict[str, Any]
) -> dict[str, Any]:
    """What the split used (``summary.json`` ``used``): the verdict rule, the feature groups,
    the prior, and the partial-input model: family, what it was trained on (``train_digest``,
    the training rows' :func:`rows_digest`) and, under the effect rule, a digest of its
    predictions. ``evaluate`` compares it to a method's own bias model."""
    from zdebias.features.catalogue import DEFAULT_PAIR_FEATURES, DEFAULT_TEXT_FEATURES

    features = list(cfg.features or (DEFAULT_PAIR_FEATURES if pair else DEFAULT_TEXT_FEATURES))
    model_votes = pair and (cfg.by != "features" or "hypo-only" in features)
    bias: dict[str, Any] | None = None
    if model_votes:
        if cfg.rule == "effect":
            bias = dict(used.get("bias_model") or {})
        else:
            family = (
                f"trained:{cfg.hypo_only_model}"
                if cfg.hypo_only_model
                else f"hypo-only-{cfg.hypo_only_classifier or 'nb'}"
            )
            bias = {"family": family, "gated": False}
        bias.setdefault("train_digest", rows_digest(train))
    return {
        "rule": cfg.rule,
        "features": features,
        "keep_features": list(cfg.keep_features or []),
        "label_prior": cfg.label_prior or "uniform",
        "alpha": cfg.alpha,
        "bias_model": bias,
    }


def _effect_rule(
    train: list[Record],
    test: list[Record],
    matrix: sp.csr_matrix,
    fm: Any,
    y_train: np.ndarray,
    zs: np.ndarray,
    voting: np.ndarray,
    names: list[str],
    labels: tuple[str, ...],
    cfg: ShortcutSplitSettings,
) -> tuple[dict[str, np.ndarray], np.ndarray, list[dict[str, Any]], dict[str, Any]]:
    """The verdicts under the effect rule (:mod:`zdebias.stats.shortcut_votes`): ``(verdicts,
    tied, deciding features per row, summary keys)``."""
    from zdebias.features.keys import FeatureKey
    from zdebias.stats import shortcut_votes as sv

    n_train = len(train)
    keys = list(fm.keys) if fm.keys is not None else [FeatureKey.from_name(n) for n in names]
    model_cols = np.array([k.kind == "hypo-only" for k in keys], dtype=bool)
    p0 = sv.prior_shares(y_train, len(labels), cfg.label_prior)
    effects = sv.effect_table(matrix[:n_train], y_train, p0)
    pair = train[0].is_pair
    model_in_features = bool(model_cols.any())
    if model_in_features and cfg.keep_features:
        kept = kept_features(names, cfg.keep_features)
        model_in_features = kept is None or not bool(kept.mask[model_cols].any())
    need_model = pair and (cfg.by != "features" or model_in_features)
    used: dict[str, Any] = {"effect_smoothing": "jeffreys: (k + 0.5) / (n + 1)"}
    model = None
    gated_test = np.full(len(test), -1, dtype=np.int64)
    if need_model:
        if cfg.hypo_only_model and cfg.bias_model == "hypo-only":
            raise ConfigError(
                f"--hypo-only-model {cfg.hypo_only_model}: a trained classifier's labels give "
                "no out-of-fold probabilities, so the effect rule cannot gate it; use "
                "--bias-model ngram-lr (an independent cross-fitted model) or --rule sum-z"
            )
        kwargs = cfg.feature_kwargs()
        x = sv.hypothesis_matrix([*train, *test], kwargs)
        classifier = cfg.hypo_only_classifier or "nb"
        folds = cfg.hypo_only_folds or 5
        seed = int(kwargs.get("seed", 0))
        proba = sv.cross_fitted_proba(
            x, y_train, n_train, len(labels), family=cfg.bias_model,
            classifier=classifier, folds=folds, seed=seed,
        )  # fmt: skip
        gate = sv.calibrate_gate(proba[:n_train], y_train, p0, labels)
        gated_train = sv.gated(proba[:n_train], gate, labels)
        gated_test = sv.gated(proba[n_train:], gate, labels)
        model_effect = sv.model_effects(gated_train, y_train, p0)
        if model_in_features:
            rows = np.where(gated_test >= 0, gated_test, 0)
            model = (model_effect[rows], gated_test >= 0)
        family = "ngram-lr" if cfg.bias_model == "ngram-lr" else f"hypo-only-{classifier}"
        used["bias_model"] = {
            "family": family,
            "folds": folds,
            "seed": seed if cfg.bias_model == "hypo-only" else seed + 1,
            "gated": True,
            "predictions_digest": sv.predictions_digest(proba),
            "oof_accuracy": round(float((proba[:n_train].argmax(axis=1) == y_train).mean()), 4),
        }
        voted = gated_test >= 0
        y_test = label_ids(test, labels, "test")
        used["gate"] = {
            "margin": sv.GATE_MARGIN,
            "per_label": gate,
            "train_votes": int((gated_train >= 0).sum()),
            "test_votes": int(voted.sum()),
            "test_precision": (
                round(float((gated_test[voted] == y_test[voted]).mean()), 4)
                if voted.any()
                else None
            ),
        }
        if cfg.by != "features":  # the model's own accuracy (argmax), gated or not
            argmax = proba[n_train:].argmax(axis=1)
            used["hypothesis_only_accuracy"] = float((argmax == y_test).mean())
    verdicts: dict[str, np.ndarray] = {}
    tied = np.zeros(len(test), dtype=bool)
    deciding: list[dict[str, Any]] = [{"features": []} for _ in test]
    if cfg.by in ("features", "both"):
        votes = sv.effect_verdicts(
            matrix[n_train:], effects, voting & ~model_cols, keys, model=model
        )
        verdicts["features"], tied = votes.verdict, votes.tied
        for i, spoke in enumerate(votes.speakers):
            deciding[i]["features"] = _speakers(
                spoke, int(votes.verdict[i]), effects, zs, names, labels,
                model[0][i] if model is not None else None, int(gated_test[i]),
            )  # fmt: skip
            if tied[i]:
                top = votes.sums[i].max()
                near = votes.sums[i] >= top - sv.TIE * max(1.0, abs(top))
                deciding[i]["tied"] = [labels[li] for li in np.flatnonzero(near)]
    if cfg.by in ("hypothesis-only", "both"):
        verdicts["hypothesis-only"] = gated_test
    return verdicts, tied, deciding, used


def _speakers(
    spoke: list[int],
    verdict: int,
    effects: np.ndarray,
    z: np.ndarray,
    names: list[str],
    labels: tuple[str, ...],
    model_effect: np.ndarray | None,
    model_label: int,
) -> list[dict[str, Any]]:
    """A row's deciding features under the effect rule: the groups' speakers that favour the
    verdict (effect > 0 for it), largest effect first; with no verdict every speaker and the
    label it favours most."""
    rows = []
    for j in spoke:
        eff = model_effect if j < 0 else effects[j]
        assert eff is not None  # -1 (the model) speaks only where it is given
        name = f"hypo-only-pred={labels[model_label]}" if j < 0 else names[j]
        zz = None if j < 0 else z[j]
        li = verdict if verdict >= 0 else int(np.argmax(eff))
        if verdict >= 0 and eff[li] <= 0:
            continue
        item: dict[str, Any] = {"feature": name, "label": labels[li]}
        item["effect"] = round(float(eff[li]), 4)
        if zz is not None:
            item["z"] = round(float(zz[li]), 4)
        rows.append(item)
    rows.sort(key=lambda d: (-d["effect"], d["feature"]))
    return rows[:ROW_FEATURES]


def _exact_test(
    matrix: sp.csr_matrix, y: np.ndarray, labels: tuple[str, ...], z_c: float
) -> dict[str, Any] | None:
    """The training set's cells tested exactly under the empirical prior
    (:func:`~zdebias.stats.zstats.exact_test`): a feature significant only by the normal
    approximation gets no vote."""
    from zdebias.stats.zstats import exact_test, label_counts, prior_p0

    totals = np.bincount(np.asarray(y, dtype=np.int64), minlength=len(labels))
    counts = label_counts(matrix, y, len(labels))
    return exact_test(counts, prior_p0(totals, "empirical"), z_c, labels)


def _annotated(
    test: list[Record],
    codes: np.ndarray,
    verdicts: dict[str, np.ndarray],
    tied: np.ndarray,
    matrix: sp.csr_matrix,
    z: np.ndarray,
    voting: np.ndarray,
    names: list[str],
    labels: tuple[str, ...],
    by: str,
    deciding: list[dict[str, Any]] | None = None,
) -> list[Record]:
    """The test records with ``meta.shortcut``: slice, verdict label, deciding features with
    their z for it (strongest first, at most :data:`ROW_FEATURES`), per-source verdicts;
    ``deciding``: each row's deciding features when the effect rule made them."""
    out = []
    feats = verdicts.get("features")
    hypo = verdicts.get("hypothesis-only")
    for i, r in enumerate(test):
        code = int(codes[i])
        gold = r.label
        per_source = {
            src: (labels[int(v[i])] if v[i] >= 0 else None) for src, v in verdicts.items()
        }
        said = [lab for lab in per_source.values() if lab is not None]
        label = next((lab for lab in said if lab != gold), said[0] if said else None)
        info: dict[str, Any] = {"slice": SLICES[code], "label": label, "by": by}
        if feats is not None and deciding is not None:
            info.update(deciding[i])
        elif feats is not None:
            info["features"] = _deciding(matrix, i, z, voting, names, labels, feats[i])
            if tied[i]:
                cols = matrix.indices[matrix.indptr[i] : matrix.indptr[i + 1]]
                cols = cols[voting[cols]]
                sums = z[cols].sum(axis=0)
                top = sums.max()
                info["tied"] = [
                    labels[li]
                    for li in range(len(labels))
                    if sums[li] >= top - TIE * max(1.0, abs(top))
                ]
        if hypo is not None:
            info["hypothesis_only"] = per_source["hypothesis-only"]
        if by == "both":
            info["features_label"] = per_source["features"]
        out.append(r.replace(meta={**r.meta, "shortcut": info}))
    return out


def _deciding(
    matrix: sp.csr_matrix,
    row: int,
    z: np.ndarray,
    voting: np.ndarray,
    names: list[str],
    labels: tuple[str, ...],
    verdict: int,
) -> list[dict[str, Any]]:
    """The voting features of ``row`` that favour its verdict (z > 0 for it), strongest first;
    with no verdict, every voting feature it carries with the label it favours most."""
    cols = matrix.indices[matrix.indptr[row] : matrix.indptr[row + 1]]
    cols = cols[voting[cols]]
    if verdict >= 0:
        zs = z[cols, verdict]
        keep = zs > 0
        cols, zs = cols[keep], zs[keep]
        order = np.lexsort((cols, -zs))[:ROW_FEATURES]
        return [
            {"feature": names[j], "label": labels[verdict], "z": round(float(zs[k]), 4)}
            for k, j in zip(order.tolist(), cols[order].tolist(), strict=True)
        ]
    best = z[cols].argmax(axis=1) if len(cols) else np.zeros(0, dtype=np.int64)
    zs = z[cols, best] if len(cols) else np.zeros(0)
    order = np.lexsort((cols, -zs))[:ROW_FEATURES]
    return [
        {"feature": names[cols[k]], "label": labels[best[k]], "z": round(float(zs[k]), 4)}
        for k in order.tolist()
    ]


def with_carried(
    rows: list[Record], matrix: sp.spmatrix, names: list[str], shortcuts: list[dict[str, Any]]
) -> list[Record]:
    """``rows`` with ``meta.shortcut.carries``: which of ``shortcuts`` (the summary's
    ``deciding_features``, the split's top shortcuts) each row carries, whether or not it
    voted there; ``evaluate`` scores a model on the rows that carry each
    (:func:`zdebias.evaluation.groups.shortcut_view`). ``matrix``: ``[N, F]`` of the rows.
    A name not among ``names`` (a vote of the gated partial-input model) is carried where
    a row's deciding features name it."""
    import scipy.sparse as sp

    index = {name: j for j, name in enumerate(names)}
    wanted = [str(d["feature"]) for d in shortcuts]
    cols = [index.get(name) for name in wanted]
    have = [j for j in cols if j is not None]
    present = (
        sp.csc_matrix(matrix)[:, have].toarray() != 0
        if have
        else np.zeros((len(rows), 0), dtype=bool)
    )
    out = []
    for i, r in enumerate(rows):
        info = dict(r.meta.get("shortcut") or {})
        named = {d.get("feature") for d in info.get("features") or []}
        carried, k = [], 0
        for name, j in zip(wanted, cols, strict=True):
            if j is not None:
                if present[i, k]:
                    carried.append(name)
                k += 1
            elif name in named:
                carried.append(name)
        info["carries"] = carried
        out.append(r.replace(meta={**r.meta, "shortcut": info}))
    return out


def rows_digest(records: Iterable[Record]) -> str:
    """What ties a split to its test set (``summary.json``: ``test_digest`` and per slice
    ``digests``): sha256 over the sorted sha256 of each row's ``[premise, hypothesis, text,
    label]``. The rows a model is graded on decide it: not their order, ids or ``meta``, so
    it survives a format conversion, new ids and a shuffle, and the slices' rows together
    have the test set's rows.

    >>> a, b = Record("1", "neutral", "p", "h"), Record("2", "neutral", "p", "h2")
    >>> rows_digest([a, b]) == rows_digest([b.replace(id="x"), a])
    True
    >>> rows_digest([a, b]) == rows_digest([a, b.replace(label="entailment")])
    False
    """
    rows = sorted(
        hashlib.sha256(
            json.dumps([r.premise, r.hypothesis, r.text, r.label], ensure_ascii=False).encode()
        ).digest()
        for r in records
    )
    return hashlib.sha256(b"".join(rows)).hexdigest()


def reliable_gap_warning(n_conflicting: int) -> str | None:
    """The warning for a split with fewer conflicting rows than :data:`MIN_CONFLICTING`."""
    if n_conflicting >= MIN_CONFLICTING:
        return None
    half = 1.96 * 0.5 / math.sqrt(max(n_conflicting, 1))
    return (
        f"only {n_conflicting} conflicting rows: an accuracy on them is uncertain by up to "
        f"±{100 * half:.1f} points (95%); a reliable gap needs {MIN_CONFLICTING} or more"
    )


def _summary(
    out: list[Record],
    codes: np.ndarray,
    y: np.ndarray,
    verdicts: dict[str, np.ndarray],
    tied: np.ndarray,
    labels: tuple[str, ...],
    cfg: ShortcutSplitSettings,
    n_train: int,
) -> ShortcutSplitSummary:
    """Counts per slice and gold label, the features that decided most rows, warnings."""
    counts = {name: int((codes == k).sum()) for k, name in enumerate(SLICES)}
    per_label = {
        lab: {name: int(((codes == k) & (y == li)).sum()) for k, name in enumerate(SLICES)}
        for li, lab in enumerate(labels)
    }
    decided: Counter[str] = Counter()
    decided_in: dict[str, Counter[str]] = {}
    label_of: dict[str, str] = {}
    for r, code in zip(out, codes, strict=True):
        feats = r.meta["shortcut"].get("features") or []
        if r.meta["shortcut"]["label"] is None or not feats:
            continue
        first = feats[0]["feature"]
        decided[first] += 1
        label_of.setdefault(first, feats[0]["label"])
        decided_in.setdefault(first, Counter())[SLICES[int(code)]] += 1
    deciding = [
        {
            "feature": name,
            "label": label_of[name],
            "n_rows": count,
            **{s: decided_in[name][s] for s in SLICES[:2]},
        }
        for name, count in sorted(decided.items(), key=lambda kv: (-kv[1], kv[0]))[: cfg.top]
    ]
    warnings = []
    line = reliable_gap_warning(counts["conflicting"])
    if line:
        warnings.append(line)
    summary: ShortcutSplitSummary = {
        "by": cfg.by,
        "rule": RULE,
        "labels": list(labels),
        "n_train": n_train,
        "n_test": len(out),
        "counts": counts,
        "test_digest": rows_digest(out),
        "digests": {
            name: rows_digest(r for r, c in zip(out, codes, strict=True) if c == k)
            for k, name in enumerate(SLICES)
        },
        "per_label": per_label,
        "n_tied": int(tied.sum()),
        "alpha": cfg.alpha,
        "deciding_features": deciding,
        "min_conflicting": MIN_CONFLICTING,
        "warnings": warnings,
    }
    if "hypothesis-only" in verdicts:
        v = verdicts["hypothesis-only"]
        summary["hypothesis_only_accuracy"] = float((v == y).mean()) if len(y) else None
    return summary


__all__ = [
    "MIN_CONFLICTING",
    "RULE",
    "SLICES",
    "ShortcutSplit",
    "feature_verdicts",
    "imbalance_warning",
    "reliable_gap_warning",
    "rows_digest",
    "slices",
    "split_records",
    "z_table",
]
