"""The summaries the filter and the shortcut split write (``summary.json``) and the report,
the recipe stages and the Python API read, as TypedDicts: the keys are a contract between
the operations that build them and what reads them, which mypy checks (``make lint``).

At run time they are plain dicts, so ``summary.json`` is written exactly as before (keys in
the order the builders insert them). ``total=False``: a key is there when its method, its
settings or its way of running put it there; each class says which.
"""

from __future__ import annotations

from typing import Any, TypedDict


class FilterSummary(TypedDict, total=False):
    """What every filter method's summary holds (``zdebias filter``, the ``filter`` stage,
    ``zdebias.filter``): the counts and labels of :meth:`FilterMethod.run
    <zdebias.stats.methods.FilterMethod.run>`'s outcome, then what the file way adds."""

    method: str
    n_input: int
    n_seed: int
    n_accepted: int
    n_kept: int
    n_rejected: int
    kept_share_of_input: float | None
    labels: list[str]
    label_counts_before: dict[str, int]
    label_counts_after: dict[str, int]
    #: feature (or reason) → rows rejected for it, most first
    rejections_by_feature: dict[str, int]
    seed: int
    #: said on stderr (``zdebias filter``) and noted in a run
    warnings: list[str]
    #: the in-memory API's (``zdebias.filter``): the rows given, read or not
    n_rows: int
    #: how the input was read (its read report; the API's too)
    read: dict[str, Any]
    # the file way (run_filter's write): the inputs, the seed's read report, the kept rows' stats
    path: str
    seed_data: str | None
    read_seed: dict[str, Any] | None
    stats_of_kept: dict[str, Any] | None
    #: the model behind the hypo-only feature
    #: (:func:`~zdebias.stats.execution.operations.hypo_only_record`)
    hypo_only_model: dict[str, Any]
    #: ``--output-schema input``: the files written in the input's own columns
    output_schema: str
    output_files: list[str]


class ZFilterSummary(FilterSummary, total=False):
    """z-filtering's summary (:func:`~zdebias.stats.zfilter.summarize_filter`): its settings
    as recorded (:func:`~zdebias.stats.zfilter.summary_settings`), the batches, the top
    features before and after, what was discarded and the warnings' blocks."""

    # settings, as the summary records them
    biased_k: int
    zfilter_batch_size: int
    shuffle: bool
    #: a number, or ``critical`` (the data's z_critical)
    min_z: float | str
    #: ``uniform`` (1/L) or ``empirical``
    label_prior: str
    #: the feature groups, or ``default``
    features: list[str] | str
    warn_label_share: float
    min_label_share: float
    keep_features: list[str]
    # the run
    zfilter_batch_size_rule: str
    n_batches: int
    n_features: int
    z_critical: float
    n_significant_before: int
    n_significant_after: int
    #: per label, its top feature's row (feature, z, ...; None: no feature)
    top_z_before: dict[str, dict[str, Any] | None]
    top_z_after: dict[str, dict[str, Any] | None]
    top_before: dict[str, list[Any]]
    top_after: dict[str, list[Any]]
    top_before_after: Any
    visiting_order: str
    # what was discarded (:func:`~zdebias.stats.zfilter.discards`)
    discarded_share: float | None
    label_discarded_share: dict[str, float | None]
    min_z_used: float | None
    n_rejected_below_critical: int
    n_kept_by_floor: int
    label_kept_by_floor: dict[str, int]
    # blocks present when they apply
    exact_test: dict[str, Any] | None
    kept_features: dict[str, Any]
    label_share_warnings: list[str]
    imbalance: dict[str, Any] | None


class AfliteSummary(FilterSummary, total=False):
    """AFLite's summary (:func:`~zdebias.stats.aflite.aflite_filter`): its settings as
    resolved, each round's removals and the embeddings' shape and model."""

    aflite_n: int
    aflite_m: int
    aflite_k: int
    aflite_tau: float
    aflite_target: int
    aflite_steps: int
    aflite_l2: float
    aflite_rule: dict[str, str]
    n_rounds: int
    rounds: list[dict[str, Any]]
    stopped: str
    embeddings: dict[str, Any]


class CartographySummary(FilterSummary, total=False):
    """The cartography filter's summary (:func:`~zdebias.stats.cartography_filter.
    cartography_split`): the region kept, how the dynamics matched the rows, the means and
    ranges of confidence, variability and correctness."""

    dynamics: str
    region: str
    region_order: str
    fraction: float
    region_size_rule: str
    ties: str
    matched_by: str
    epochs: int
    n_dynamics: int
    n_dynamics_not_in_input: int
    kept_ranges: dict[str, Any]
    input_means: dict[str, Any]
    kept_means: dict[str, Any]


class ShortcutSplitSummary(TypedDict, total=False):
    """The shortcut split's summary (:func:`~zdebias.stats.shortcut_split.split_records`;
    docs/shortcut-splits.md): what decided the verdicts, the slices' counts and digests (what
    ``evaluate`` checks a test set against), the warnings; ``zdebias shortcut-split`` adds
    the inputs and their read reports."""

    # the inputs (shortcut_split_file)
    train: str
    test: str
    read_train: dict[str, Any]
    read_test: dict[str, Any]
    #: ``--compare-with``: how far another split of the same test set agrees
    agreement: dict[str, Any]
    #: the in-memory API's (``zdebias.shortcut_split``): the test rows given, how read
    n_rows: int
    read: dict[str, Any]
    #: evaluate's (:func:`~zdebias.evaluation.reliance.read_split`): the folder read from,
    #: and the suite whose rows are its test set (None: none is)
    folder: str
    suite: str | None
    # the verdicts
    by: str
    rule: str
    labels: list[str]
    n_train: int
    n_test: int
    #: rows per slice (aligned, conflicting, free)
    counts: dict[str, int]
    test_digest: str
    digests: dict[str, str]
    per_label: dict[str, dict[str, int]]
    n_tied: int
    alpha: float
    deciding_features: list[dict[str, Any]]
    min_conflicting: int
    warnings: list[str]
    hypothesis_only_accuracy: float | None
    # the effect rule's (what it used)
    effect_smoothing: str
    bias_model: dict[str, Any]
    gate: dict[str, Any]
    #: the rule, features, prior and bias model (``evaluate`` compares a method's to it)
    used: dict[str, Any]
    label_coincident: bool
    label_prior: str
    n_features: int
    z_critical: float
    n_significant: int
    exact_test: dict[str, Any] | None
    keep_features: list[str]
    kept_features: dict[str, Any]


__all__ = [
    "AfliteSummary",
    "CartographySummary",
    "FilterSummary",
    "ShortcutSplitSummary",
    "ZFilterSummary",
]
