"""One-call API on the data people hold: a pandas DataFrame, a ``datasets.Dataset`` (or a
``DatasetDict`` split), a list of dicts, or a list of :class:`~zdebias.data.schema.Record`.

- :func:`find_shortcuts`: the z-statistics of every feature (``zdebias stats``), as a table of
  the top features per label, plus each row's significant shortcuts, aligned to the input.
- :func:`filter`: any filter method by name (``zdebias filter --method``, the registry
  :mod:`zdebias.stats.methods`); the rows with the method's columns, ``keep`` first.
  :func:`z_filter`, :func:`cartography_filter` and :func:`aflite_filter` are it with the
  method named.
- :func:`z_filter`: z-filtering (``zdebias filter``); the input's rows in the input's type
  and order with a boolean ``keep``, ``rejected_by`` (the biased features that rejected the
  row) and ``rejected_by_z`` (their z for the row's label when it was rejected).
- :func:`confidence_filter`: ``zdebias confidence-filter``; the rows with ``keep`` and
  ``confidence`` (the classifier's probability of the row's label).
- :func:`cartography`: a classifier's training dynamics as a table (dataset cartography);
  :func:`cartography_filter`: ``zdebias filter --method cartography``; the rows with ``keep``,
  ``confidence``, ``variability`` and ``correctness``.
- :func:`aflite_filter`: AFLite (``zdebias filter --method aflite``); the rows with ``keep``,
  ``rejected_by`` (``["aflite"]`` or ``[]``), ``aflite_round`` (the round that removed the
  row) and ``aflite_score`` (its predictability), on given ``embeddings=`` or the encoder's.
- :func:`shortcut_split`: ``zdebias shortcut-split``; the test rows with ``shortcut_slice``
  (aligned, conflicting or free), ``shortcut_label`` (the verdict) and ``shortcut_features``.
- :func:`artifact_accuracy`: ``zdebias stats --artifact-model``; the cross-validated accuracy
  of a hypothesis-only (single text: text) logistic regression against the majority share.

Rows are read with the CLI's column and label mapping (:class:`ReadOptions` keywords:
``task``, ``columns``, ``label_map``, ``split``, ``on_error``, ``limit``, ``where``); errors
name those arguments (``columns=``), not the CLI's flags. The settings are
the CLI's too (:class:`StatsSettings`, :class:`ZFilterSettings`, or their fields as keywords).
The input object is never changed. Rows without a gold label (and bad rows under
``on_error="skip"``) are not filtered: ``keep`` is False and ``rejected_by`` is None there,
and the summary's ``read`` counts them, as ``zdebias filter`` does.

>>> out = zdebias.z_filter(df, task="nli")          # doctest: +SKIP
>>> int(out["keep"].sum()), len(out)                 # doctest: +SKIP
(7668, 19993)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from zdebias.data.memory import MemoryRows, read_rows
from zdebias.data.options import ReadOptions
from zdebias.errors import ConfigError
from zdebias.stats.settings import (
    AfliteSettings,
    ShortcutSplitSettings,
    StatsSettings,
    ZFilterSettings,
)

if TYPE_CHECKING:
    from zdebias.stats.artifacts import ArtifactResult
    from zdebias.stats.measure import Measurement
    from zdebias.stats.summaries import FilterSummary, ShortcutSplitSummary

#: Columns :func:`z_filter` adds to (a copy of) the input (its method's ``columns``).
FILTER_COLUMNS = ("keep", "rejected_by", "rejected_by_z")
#: Columns :func:`aflite_filter` adds to (a copy of) the input (its method's ``columns``).
AFLITE_COLUMNS = ("keep", "rejected_by", "aflite_round", "aflite_score")
#: Columns :func:`find_shortcuts` adds to (a copy of) the input.
SHORTCUT_COLUMNS = ("shortcuts", "shortcut_z")
#: Columns :func:`shortcut_split` adds to (a copy of) the test set.
SPLIT_COLUMNS = ("shortcut_slice", "shortcut_label", "shortcut_features")


def _options(
    settings_cls: type[Any], settings: Any, read: ReadOptions | None, keywords: dict[str, Any]
) -> tuple[Any, ReadOptions]:
    """The operation's settings and the reader options, from objects and keywords."""
    read_keys = {k: keywords.pop(k) for k in list(keywords) if k in ReadOptions.model_fields}
    options = ReadOptions.of(read, **read_keys)
    if options.format is not None:
        raise ConfigError("format applies to files; in-memory data needs none")
    method = getattr(settings, "method", None)
    if method is not None and "method" in settings_cls.unhonoured(settings):
        raise ConfigError(
            f"setting 'method' (= {method!r}) of {type(settings).__name__} is not run here; "
            "zdebias.filter(data, settings) runs it"
        )
    return settings_cls.of(settings, **keywords), options


def _read(data: Any, options: ReadOptions) -> MemoryRows:
    return read_rows(
        data,
        task=options.task,
        columns=options.columns or None,
        label_map=options.label_map or None,
        split=options.split,
        on_error=options.on_error,
        limit=options.limit,
        where=options.where or None,
    )


def _with_hypo_only(rows: MemoryRows, settings: Any, progress: bool) -> MemoryRows:
    """Predictions of ``settings.hypo_only_model`` in the records' meta (as the CLI)."""
    from zdebias.classify.hypo_only import apply_hypo_only_model

    rows.records = apply_hypo_only_model(
        rows.records, settings, rows.report.labels, progress=progress
    )
    return rows


def _aligned(rows: MemoryRows, columns: dict[str, list[Any]]) -> Any:
    """A copy of the input with ``columns`` (one value per input row) added or replaced:
    DataFrame → DataFrame, Dataset → Dataset, dicts/Records → list of dicts."""
    data = rows.source
    if rows.kind == "dataframe":
        import pandas as pd

        out = data.copy()
        for name, values in columns.items():
            dtype = bool if name == "keep" else object
            out[name] = pd.Series(values, index=out.index, dtype=dtype)
        return out
    if rows.kind == "dataset":
        import datasets

        features = {
            "keep": datasets.Value("bool"),
            "rejected_by": datasets.List(datasets.Value("string")),
            "rejected_by_z": datasets.List(datasets.Value("float64")),
            "shortcuts": datasets.List(datasets.Value("string")),
            "shortcut_z": datasets.List(datasets.Value("float64")),
            "confidence": datasets.Value("float64"),
            "variability": datasets.Value("float64"),
            "correctness": datasets.Value("float64"),
            "aflite_round": datasets.Value("int64"),
            "aflite_score": datasets.Value("float64"),
            "shortcut_slice": datasets.Value("string"),
            "shortcut_label": datasets.Value("string"),
            "shortcut_features": datasets.List(datasets.Value("string")),
        }
        out = data.remove_columns([c for c in columns if c in data.column_names])
        for name, values in columns.items():
            out = out.add_column(name, values, feature=features.get(name))  # else inferred
        return out
    base = [r.to_dict() for r in data] if rows.kind == "records" else data
    return [
        {**row, **{name: values[i] for name, values in columns.items()}}
        for i, row in enumerate(base)
    ]


def _embed(records: Any, settings: Any, *, progress: bool = False) -> Any:
    """:func:`zdebias.classify.embed.embed_records`, imported when a method embeds."""
    from zdebias.classify.embed import embed_records

    return embed_records(records, settings, progress=progress)


def filter(
    data: Any,
    settings: Any = None,
    *,
    method: str | None = None,
    read: ReadOptions | None = None,
    seed_data: Any = None,
    embeddings: Any = None,
    return_summary: bool = False,
    progress: bool = False,
    **keywords: Any,
) -> Any:
    """Filter ``data`` with ``method`` (``zdebias filter --method``): ``z`` (the default),
    ``cartography``, ``aflite``, a registered method or one at a dotted path
    ``pkg.module:Method`` (:mod:`zdebias.stats.methods`), and return its rows with the
    verdicts.

    ``data``: a pandas DataFrame, a ``datasets.Dataset`` / ``DatasetDict`` (with ``split=``),
    or a list of dicts: the result is a copy of the same type (a list of dicts for a list),
    same length and order, with the method's columns (``keep`` first; None for a row not
    read). A list of :class:`Record` returns the method's own result where it has one (a
    :class:`~zdebias.stats.zfilter.ZFilterResult` for z). ``settings`` / keywords: the
    method's settings fields and :class:`ReadOptions` fields; a :class:`FilterSettings`
    names its method itself. ``seed_data``: D_seed for conditional z-filtering.
    ``embeddings``: AFLite's, one row per input row. ``return_summary``: ``(rows, summary)``,
    the summary ``zdebias filter`` writes plus ``n_rows`` and ``read``.

    >>> out = zdebias.filter(df, method="z", task="nli")     # doctest: +SKIP
    """
    from zdebias.stats.methods import DEFAULT_METHOD, FilterInputs, filter_method

    named = getattr(settings, "method", None)
    if method is not None and named is not None and named != method:
        raise ConfigError(f"method={method!r} but the settings' method is {named!r}")
    chosen = filter_method(method or named or DEFAULT_METHOD)
    if named is not None:  # chosen: the method's own settings class takes the rest
        settings = settings.model_copy(update={"method": DEFAULT_METHOD})
    cfg, options = _options(chosen.settings, settings, read, dict(keywords))
    rows = _read(data, options)
    if chosen.uses_features:
        rows = _with_hypo_only(rows, cfg, progress)
    inputs = FilterInputs(labels=rows.report.labels, source="data", progress=progress)
    if seed_data is not None:
        if not chosen.takes_seed:
            raise ConfigError(f"seed_data is for z-filtering; method {chosen.name} takes none")
        seed_options = options.model_copy(update={"split": None, "limit": None, "where": {}})
        if options.task is None and rows.report.task != "?":
            seed_options = seed_options.model_copy(update={"task": rows.report.task})
        seed_rows = _read(seed_data, seed_options)
        if chosen.uses_features:
            seed_rows = _with_hypo_only(seed_rows, cfg, progress)
        inputs.seed_records = seed_rows.records
    if embeddings is not None:
        x = np.asarray(embeddings)
        if x.ndim != 2 or x.shape[0] != rows.n_rows:
            raise ConfigError(f"embeddings of shape {x.shape} for {rows.n_rows} rows")
        inputs.embeddings = x[np.asarray(rows.positions, dtype=np.int64)]
    else:
        inputs.embed = _embed
    outcome = chosen.run(rows.records, cfg, inputs)
    summary: FilterSummary = {
        **outcome.summary,
        "n_rows": rows.n_rows,
        "read": rows.report.summary(),
    }
    for line in summary.get("warnings", ()):  # as `zdebias filter` tells them, on stderr
        logging.getLogger("zdebias").warning("%s", line)
    if rows.kind == "records" and outcome.result is not None:
        outcome.result.summary = summary
        return outcome.result
    columns: dict[str, list[Any]] = {}
    for name, values in outcome.columns.items():
        placed: list[Any] = [False if name == "keep" else None] * rows.n_rows
        for pos, value in zip(rows.positions, values, strict=True):
            placed[pos] = value
        columns[name] = placed
    out = _aligned(rows, columns)
    return (out, summary) if return_summary else out


def z_filter(
    data: Any,
    settings: ZFilterSettings | None = None,
    *,
    read: ReadOptions | None = None,
    seed_data: Any = None,
    return_summary: bool = False,
    progress: bool = False,
    **keywords: Any,
) -> Any:
    """z-filter ``data`` (GD-NLI Algorithm 1): :func:`filter` with ``method="z"``.

    The rows come back with ``keep`` (bool), ``rejected_by`` (feature names, strongest
    first; ``[]`` when kept, None for a row not read) and ``rejected_by_z``. A list of
    :class:`Record` returns a :class:`~zdebias.stats.zfilter.ZFilterResult`, as
    :func:`zdebias.stats.zfilter.z_filter` does.

    ``settings`` / keywords: :class:`ZFilterSettings` fields (``biased_k``,
    ``zfilter_batch_size``, ``seed``, ``features``, ``keep_features`` (the task's own
    features: they reject no row), ...) and :class:`ReadOptions` fields
    (``task``, ``columns``, ``label_map``, ``split``, ``on_error``, ``limit``).
    ``seed_data``: D_seed for conditional z-filtering (any of the same types; it is kept
    whole and not part of the returned rows). ``return_summary``: return ``(rows, summary)``;
    the summary is the one ``zdebias filter`` writes, plus ``read`` (what was skipped).
    """
    return filter(
        data,
        settings,
        method="z",
        read=read,
        seed_data=seed_data,
        return_summary=return_summary,
        progress=progress,
        **keywords,
    )


def confidence_filter(
    data: Any,
    classifier: Any,
    settings: Any = None,
    *,
    read: ReadOptions | None = None,
    return_summary: bool = False,
    progress: bool = False,
    **keywords: Any,
) -> Any:
    """Confidence filter (GD-NLI §2.2.2): keep a row when ``classifier`` (a classifier folder,
    reference or loaded classifier) gives its gold label a probability above ``threshold``.

    Returns ``data``'s rows (same type, length and order; a list of dicts for a list) with
    ``keep`` and ``confidence`` (p of the gold label; None for a row not read). ``settings``
    / keywords: :class:`~zdebias.classify.settings.ConfidenceSettings` fields (``threshold``,
    ``batch_size``, ``device``) and :class:`ReadOptions` fields. ``return_summary``: return
    ``(rows, summary)``, the summary ``zdebias confidence-filter`` writes plus ``read``.
    """
    from zdebias.classify import confidence
    from zdebias.classify.settings import ConfidenceSettings

    cfg, options = _options(ConfidenceSettings, settings, read, dict(keywords))
    rows = _read(data, options)
    # positions as ids, so the kept / rejected lists map back to rows even with repeated ids
    tagged = [r.replace(id=str(i)) for i, r in enumerate(rows.records)]
    kept, rejected, summary = confidence.confidence_filter(
        tagged, classifier, cfg, progress=progress
    )
    keep: list[bool] = [False] * rows.n_rows
    conf: list[float | None] = [None] * rows.n_rows
    for verdict, group in ((True, kept), (False, rejected)):
        for r in group:
            pos = rows.positions[int(r.id)]
            keep[pos] = verdict
            conf[pos] = float(r.meta[confidence.CONFIDENCE_KEY])
    summary = {**summary, "n_rows": rows.n_rows, "read": rows.report.summary()}
    out = _aligned(rows, {"keep": keep, "confidence": conf})
    return (out, summary) if return_summary else out


def cartography(dynamics: Any) -> Any:
    """The training dynamics of a classifier folder zdebias trained (or of its
    ``training_dynamics.jsonl``) as a pandas DataFrame, one row per training example:
    ``id``, ``label``, ``confidence``, ``variability``, ``correctness``, ``epochs`` and
    ``gold_probs`` (per epoch; NaN where not trained on)."""
    import pandas as pd

    from zdebias.stats.dynamics import read_dynamics

    dyn = read_dynamics(dynamics)
    return pd.DataFrame(
        {
            "id": dyn.ids,
            "label": dyn.labels,
            "confidence": dyn.confidence,
            "variability": dyn.variability,
            "correctness": dyn.correctness,
            "epochs": (~np.isnan(dyn.gold_probs)).sum(axis=1),
            "gold_probs": [row.tolist() for row in dyn.gold_probs],
        }
    )


def cartography_filter(
    data: Any,
    settings: Any = None,
    *,
    read: ReadOptions | None = None,
    return_summary: bool = False,
    **keywords: Any,
) -> Any:
    """Keep the rows of ``data`` in a region of a classifier's data map (dataset
    cartography, ``zdebias filter --method cartography``).

    ``settings`` / keywords: :class:`~zdebias.stats.settings.CartographySettings` fields
    (``dynamics``: a classifier folder trained on these rows, or its dynamics file;
    ``region``: ``ambiguous``, ``hard-to-learn`` or ``easy``; ``fraction``) and
    :class:`ReadOptions` fields. Rows are matched by id (a DataFrame needs the ``id`` column
    the classifier's training records had), or by position when the ids are the training
    rows' in their order; a row without dynamics, or a repeated id otherwise, is an error.
    Returns the rows (same type, length and order; a list of dicts for a list) with ``keep``,
    ``confidence``, ``variability`` and ``correctness`` (None for a row not read).
    """
    return filter(
        data, settings, method="cartography", read=read, return_summary=return_summary, **keywords
    )


def aflite_filter(
    data: Any,
    settings: AfliteSettings | None = None,
    *,
    embeddings: Any = None,
    read: ReadOptions | None = None,
    return_summary: bool = False,
    progress: bool = False,
    **keywords: Any,
) -> Any:
    """AFLite (Le Bras et al. 2020) of ``data``: the rows whose label n linear models on
    frozen embeddings predict, removed round by round (``zdebias filter --method aflite``).

    ``data`` as for :func:`z_filter`; the result is a copy of the same type, same length and
    order, with ``keep``, ``rejected_by`` (``["aflite"]`` when removed, ``[]`` when kept,
    None for a row not read), ``aflite_round`` (the round that removed the row, else None)
    and ``aflite_score`` (its share of held-out models predicting its label). A list of
    :class:`Record` returns a :class:`~zdebias.stats.aflite.AfliteResult`.

    ``embeddings``: an array ``[len(data), dim]``, one row per input row (rows not read are
    skipped), instead of embedding with ``encoder``. ``settings`` / keywords:
    :class:`AfliteSettings` fields (``aflite_n``, ``aflite_m``, ``aflite_k``,
    ``aflite_tau``, ``aflite_target``, ``encoder``, ``max_length``, ``seed``) and
    :class:`ReadOptions` fields. ``return_summary``: return ``(rows, summary)``.

    >>> out = zdebias.aflite_filter(df, task="nli", embeddings=x)   # doctest: +SKIP
    """
    return filter(
        data,
        settings,
        method="aflite",
        embeddings=embeddings,
        read=read,
        return_summary=return_summary,
        progress=progress,
        **keywords,
    )


@dataclass
class Shortcuts:
    """What :func:`find_shortcuts` found.

    ``table``: a pandas DataFrame of the top features per label (``label``, ``rank``,
    ``feature``, ``z``, ``n``, ``p``, ``significant``). ``rows``: the input's rows (same type,
    length and order) with ``shortcuts`` — the row's features that give its gold label away
    significantly (z > ``z_critical``), strongest first — and ``shortcut_z``. ``summary``: the
    report ``zdebias stats --json`` prints, plus ``read``. ``measurement``: the full arrays.
    """

    table: Any
    rows: Any
    summary: dict[str, Any]
    measurement: Measurement = field(repr=False)

    def plot(
        self,
        *,
        label_top: int = 10,
        min_n: int | None = None,
        title: str | None = None,
        backend: Literal["matplotlib", "plotly"] = "matplotlib",
    ) -> Any:
        """The Gardner plot (a matplotlib or plotly Figure), its ``label_top`` strongest
        significant features named."""
        from zdebias.report.plots import gardner_plot, prior_of

        m = self.measurement
        return gardner_plot(
            m.names,
            m.labels,
            m.z,
            m.n,
            m.p_hat,
            z_c=self.summary["z_critical"],
            min_n=self.summary.get("min_n", 20) if min_n is None else min_n,
            title=title,
            label_top=label_top,
            backend=backend,
            p0=prior_of(m.report),
        )


def _row_shortcuts(
    m: Measurement, label_index: Sequence[int], z_c: float
) -> tuple[list[list[str]], list[list[float]]]:
    """Per record: its features whose z for its label exceeds ``z_c``, strongest first."""
    assert m.features is not None
    matrix = m.features.matrix.tocsr()
    names, z = m.names, m.z
    out_names: list[list[str]] = []
    out_z: list[list[float]] = []
    for r, label in enumerate(label_index):
        cols = matrix.indices[matrix.indptr[r] : matrix.indptr[r + 1]]
        zs = z[cols, label]
        sel = zs > z_c
        cols, zs = cols[sel], zs[sel]
        order = np.lexsort((cols, -zs))
        out_names.append([names[j] for j in cols[order].tolist()])
        out_z.append([round(float(v), 4) for v in zs[order].tolist()])
    return out_names, out_z


def find_shortcuts(
    data: Any,
    settings: StatsSettings | None = None,
    *,
    read: ReadOptions | None = None,
    progress: bool = False,
    **keywords: Any,
) -> Shortcuts:
    """The z-statistics of ``data``'s features (GD-NLI §3.1, Gardner et al. 2021).

    ``data`` as for :func:`z_filter`; ``settings`` / keywords: :class:`StatsSettings` fields
    (``top``, ``alpha``, ``min_n``, ``track``, ``features``, ``keep_features``, ...) and
    :class:`ReadOptions` fields. Returns a :class:`Shortcuts`: the table, the rows with their
    shortcuts, the summary and :meth:`Shortcuts.plot`. With ``keep_features`` the table has a
    ``kept`` column (True: the feature is the task's own, not a shortcut).
    """
    import pandas as pd

    from zdebias.data.labels import label_ids
    from zdebias.stats.measure import measure

    cfg, options = _options(StatsSettings, settings, read, dict(keywords))
    rows = _with_hypo_only(_read(data, options), cfg, progress)
    if not rows.records:
        raise ConfigError("no labelled rows to measure")
    m = measure(rows.records, cfg, labels=rows.report.labels, progress=progress)
    summary = {**m.report, "min_n": cfg.min_n, "n_rows": rows.n_rows}
    summary["read"] = rows.report.summary()
    z_c = float(summary["z_critical"])
    table = pd.DataFrame(
        [
            {
                "label": label,
                "rank": rank,
                "feature": row["feature"],
                "z": row["z"],
                "n": row["n"],
                "p": row["p"],
                "significant": bool(row["z"] > z_c),
                "kept": bool(row.get("kept", False)),
            }
            for label, top in summary["top"].items()
            for rank, row in enumerate(top, start=1)
        ],
        columns=[
            "label",
            "rank",
            "feature",
            "z",
            "n",
            "p",
            "significant",
            *(["kept"] if cfg.keep_features else []),
        ],
    )
    y = label_ids(rows.records, m.labels)
    per_names, per_z = _row_shortcuts(m, y.tolist(), z_c)
    names_col: list[list[str] | None] = [None] * rows.n_rows
    z_col: list[list[float] | None] = [None] * rows.n_rows
    for i, pos in enumerate(rows.positions):
        names_col[pos], z_col[pos] = per_names[i], per_z[i]
    aligned = _aligned(rows, {"shortcuts": names_col, "shortcut_z": z_col})
    return Shortcuts(table=table, rows=aligned, summary=summary, measurement=m)


def shortcut_split(
    train: Any,
    test: Any,
    settings: ShortcutSplitSettings | None = None,
    *,
    read: ReadOptions | None = None,
    return_summary: bool = False,
    progress: bool = False,
    **keywords: Any,
) -> Any:
    """Split ``test`` by the shortcuts of ``train`` (docs/design.md §13, ``zdebias
    shortcut-split``).

    ``train`` / ``test`` as ``data`` of :func:`z_filter` (the test set is read with the
    training set's label set). Returns a copy of ``test`` (same type, length and order) with
    ``shortcut_slice`` (``aligned``, ``conflicting`` or ``free``; None for a row not read,
    e.g. without a gold label), ``shortcut_label`` (the verdict, None when there is none) and
    ``shortcut_features`` (the deciding features, strongest first). A list of
    :class:`Record` returns the :class:`~zdebias.stats.shortcut_split.ShortcutSplit`.
    ``settings`` / keywords: :class:`ShortcutSplitSettings` fields (``by``, ``alpha``,
    ``features``, ``keep_features`` (they do not vote), ...) and :class:`ReadOptions`
    fields. ``return_summary``: ``(rows, summary)``, the summary ``zdebias shortcut-split``
    writes, plus ``read``.

    >>> out = zdebias.shortcut_split(train_df, test_df, task="nli")   # doctest: +SKIP
    >>> out["shortcut_slice"].value_counts()["conflicting"]           # doctest: +SKIP
    1801
    """
    from zdebias.stats.shortcut_split import split_records

    cfg, options = _options(ShortcutSplitSettings, settings, read, dict(keywords))
    train_rows = _with_hypo_only(_read(train, options), cfg.with_hypo_only(), progress)
    test_options = options.model_copy(update={"split": None, "limit": None})
    if options.task is None and train_rows.report.task != "?":
        test_options = test_options.model_copy(update={"task": train_rows.report.task})
    test_rows = _with_hypo_only(_read(test, test_options), cfg.with_hypo_only(), progress)
    labels = train_rows.report.labels or ()
    result = split_records(
        train_rows.records, test_rows.records, cfg, labels=labels, progress=progress
    )
    summary: ShortcutSplitSummary = {
        **result.summary,
        "n_rows": test_rows.n_rows,
        "read": test_rows.report.summary(),
    }
    for line in summary["warnings"]:  # as `zdebias shortcut-split` tells them, on stderr
        logging.getLogger("zdebias").warning("%s", line)
    if test_rows.kind == "records":
        result.summary = summary
        return result
    n = test_rows.n_rows
    columns: dict[str, list[Any]] = {name: [None] * n for name in SPLIT_COLUMNS}
    for record, pos in zip(result.rows, test_rows.positions, strict=True):
        meta = record.meta["shortcut"]
        columns["shortcut_slice"][pos] = meta["slice"]
        columns["shortcut_label"][pos] = meta["label"]
        columns["shortcut_features"][pos] = [f["feature"] for f in meta.get("features", [])]
    out = _aligned(test_rows, columns)
    return (out, summary) if return_summary else out


def artifact_accuracy(
    data: Any,
    settings: StatsSettings | None = None,
    *,
    folds: int = 5,
    read: ReadOptions | None = None,
    **keywords: Any,
) -> ArtifactResult:
    """How much of the label a model of another family than the z-filter's predicts without
    the task (``zdebias stats --artifact-model``, :mod:`zdebias.stats.artifacts`).

    ``data`` as for :func:`z_filter`; ``settings`` / keywords: :class:`StatsSettings` fields
    (``seed``, ``token_pattern``, ``segmenter``) and :class:`ReadOptions` fields. Returns an
    :class:`~zdebias.stats.artifacts.ArtifactResult`: ``accuracy`` (mean over the stratified
    folds), ``accuracy_std``, ``majority_share``, ``above_majority`` (points), ``macro_f1``;
    ``.report()`` is the block ``zdebias stats --artifact-model`` prints.

    >>> zdebias.artifact_accuracy(df, task="nli").accuracy   # doctest: +SKIP
    0.5819...
    """
    from zdebias.features.tokenize import Tokenizer
    from zdebias.stats.artifacts import artifact_accuracy as cross_validated

    cfg, options = _options(StatsSettings, settings, read, dict(keywords))
    rows = _read(data, options)
    if not rows.records:
        raise ConfigError("no labelled rows to measure")
    return cross_validated(
        rows.records,
        labels=rows.report.labels,
        folds=folds,
        seed=cfg.seed,
        tokenize=Tokenizer.from_settings(cfg.token_kwargs()),
    )


__all__ = [
    "AFLITE_COLUMNS",
    "FILTER_COLUMNS",
    "SHORTCUT_COLUMNS",
    "SPLIT_COLUMNS",
    "Shortcuts",
    "aflite_filter",
    "artifact_accuracy",
    "cartography",
    "cartography_filter",
    "confidence_filter",
    "filter",
    "find_shortcuts",
    "shortcut_split",
    "z_filter",
]
