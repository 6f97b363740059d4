"""Settings of the classifier operations: training, prediction, confidence filter (evaluation's
are in :mod:`zdebias.evaluation.settings`).

Each is declared once here and shared by the library (``train_classifier(train, dev, out,
settings)``), the recipe stage (its config subclasses the settings and adds references) and
the CLI (options generated from the fields). Importing this module loads no torch.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import field_validator

from zdebias.errors import ConfigError
from zdebias.executor import ExecutorSettings
from zdebias.models.trainer_settings import TrainerSettings
from zdebias.settings import DEFAULT_SEED, setting

#: the loss names of :data:`zdebias.classify.losses.LOSSES` (a test keeps them equal)
LOSS_NAMES = ("ce", "poe", "learned-mixin", "learned-mixin-h", "conf-reg")
#: what a classifier reads: premise + hypothesis, the hypothesis alone, or one text
InputKind = Literal["pair", "hypothesis-only", "text"]
Device = Literal["auto", "cpu", "cuda"]
#: where PoE's bias distribution comes from (docs/design.md §8)
BiasMode = Literal["joint", "frozen"]
#: the confidence filter's acceptance rules (docs/design.md §7, §12)
JudgeRule = Literal["tau", "delta-p"]
#: folds of ``cross_fit_predictions`` when no ``cross_fit`` is set

_DEVICE_HELP = "auto (the GPU when there is one), cpu or cuda."


def _auto_device(value: Any) -> Any:
    """``device=None`` (the 0.1 library default) means ``auto``."""
    return "auto" if value is None else value


def _path_text(value: Any) -> Any:
    """A path given as ``os.PathLike`` is kept as its text."""
    return os.fspath(value) if isinstance(value, os.PathLike) else value


class InferenceSettings(ExecutorSettings):
    """Running a trained classifier: batch size and device (``zdebias predict``); on Ray
    actors with ``ray``."""

    help_panel: ClassVar[str] = "Inference"

    batch_size: int = setting(64, "Examples per forward pass.", ge=1)
    device: Device = setting("auto", _DEVICE_HELP)

    _auto = field_validator("device", mode="before")(_auto_device)


class ConfidenceSettings(InferenceSettings):
    """Confidence filter (GD-NLI §2.2.2, docs/design.md §7): keep samples with p(label) > τ, or
    (docs/design.md §12, DISCO) whose p(label) rises by more than δ from a reference pair."""

    help_panel: ClassVar[str] = "Confidence filter"

    threshold: float = setting(
        0.95,
        "τ: keep a sample when the classifier gives its label a probability above this (Table 8).",
        ge=0,
        le=1,
        deprecated=("--tau", "tau"),
    )
    rule: JudgeRule = setting(
        "tau",
        "Acceptance rule: tau (p(label) above --threshold; the paper) or delta-p (p(label) "
        "rises by more than --delta from the sample's reference pair; DISCO).",
    )
    delta: float = setting(
        0.25, "delta-p rule: the rise of p(label) a sample must exceed (DISCO: 0.25).", ge=0, le=1
    )
    originals: str | None = setting(
        None,
        "The records counterfactual edits were made from (matched by meta.source_id): their "
        "reference pairs under the delta-p rule.",
    )
    reject_added_negation: bool = setting(
        False, "Also reject contradictions whose hypothesis adds a negation word (DISCO)."
    )
    max_overlap: float | None = setting(
        None,
        "Also reject samples whose hypothesis and premise share more than this Jaccard word "
        "overlap (DISCO: 0.35).",
        ge=0,
        le=1,
    )
    fidelity_judge: str | None = setting(
        None,
        "A held-out classifier folder: the summary's label_fidelity, its agreement with the "
        "samples' labels.",
    )
    hypothesis_only: str | None = setting(
        None,
        "A hypothesis-only classifier folder: the summary's hypothesis_only_accuracy on the "
        "samples.",
    )

    _paths = field_validator("originals", "fidelity_judge", "hypothesis_only", mode="before")(
        _path_text
    )


@dataclass(frozen=True)
class Schedule:
    """A classifier's optimisation schedule: peak learning rate, linear warm-up then constant,
    epochs, and a floor in optimizer steps (small data repeats epochs until it is reached)."""

    learning_rate: float
    warmup_steps: int
    epochs: float
    min_steps: int

    def __str__(self) -> str:
        return (
            f"lr {self.learning_rate:g}, {self.warmup_steps} warm-up "
            f"step{'' if self.warmup_steps == 1 else 's'}, "
            f"{self.epochs:g} epoch{'' if self.epochs == 1 else 's'}, at least "
            f"{self.min_steps} step{'' if self.min_steps == 1 else 's'}"
        )

    def epoch_steps(self, steps_per_epoch: int) -> int:
        """Optimizer steps of the epochs alone, without the floor."""
        return math.ceil(steps_per_epoch * self.epochs)

    def total_steps(self, steps_per_epoch: int, max_steps: int = -1) -> int:
        """Optimizer steps of a training with ``steps_per_epoch``: ``max_steps`` when set,
        else the epochs' steps raised to the floor."""
        if max_steps > 0:
            return max_steps
        return max(self.epoch_steps(steps_per_epoch), self.min_steps)


#: GD-NLI Table 9 (BERT-base on all of SNLI / MNLI): the schedule of any model but minilm
PAPER_SCHEDULE = Schedule(learning_rate=1e-5, warmup_steps=2000, epochs=5.0, min_steps=0)
#: the packaged MiniLM's schedule, chosen by the sweep in docs/training.md ("A schedule that
#: learns"): it learned in every seed on 543 to 19,993 SNLI pairs
MINILM_SCHEDULE = Schedule(learning_rate=5e-5, warmup_steps=30, epochs=2.0, min_steps=300)


def default_schedule(model: str) -> Schedule:
    """The schedule a classifier of ``model`` trains with when none is given."""
    return MINILM_SCHEDULE if str(model) == "minilm" else PAPER_SCHEDULE


class ClassifierSettings(TrainerSettings):
    """Fine-tuning a classifier (docs/design.md §8): GD-NLI Table 9 defaults, debiasing losses.

    Checkpoints, ``report_to`` and ``--set`` (``extra``) come from :class:`TrainerSettings`.
    """

    help_panel: ClassVar[str] = "Training"

    model: str = setting("minilm", "Encoder: minilm (packaged), a local folder or a hub name.")
    input_kind: InputKind | None = setting(
        None,
        "What the model reads: pair, hypothesis-only or text (default: pair for NLI, text "
        "otherwise).",
        deprecated=("--input", "input"),
    )
    loss: str = setting(
        "ce",
        f"Training loss: {', '.join(LOSS_NAMES)} (learned-mixin and conf-reg need --bias-model; "
        "poe trains its own bias head unless given one).",
    )
    bias_model: str | None = setting(
        None,
        "Hypothesis-only classifier folder (the bias model of poe / learned-mixin / conf-reg).",
    )
    bias_out_of_fold: bool = setting(
        False,
        "Frozen --bias-model trained with --cross-fit: its out-of-fold probabilities for the "
        "training rows it was cross-fitted on (no row's bias from a model that saw its label); "
        "the model's own for the others.",
        exclude_if=lambda value: not value,  # unset: stage hashes as before the setting
    )
    teacher_model: str | None = setting(
        None, "conf-reg teacher: a classifier trained with ce on the same data."
    )
    bias_mode: BiasMode | None = setting(
        None,
        "PoE bias: joint (a hypothesis-only head on the shared encoder, trained with the model, "
        "no gradient into the encoder; robust-nli, the paper) or frozen (--bias-model's "
        "probabilities). Default: frozen when --bias-model is given, else joint.",
    )
    beta: float = setting(1.0, "PoE β (weight of log b).")
    gamma: float = setting(
        0.0, "PoE γ (weight of CE(l, b); trains the bias head in joint mode).", ge=0
    )
    entropy_weight: float | None = setting(
        None, "Learned-Mixin entropy penalty (default 0, or 0.03 for learned-mixin-h).", ge=0
    )
    seed: int = setting(DEFAULT_SEED, "Random seed (training, subsets, folds).")
    learning_rate: float | None = setting(
        None,
        "Peak learning rate (default: the model's schedule, see --min-steps).",
        gt=0,
        deprecated=("--lr", "lr"),
    )
    batch_size: int = setting(32, "Training batch size.", ge=1)
    epochs: float | None = setting(None, "Training epochs (default: the model's schedule).", gt=0)
    max_steps: int = setting(
        -1, "Stop after exactly N steps (overrides --epochs and --min-steps; -1: off).", ge=-1
    )
    min_steps: int | None = setting(
        None,
        "Train at least N optimizer steps, repeating epochs on small data. Default schedule: "
        f"minilm {MINILM_SCHEDULE}; any other model {PAPER_SCHEDULE} (GD-NLI Table 9).",
        ge=0,
    )
    warmup_steps: int | None = setting(
        None, "Linear warm-up steps, then constant (default: the model's schedule).", ge=0
    )
    max_length: int = setting(128, "Max tokens per input.", ge=8)
    patience: int = setting(
        3, "Stop after N evaluations without a better dev accuracy (0: never).", ge=0
    )
    eval_steps: int | None = setting(None, "Evaluate every N steps instead of every epoch.", ge=1)
    eval_batch_size: int = setting(128, "Dev evaluation batch size.", ge=1)
    group_by_length: bool = setting(
        True, "Batch training examples of similar length together (less padding)."
    )
    device: Device = setting("auto", _DEVICE_HELP)
    subset: int | None = setting(
        None,
        "Train on a seeded random N examples (kept in file order).",
        ge=1,
        deprecated=("--sample", "sample"),
    )
    dev_subset: int | None = setting(
        None,
        "Use a seeded random N dev examples.",
        ge=1,
        deprecated=("--dev-sample", "dev_sample"),
    )
    cross_fit: int | None = setting(
        None,
        "Hypothesis-only models: also write K-fold out-of-fold predictions for every training "
        "record to OUT/cross_fit_predictions.jsonl.",
        ge=2,
    )
    keep_folds: bool = setting(False, "Keep the cross-fit fold models in OUT/folds/.")

    _auto = field_validator("device", mode="before")(_auto_device)

    _paths = field_validator("model", "bias_model", "teacher_model", mode="before")(_path_text)

    @field_validator("loss")
    @classmethod
    def _known_loss(cls, value: str) -> str:
        if value not in LOSS_NAMES:
            raise ValueError(f"unknown loss {value!r}; expected one of {', '.join(LOSS_NAMES)}")
        return value

    def schedule(self) -> Schedule:
        """The schedule this training uses: the given values over the model's default
        (:func:`default_schedule`)."""
        base = default_schedule(self.model)
        return Schedule(
            learning_rate=base.learning_rate if self.learning_rate is None else self.learning_rate,
            warmup_steps=base.warmup_steps if self.warmup_steps is None else self.warmup_steps,
            epochs=base.epochs if self.epochs is None else self.epochs,
            min_steps=base.min_steps if self.min_steps is None else self.min_steps,
        )

    def effective_bias_mode(self) -> BiasMode | None:
        """``joint`` or ``frozen`` for losses that use a bias model; ``None`` for ``ce``."""
        if self.loss == "ce":
            return None
        if self.bias_mode is not None:
            return self.bias_mode
        return "frozen" if self.bias_model is not None or self.loss != "poe" else "joint"

    def check(self) -> None:
        """Settings that only make sense together (fails before any data is read)."""
        mode = self.effective_bias_mode()
        if mode == "joint" and self.loss != "poe":
            raise ConfigError(
                f"bias_mode joint is for loss poe; loss {self.loss!r} needs a frozen "
                "--bias-model (--bias-mode frozen)"
            )
        if mode == "joint" and self.bias_model is not None:
            raise ConfigError(
                "--bias-model is used with --bias-mode frozen; joint PoE trains its own "
                "hypothesis-only head (drop --bias-model or pass --bias-mode frozen)"
            )
        if mode == "joint" and self.input_kind not in (None, "pair"):
            raise ConfigError("joint PoE needs premise/hypothesis pairs (--input-kind pair)")
        if self.cross_fit is not None and self.input_kind != "hypothesis-only":
            raise ConfigError(
                "cross_fit is for hypothesis-only models: set input_kind hypothesis-only "
                "(--input-kind hypothesis-only)"
            )


def torch_device(device: str | None) -> str | None:
    """The device to load a model on: ``None`` (the GPU when there is one) for ``auto``."""
    return None if device in (None, "auto") else device


R = TypeVar("R")


def subset_records(records: Sequence[R], n: int | None, seed: int) -> list[R]:
    """A seeded random subset of ``n`` records, kept in file order (all when ``n`` is None)."""
    if n is None or n >= len(records):
        return list(records)
    if n <= 0:
        raise ConfigError(f"subset size must be positive, got {n}")
    import numpy as np

    picked = np.sort(np.random.default_rng(seed).choice(len(records), size=n, replace=False))
    return [records[i] for i in picked]


__all__ = [
    "LOSS_NAMES",
    "BiasMode",
    "ClassifierSettings",
    "ConfidenceSettings",
    "Device",
    "InferenceSettings",
    "InputKind",
    "JudgeRule",
    "subset_records",
    "torch_device",
]
