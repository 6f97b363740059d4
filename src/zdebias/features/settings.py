"""Feature-extraction settings (docs/design.md §2): which features, tokenisation, bins,
hypothesis-only."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import field_validator, model_validator

from zdebias.settings import DEFAULT_SEED, Settings, setting


class TokenSettings(Settings):
    """How text is cut into word tokens (:class:`zdebias.features.tokenize.Tokenizer`): the
    features' tokenisation, and the lengths ``inspect`` reports."""

    help_panel: ClassVar[str] = "Features"

    token_pattern: str | None = setting(
        None,
        "Regular expression of a word token, applied to all text (default: \\w+(?:'\\w+)?, "
        "and one token per character in scripts written without spaces: Chinese, Japanese, "
        "Thai, ...).",
    )
    lowercase: bool = setting(True, "Lower-case tokens before n-grams.", cli=False)
    segmenter: Literal["jieba"] | None = setting(
        None,
        "Cut Chinese into words instead of characters: jieba (the package jieba, zdebias's zh "
        "extra).",
        exclude_if=lambda value: value is None,  # unset: stage hashes as before the setting
    )

    def token_kwargs(self) -> dict[str, Any]:
        """The tokeniser settings that are set, by keyword (for ``Tokenizer.from_settings``)."""
        out: dict[str, Any] = {} if self.lowercase else {"lowercase": False}
        for key in ("token_pattern", "segmenter"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


class FeatureSettings(TokenSettings):
    """Which features to extract and how; ``None`` means the feature's own default."""

    help_panel: ClassVar[str] = "Features"

    features: list[str] | None = setting(
        None,
        "Comma-separated feature groups (ngrams, unigrams, bigrams, hypo-len, len-ratio, "
        "lex-overlap, hypo-only, null) or pkg.module:function paths. Default: all (n-grams, "
        "length and null for single-text data).",
    )
    seed: int = setting(
        DEFAULT_SEED,
        "Random seed (z-filter order, hypothesis-only folds, AFLite's train subsets, "
        "cartography's ties).",
        deprecated=("--shuffle-seed",),
    )
    ngram_range: tuple[int, int] | None = setting(None, "n-gram sizes, e.g. 1,2.", cli=False)
    ngram_fields: list[str] | None = setting(None, "Fields for n-grams.", cli=False)
    hypo_len_bins: list[int] | None = setting(None, "Hypothesis length bin edges.", cli=False)
    text_len_bins: list[int] | None = setting(None, "Text length bin edges.", cli=False)
    len_ratio_bins: list[float] | None = setting(None, "Length-ratio bin edges.", cli=False)
    lex_overlap_thresholds: list[float] | None = setting(
        None, "Lexical-overlap thresholds.", cli=False
    )
    hypo_only_model: str | None = setting(
        None,
        "Trained hypothesis-only classifier folder for the hypo-only feature (default: a "
        "cross-fitted linear model on hypothesis n-grams).",
    )
    hypo_only_classifier: Literal["nb", "logreg"] | None = setting(
        None, "Default hypo-only model: nb (fast) or logreg."
    )
    hypo_only_folds: int | None = setting(
        None, "Cross-fitting folds of the hypothesis-only model (default: 5).", ge=2
    )
    num_proc: int | None = setting(
        None,
        "Processes for feature extraction and for writing large outputs, as HF datasets' "
        "num_proc (default 1; 0: every core; `zdebias filter` on a JSONL file of 64 MB or more: "
        "every core, each process reading its part of the file; from 2 MB: a second process "
        "writing the output). The output is the same for any number.",
        ge=0,
    )
    feature_options: dict[str, Any] = setting(
        default_factory=dict,
        help="Settings of plugin features (pkg.module:function), by keyword.",
        cli=False,
    )

    @field_validator("features")
    @classmethod
    def _known_features(cls, value: list[str] | None) -> list[str] | None:
        """Fail on a typo before any data is read (the error lists the valid names)."""
        from zdebias.features.catalogue import get_feature

        for name in value or []:
            get_feature(name)
        return value

    @model_validator(mode="before")
    @classmethod
    def _legacy_feature_settings(cls, data: Any) -> Any:
        """Recipes before 0.2 nested these settings under ``feature_settings``."""
        if isinstance(data, dict) and "feature_settings" in data:
            import logging

            data = dict(data)
            nested = dict(data.pop("feature_settings") or {})
            logging.getLogger("zdebias").warning(
                "feature_settings is deprecated; write its keys (%s) next to the other settings",
                ", ".join(nested) or "none",
            )
            known = set(FeatureSettings.model_fields)
            options = dict(data.get("feature_options") or {})
            for key, value in nested.items():
                where = data if key in known else options
                if key in where:  # one setting given twice: never silently one of them
                    raise ValueError(f"{key!r} is given both in feature_settings and beside it")
                where[key] = value
            if options:
                data["feature_options"] = options
        return data

    def feature_kwargs(self) -> dict[str, Any]:
        """The settings the feature functions read, by keyword (only those that are set)."""
        out: dict[str, Any] = {"seed": self.seed, **self.token_kwargs()}
        for key in (
            "ngram_range",
            "ngram_fields",
            "hypo_len_bins",
            "text_len_bins",
            "len_ratio_bins",
            "lex_overlap_thresholds",
            "hypo_only_model",
            "hypo_only_classifier",
            "hypo_only_folds",
            "num_proc",
        ):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return {**out, **self.feature_options}


__all__ = ["FeatureSettings", "TokenSettings"]
