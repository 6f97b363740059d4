"""Settings of the AutoCAD operations (docs/design.md §10): rationales, infiller, generation,
metrics.

Each is declared once here and shared by the library (``extract_rationales(clf, records,
settings)``, ``train_infiller(records, out, settings, ...)``, ``generate_counterfactuals(
infiller, clf, records, settings)``, ``counterfactual_metrics(records, settings)``), the recipe
stage (its config subclasses the settings and adds references) and the CLI (options generated
from the fields). Importing this module loads no torch.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, Literal

from pydantic import field_validator

from zdebias.models.trainer_settings import TrainerSettings
from zdebias.settings import DEFAULT_SEED, Settings, setting

#: which fields of a pair may hold rationale (or random) spans; single texts use ``text``
Fields = Literal["both", "premise", "hypothesis"]
#: where the masked spans come from: the rationale step, or random spans (the baseline)
SpansMode = Literal["rationale", "random"]
Arch = Literal["auto", "seq2seq", "bert2bert", "causal"]
#: what saliency differentiates: the gold label's logit (the paper) or the cross-entropy loss
SaliencyTarget = Literal["logit", "loss"]
#: counterfactual target labels per example: one seeded random other label (the paper), or all
Targets = Literal["one", "all"]

_FIELDS_HELP = (
    "Pair tasks: spans in both fields (AutoCAD), the premise only, or the hypothesis only."
)
_RATIO_HELP = "Random spans: share of words masked."


class RationaleSettings(Settings):
    """AutoCAD step 1: rationale words by gradient saliency (AutoCAD §3.1)."""

    help_panel: ClassVar[str] = "Rationales"

    method: str = setting(
        "gradient-norm", "Saliency method: gradient-norm or gradient-x-input (or registered)."
    )
    target: SaliencyTarget = setting(
        "logit",
        "Differentiate the gold label's logit (AutoCAD: 'the output logit for label y') or "
        "its cross-entropy loss.",
    )
    ratio: float = setting(0.3, "π: share of words picked as rationale.", gt=0, le=1)
    min_score: float = setting(0.3, "Drop picked words below this (normalised) saliency.", ge=0)
    min_confidence: float = setting(0.8, "Keep examples with p(gold) above this.", ge=0, le=1)
    require_correct: bool = setting(
        True,
        "Keep only examples the classifier predicts correctly.",
        deprecated=("--correct-only", "--any-prediction=false"),
    )
    fields: Fields = setting("both", _FIELDS_HELP)
    normalize: Literal["text", "all"] = setting(
        "text",
        "Divide scores by the max over the text's tokens (text) or over all input tokens "
        "incl. [CLS]/[SEP] (all).",
    )
    batch_size: int = setting(16, "Examples per saliency batch.", ge=1)


class InfillSettings(TrainerSettings):
    """AutoCAD step 2: a label-controlled infiller, MLE + α·unlikelihood (AutoCAD §3.2).

    Checkpoints, ``report_to`` and ``--set`` (``extra``) come from :class:`TrainerSettings`.
    """

    help_panel: ClassVar[str] = "Infiller"

    model: str = setting(
        ...,
        "Base model: T5 family, a BERT encoder (bert2bert, e.g. minilm) or a causal LM "
        "(e.g. smollm2); alias, folder or hub name.",
    )
    alpha: float | None = setting(
        None, "Unlikelihood weight α (default 1.0 for pair tasks, 0.3 for single text).", ge=0
    )
    arch: Arch = setting("auto", "auto, seq2seq, bert2bert or causal.")
    spans: SpansMode = setting(
        "rationale", "Mask the rationale spans of the data, or random spans (ablation)."
    )
    ratio: float = setting(0.3, _RATIO_HELP, gt=0, le=1)
    fields: Fields = setting("both", _FIELDS_HELP)
    epochs: float = setting(10, "Training epochs.", gt=0)
    batch_size: int = setting(8, "Training batch size.", ge=1)
    learning_rate: float = setting(
        1e-5, "Learning rate (AdamW, constant).", gt=0, deprecated=("--lr", "lr")
    )
    weight_decay: float = setting(0.1, "AdamW weight decay.", ge=0)
    patience: int = setting(
        3, "With dev data: stop after N epochs without a better dev loss.", ge=1
    )
    max_source_length: int = setting(256, "Max source tokens (longer sources are cut).", ge=8)
    max_target_length: int = setting(64, "Max target tokens.", ge=4)
    seed: int = setting(DEFAULT_SEED, "Random seed (training, random spans).")

    @field_validator("model", mode="before")
    @classmethod
    def _path_text(cls, value: Any) -> Any:
        return os.fspath(value) if isinstance(value, os.PathLike) else value


class SelectSettings(Settings):
    """AutoCAD steps 3-4: sample fillers for another label, keep what the classifier flips."""

    help_panel: ClassVar[str] = "Generation"

    targets: Targets = setting(
        "one",
        "Target labels per example: one (a seeded random other label; AutoCAD augments each "
        "example once) or all (every other label).",
    )
    spans: SpansMode = setting("rationale", "rationale (from the data) or random (baseline).")
    n: int = setting(1, "Samples per example and target label.", ge=1)
    top_p: float = setting(0.9, "Nucleus sampling p.", gt=0, le=1)
    temperature: float = setting(0.7, "Sampling temperature.", gt=0)
    ratio: float = setting(0.3, _RATIO_HELP, gt=0, le=1, deprecated=("density",))
    mean_span: float = setting(2.0, "Random spans: mean span length (words).", gt=0, cli=False)
    fields: Fields = setting("both", _FIELDS_HELP)
    max_filler_tokens: int = setting(8, "Longest filler (tokens).", ge=1)
    constrained: bool = setting(
        True,
        "Force the sentinel structure while decoding (every sample parses), or leave the "
        "model free (--no-constrained).",
        deprecated=("--free=false",),
    )
    ban_label_words: bool = setting(True, "Ban the label words inside fillers.", cli=False)
    min_prob: float = setting(0.0, "Also require p(target) >= this.", ge=0, le=1)
    batch_size: int = setting(16, "Examples per generation batch.", ge=1)
    seed: int = setting(DEFAULT_SEED, "Random seed (sampling, random spans).")


class MetricsSettings(Settings):
    """AutoCAD step 5: flip rate, distinct-n and (with ``lm``) perplexity of counterfactuals."""

    help_panel: ClassVar[str] = "Metrics"

    lm: str | None = setting(None, "Causal LM for perplexity (smollm2, folder, hub name).")
    batch_size: int = setting(16, "Examples per classifier batch.", ge=1)

    @field_validator("lm", mode="before")
    @classmethod
    def _path_text(cls, value: Any) -> Any:
        return os.fspath(value) if isinstance(value, os.PathLike) else value


class PromptCounterfactualSettings(Settings):
    """Prompted counterfactuals (an AutoCAD alternative): an instruction model is shown the
    example, its rationale words and a target label, and asked for a minimal edit; the same
    post-selection (the classifier must predict the target) follows."""

    help_panel: ClassVar[str] = "Prompted counterfactuals"

    backend: Literal["openai", "local"] = setting(
        "openai",
        "openai: the model --generator served at --base-url; local: an instruct model "
        "in-process with its chat template (smollm2, a folder or a hub name).",
    )
    targets: Targets = setting(
        "one", "Target labels per example: one (a seeded random other label) or all."
    )
    spans: SpansMode = setting(
        "rationale", "Words shown as the label's reasons: rationale (from the data) or random."
    )
    ratio: float = setting(0.3, _RATIO_HELP, gt=0, le=1)
    fields: Fields = setting(
        "hypothesis", "Pair tasks: the field(s) the model may edit (both, premise, hypothesis)."
    )
    n: int = setting(1, "Answers per example and target label.", ge=1)
    top_p: float = setting(0.9, "Nucleus sampling p.", gt=0, le=1)
    temperature: float = setting(0.7, "Sampling temperature.", gt=0)
    min_prob: float = setting(0.0, "Also require p(target) >= this.", ge=0, le=1)
    batch_size: int = setting(16, "Requests per batch (local: one generate call).", ge=1)
    seed: int = setting(DEFAULT_SEED, "Random seed (targets, random spans, request seeds).")


__all__ = [
    "Arch",
    "Fields",
    "InfillSettings",
    "MetricsSettings",
    "PromptCounterfactualSettings",
    "RationaleSettings",
    "SaliencyTarget",
    "SelectSettings",
    "SpansMode",
    "Targets",
]
