"""Settings of the statistics operations: z-statistics reports and z-filtering
(docs/design.md §3-§5)."""

from __future__ import annotations

import logging
import math
from typing import Any, ClassVar, Literal

from pydantic import field_validator, model_validator
from pydantic_core import PydanticCustomError

from zdebias.features.settings import FeatureSettings
from zdebias.settings import DEFAULT_SEED, Settings, setting
from zdebias.stats.methods.catalogue import CATALOGUE, unknown_method

#: Algorithm 1's defaults: k (Table 8) and the z-filtering batch of large data (GD-NLI)
DEFAULT_TOP_K = 20
DEFAULT_BATCH_SIZE = 1000
#: Data of fewer than ``SMALL_DATA_BATCHES * DEFAULT_BATCH_SIZE`` rows is cut into this many
#: batches by default, so that an unseeded run's first batch, kept unconditionally, is at most
#: 1/20 of it (:func:`scaled_batch_size`)
SMALL_DATA_BATCHES = 20
#: z-filtering warns when it keeps less than this share of a label's rows
DEFAULT_WARN_LABEL_SHARE = 0.25
#: the dataset recipes of GD-NLI §4.2
RECIPE_NAMES = ("z-aug", "par-z", "seq-z")
#: the built-in filter methods (:data:`zdebias.stats.methods.catalogue.CATALOGUE`):
#: z-filtering (GD-NLI Algorithm 1), dataset cartography and AFLite (docs/design.md §12)
FILTER_METHODS = tuple(CATALOGUE)
#: a built-in method's name; ``FilterSettings.method`` also takes a user's, by dotted path
FilterMethodName = Literal[FILTER_METHODS]  # type: ignore[valid-type]


class PriorSettings(Settings):
    """The label prior z is tested against (docs/design.md §14), one field shared by the statistics,
    the z-filter, the dataset recipes and the shortcut split."""

    label_prior: Literal["uniform", "empirical"] | None = setting(
        None,
        "What z tests each label against: uniform (1/L, the papers; the default) or "
        "empirical (the label's share of the data: on imbalanced data the label shares "
        "themselves are then no shortcut, and z-filtering keeps them).",
        exclude_if=lambda value: value is None,  # unset: stage hashes as before the setting
    )


def comma_parts(value: Any) -> list[str] | None:
    """A repeatable, comma-separated option's items (``--x a --x b,c`` or a recipe's list or
    string) → ``[a, b, c]``, empty items dropped; None for a value of another type (left to
    the field's own validation)."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list | tuple):
        parts = [p.strip() for v in value for p in str(v).split(",")]
        return [p for p in parts if p]
    return None


class KeepSettings(Settings):
    """Features that are the task (:mod:`zdebias.stats.keep`), one field shared by the
    statistics (they report them, marked as kept), the z-filter (they are never biased) and
    the shortcut split (they never vote)."""

    keep_features: list[str] = setting(
        default_factory=list,
        help="Features that are the task, not a shortcut (a toxicity set's slurs): the "
        "z-filter never rejects a row for them and the shortcut split never lets them vote; "
        "the stats still report them, marked as kept. Exact names (idiot@text), globs "
        "(*@hypothesis, hypo-len*) or @FILE (one per line): repeat the option or separate "
        "them by commas.",
        repeat=True,
        exclude_if=lambda value: not value,  # unset: stage hashes as before the setting
    )

    @field_validator("keep_features", mode="before")
    @classmethod
    def _patterns(cls, value: Any) -> Any:
        """``--keep-features a --keep-features b,@words.txt`` → ``[a, b, <the file's>]``."""
        from zdebias.stats.keep import expand_patterns

        parts = comma_parts(value)
        return expand_patterns(parts) if parts is not None else value


class StatsSettings(FeatureSettings, PriorSettings, KeepSettings):
    """A z-statistics report: top features per label, significance, Gardner-plot points."""

    help_panel: ClassVar[str] = "Statistics"

    top: int = setting(20, "Features per label in the table.", ge=1, deprecated=("--top-k",))
    alpha: float = setting(0.01, "Significance level (Bonferroni-corrected).", gt=0, lt=1)
    min_n: int = setting(20, "Gardner plot: features seen more often than this.", ge=0)
    track: list[str] = setting(
        default_factory=list,
        help="Features whose z, n, p̂ and rank are always reported: repeat the option or "
        "separate them by commas.",
        repeat=True,
    )
    artifact_model: bool = setting(
        False,
        "Also report the 5-fold cross-validated accuracy of a partial-input model the filter "
        "does not use (logistic regression on hypothesis word uni+bigrams; the text for single "
        "text) against the majority share: how much is predictable without the task.",
        exclude_if=lambda value: not value,  # unset: stage hashes as before the setting
    )

    @field_validator("track", mode="before")
    @classmethod
    def _comma_lists(cls, value: Any) -> Any:
        """``--track a --track b,c`` → ``[a, b, c]`` (a recipe's list or string alike)."""
        parts = comma_parts(value)
        return list(dict.fromkeys(parts)) if parts is not None else value


class ShortcutSplitSettings(FeatureSettings, PriorSettings, KeepSettings):
    """A shortcut split of a test set (docs/design.md §13): the training set's significant features
    (the stats' feature settings, α and Bonferroni) or its hypothesis-only model give each
    test row a verdict; aligned, conflicting or free."""

    help_panel: ClassVar[str] = "Shortcut split"

    by: Literal["features", "hypothesis-only", "both"] = setting(
        "features",
        "What gives a test row its verdict: features (the training set's significant "
        "features, weighed by --rule), hypothesis-only (the fast hypothesis-only model "
        "trained on the training set; pairs only) or both (conflicting when either points "
        "to another label than the gold one).",
    )
    alpha: float = setting(0.01, "Significance level (Bonferroni-corrected).", gt=0, lt=1)
    top: int = setting(20, "Deciding features listed in summary.json.", ge=1)
    rule: Literal["effect", "sum-z"] = setting(
        "effect",
        "How significant features vote: effect (each group of overlapping features votes "
        "once with its smoothed log-odds against the prior; the partial-input model only "
        "where its held-out precision is clearly above the prior) or sum-z (the earlier "
        "rule: z summed over every significant feature; the partial-input model always).",
    )  # a recipe stage's hash leaves out sum-z (ShortcutSplitConfig.hashed)
    bias_model: Literal["hypo-only", "ngram-lr"] = setting(
        "hypo-only",
        "The partial-input model of the effect rule: hypo-only (the hypo-only feature's own "
        "model, --hypo-only-classifier) or ngram-lr (an independent one: logistic "
        "regression on hypothesis n-grams, cross-fitted on other folds).",
        exclude_if=lambda value: value == "hypo-only",  # unset: stage hashes as before
    )

    def with_hypo_only(self) -> ShortcutSplitSettings:
        """These settings with the ``hypo-only`` feature listed when ``by`` needs the model
        and ``features`` leaves it out: what the callable that applies a trained
        hypothesis-only model (``hypo_only_model``) is given, so it predicts."""
        if self.by == "features" or self.features is None or "hypo-only" in self.features:
            return self
        return self.model_copy(update={"features": [*self.features, "hypo-only"]})


class ZFilterSettings(FeatureSettings, PriorSettings, KeepSettings):
    """z-filtering, GD-NLI Algorithm 1: biased features per label, batch, visiting order."""

    help_panel: ClassVar[str] = "z-filter"
    #: the filter method whose settings these are (:meth:`FilterSettings.hash_excluded`)
    filter_method: ClassVar[str] = "z"

    biased_k: int = setting(
        DEFAULT_TOP_K,
        "Biased features per label (k, Table 8).",
        ge=1,
        deprecated=("--top-k", "top_k"),
    )
    zfilter_batch_size: int | None = setting(
        None,
        "Examples per z-filtering batch; smaller ones filter more finely. Default: scaled to the "
        "data, min(1000, ceil(n / 20)) for n examples to filter: 1000 from 20,000 examples "
        "on, else 20 batches, so the first batch (kept unconditionally without a seed) is "
        "at most 5% of the data.",
        ge=1,
        deprecated=("--batch-size", "batch_size"),
    )
    shuffle: bool = setting(True, "Visit examples in a seeded random order (else file order).")
    min_z: float | Literal["critical"] = setting(
        0.0,
        "A feature is biased only if its z exceeds this: 0 (the paper's Algorithm 1: the top "
        "k with z > 0, significant or not) or critical (the input's z_critical: rows are "
        "removed only for significant features).",
    )
    warn_label_share: float = setting(
        DEFAULT_WARN_LABEL_SHARE,
        "Warn when z-filtering keeps less than this share of a label's rows.",
        ge=0,
        le=1,
        exclude_if=lambda value: value == DEFAULT_WARN_LABEL_SHARE,  # a report setting only
    )
    min_label_share: float | None = setting(
        None,
        "Keep at least this share of each label's rows: a row the biased features would "
        "reject is kept while its label's kept share of the rows visited is below it. "
        "Default: none (Algorithm 1 as published).",
        gt=0,
        le=1,
        exclude_if=lambda value: value is None,  # unset: stage hashes as before the setting
    )

    @field_validator("min_z", mode="wrap")
    @classmethod
    def _min_z_checked(cls, value: Any, handler: Any) -> Any:
        """One error for a bad ``min_z`` (not one per member of the type), naming the value
        as :meth:`_min_z_text` read it (``nan``, not ``'nan'``)."""
        if value == "critical":
            return value
        if isinstance(value, str) or (isinstance(value, float) and not math.isfinite(value)):
            raise PydanticCustomError(
                "finite_number", "Input should be a finite number or 'critical'"
            )
        return handler(value)

    @field_validator("min_z", mode="before")
    @classmethod
    def _min_z_text(cls, value: Any) -> Any:
        """The command line's text: ``critical`` (any case) or a number."""
        if isinstance(value, str):
            text = value.strip().lower()
            if text == "critical":
                return text
            try:
                return float(text)
            except ValueError:
                return value
        return value

    @model_validator(mode="before")
    @classmethod
    def _shuffle_seed(cls, data: Any) -> Any:
        """0.1's ``shuffle_seed``: a seed, or None for file order."""
        if isinstance(data, dict) and "shuffle_seed" in data:
            data = dict(data)
            value = data.pop("shuffle_seed")
            logging.getLogger("zdebias").warning(
                "'shuffle_seed' is deprecated; use 'seed' (and 'shuffle: false' for file order)"
            )
            if value is None:
                data["shuffle"] = False
            else:
                data["seed"] = value
        return data

    @property
    def shuffle_seed(self) -> int | None:
        """The order seed :func:`z_filter_matrix` takes (None: file order)."""
        return self.seed if self.shuffle else None


def scaled_batch_size(n_rows: int, given: int | None = None) -> int:
    """The z-filtering batch size for ``n_rows`` rows to filter: ``given`` when set, else
    ``min(DEFAULT_BATCH_SIZE, ceil(n_rows / SMALL_DATA_BATCHES))`` (at least 1).

    >>> scaled_batch_size(872), scaled_batch_size(19_993), scaled_batch_size(872, 1000)
    (44, 1000, 1000)
    """
    if given is not None:
        return given
    return max(1, min(DEFAULT_BATCH_SIZE, -(-n_rows // SMALL_DATA_BATCHES)))


#: how a summary names the default batch size's rule
SCALED_RULE = f"min({DEFAULT_BATCH_SIZE}, ceil(n_input / {SMALL_DATA_BATCHES}))"


class CartographySettings(Settings):
    """A dataset-cartography region (Swayamdipta et al. 2020): the filter's ``cartography``
    method keeps the ``fraction`` of the input in ``region`` of a classifier's data map."""

    help_panel: ClassVar[str] = "Cartography"
    filter_method: ClassVar[str] = "cartography"

    dynamics: str | None = setting(
        None,
        "Training dynamics for --method cartography: a classifier folder trained by zdebias "
        "(its training_dynamics.jsonl) or that file; rows are matched by id (by position "
        "when the input is the training rows in their order, as repeated ids need).",
    )
    region: Literal["ambiguous", "hard-to-learn", "easy"] = setting(
        "ambiguous",
        "Cartography region kept: ambiguous (highest variability), hard-to-learn (lowest "
        "confidence) or easy (highest confidence).",
    )
    fraction: float = setting(
        0.33, "Share of the input the cartography region keeps (rounded half up).", gt=0, le=1
    )
    seed: int = setting(DEFAULT_SEED, "Random seed (the order of rows tied in the region).")


#: AFLite's published defaults (Le Bras et al. 2020; m from a public reimplementation)
AFLITE_N, AFLITE_M, AFLITE_K, AFLITE_TAU = 64, 5620, 500, 0.75
#: the default m and k on small data: a quarter of the rows trains each model, a fiftieth is
#: removed per round (:func:`scaled_aflite`)
AFLITE_M_SHARE, AFLITE_K_ROUNDS = 4, 50
AFLITE_RULE = {
    "aflite_m": f"min({AFLITE_M}, floor(n_input / {AFLITE_M_SHARE}))",
    "aflite_k": f"min({AFLITE_K}, ceil(n_input / {AFLITE_K_ROUNDS}))",
    "aflite_target": "2 * aflite_m",
}


class AfliteSettings(Settings):
    """AFLite (Le Bras et al. 2020): n linear models per round on frozen embeddings, each
    row scored by the share of the models that did not train on it and got it right; the k
    most predictable rows at or above τ go, until fewer than k qualify or the target size."""

    help_panel: ClassVar[str] = "AFLite"
    filter_method: ClassVar[str] = "aflite"

    encoder: str = setting(
        "minilm",
        "AFLite: the encoder whose mean-pooled embeddings the models see: minilm (packaged), "
        "a local folder or a hub name; cached on disk.",
    )
    max_length: int = setting(128, "AFLite: max tokens per embedded input.", ge=8)
    aflite_n: int = setting(AFLITE_N, "AFLite: linear models per round (n).", ge=1)
    aflite_m: int | None = setting(
        None,
        f"AFLite: rows each model trains on (m). Default: min({AFLITE_M}, floor(n / "
        f"{AFLITE_M_SHARE})) for n rows.",
        ge=1,
    )
    aflite_k: int | None = setting(
        None,
        f"AFLite: rows removed per round at most (k). Default: min({AFLITE_K}, ceil(n / "
        f"{AFLITE_K_ROUNDS})).",
        ge=1,
    )
    aflite_tau: float = setting(
        AFLITE_TAU, "AFLite: a row is removable when its score is at least this (τ).", gt=0, le=1
    )
    aflite_target: int | None = setting(None, "AFLite: stop at this many rows. Default: 2·m.", ge=1)
    aflite_steps: int = setting(
        100, "AFLite: gradient steps of each logistic regression.", ge=1, cli=False
    )
    aflite_l2: float = setting(
        1e-3, "AFLite: L2 penalty of each logistic regression.", ge=0, cli=False
    )
    seed: int = setting(DEFAULT_SEED, "Random seed (AFLite's train subsets).")


def scaled_aflite(n_rows: int, settings: AfliteSettings) -> tuple[int, int, int]:
    """AFLite's ``(m, k, target)`` for ``n_rows`` rows: the settings where given, else the
    published m and k scaled to the data (:data:`AFLITE_RULE`) and a target of 2·m, so each
    model trains on at most half the rows left and every row is held out by about half the
    models or more.

    >>> scaled_aflite(600, AfliteSettings()), scaled_aflite(549_367, AfliteSettings())
    ((150, 12, 300), (5620, 500, 11240))
    """
    m = settings.aflite_m or max(1, min(AFLITE_M, n_rows // AFLITE_M_SHARE))
    k = settings.aflite_k or max(1, min(AFLITE_K, -(-n_rows // AFLITE_K_ROUNDS)))
    target = settings.aflite_target or 2 * m
    return m, k, target


class FilterSettings(ZFilterSettings, CartographySettings, AfliteSettings):
    """The filter command and stage: z-filtering (the default), a cartography region or
    AFLite (``method``), and their settings."""

    method: FilterMethodName | str = setting(
        FILTER_METHODS[0],
        "z (z-filtering, GD-NLI Algorithm 1), cartography (a data-map region) or aflite "
        "(adversarial filtering on embeddings); or a method of your own by dotted path, "
        "pkg.module:Method (docs/architecture.md).",
    )

    @field_validator("method")
    @classmethod
    def _known_method(cls, value: str) -> str:
        """A built-in or registered method, or a dotted path (loaded when it runs)."""
        why = unknown_method(value)
        if why is not None:
            raise PydanticCustomError("unknown_method", why)
        return value

    def hash_excluded(self) -> set[str]:
        """Settings left out of a recipe stage's hash: the settings of the methods it does not
        run (their classes name them, ``filter_method``) that z-filtering lacks (and ``method``
        itself for z), so that adding methods left z-filter stages' hashes as they were."""
        own = [
            b
            for b in type(self).__mro__
            if issubclass(b, Settings) and b.__dict__.get("filter_method") == self.method
        ]
        honoured = set(own[0].model_fields) if own else set()
        others = set(FilterSettings.model_fields) - {"method"} - honoured
        unused = others - set(ZFilterSettings.model_fields)
        return unused | ({"method"} if self.method == FILTER_METHODS[0] else set())


class CombineSettings(ZFilterSettings):
    """A dataset recipe (docs/design.md §5) over the z-filter settings."""

    recipe: Literal["z-aug", "par-z", "seq-z"] = setting(..., "z-aug, par-z or seq-z.")


__all__ = [
    "AFLITE_RULE",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_TOP_K",
    "DEFAULT_WARN_LABEL_SHARE",
    "FILTER_METHODS",
    "RECIPE_NAMES",
    "SCALED_RULE",
    "SMALL_DATA_BATCHES",
    "AfliteSettings",
    "CartographySettings",
    "CombineSettings",
    "FilterSettings",
    "KeepSettings",
    "ShortcutSplitSettings",
    "StatsSettings",
    "ZFilterSettings",
    "scaled_aflite",
    "scaled_batch_size",
]
