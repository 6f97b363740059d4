"""What every HF ``Trainer``-based training shares: checkpoints, experiment tracking, ``--set``.

:class:`TrainerSettings` is a mixin of the training operations' settings
(``ClassifierSettings``, ``GeneratorSettings`` / ``DebiasSettings``, ``InfillSettings``), so
the four training commands, their recipe stages and their library functions offer the same
``checkpoint_steps``, ``checkpoint_limit``, ``report_to`` and ``--set KEY=VALUE``. Only
pydantic and the standard library load here; :mod:`zdebias.models.checkpoints` does the work.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, field_validator

from zdebias.errors import ConfigError
from zdebias.settings import Settings, cli_meta, setting

#: experiment trackers HF ``Trainer`` reports to (``report_to``)
ReportTo = Literal["none", "tensorboard", "wandb"]
#: how often a run is saved: it does not change what the run trains (nor a recipe's hash)
CHECKPOINT_POLICY = ("checkpoint_steps", "checkpoint_limit")
#: settings a resumed run may change: the checkpoint policy and where it reports to
CHECKPOINT_FIELDS = (*CHECKPOINT_POLICY, "report_to")
#: ``TrainingArguments`` fields zdebias sets itself, and the option that controls each
RESERVED: dict[str, str] = {
    "output_dir": "--out",
    "overwrite_output_dir": "--overwrite",
    "save_strategy": "--checkpoint-steps",
    "save_steps": "--checkpoint-steps",
    "save_total_limit": "--checkpoint-limit",
    "resume_from_checkpoint": "--checkpoint-steps (a rerun resumes by itself)",
    "save_only_model": "--checkpoint-steps (a checkpoint keeps the optimizer, to resume)",
    "logging_dir": "--report-to",
}
#: HF names of settings that zdebias spells otherwise (``--set num_train_epochs`` → ``--epochs``)
HF_NAMES: dict[str, str] = {
    "num_train_epochs": "epochs",
    "per_device_train_batch_size": "batch_size",
    "per_device_eval_batch_size": "eval_batch_size",
}


def parse_sets(value: Any) -> Any:
    """``KEY=VALUE`` strings (``--set``, repeatable) as a dict, values read as YAML."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        return value
    import yaml

    out: dict[str, Any] = {}
    for item in value:
        key, sep, text = str(item).partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"bad --set {item!r}: expected KEY=VALUE")
        if key.strip() in out:  # never last-wins
            raise ConfigError(f"--set {key.strip()} is given twice; give each key once")
        out[key.strip()] = yaml.safe_load(text) if text.strip() else ""
    return out


class TrainerSettings(Settings):
    """Checkpoints, tracking and ``TrainingArguments`` pass-through of a training operation."""

    help_panel: ClassVar[str] = "Checkpoints and tracking"

    checkpoint_steps: int = setting(
        500,
        "Save a resumable checkpoint every N optimizer steps (0: never); a run that was cut "
        "resumes from the last one when started again with the same --out.",
        ge=0,
    )
    checkpoint_limit: int = setting(1, "Keep the newest N checkpoints.", ge=1)
    report_to: ReportTo = setting(
        "none", "Log training to tensorboard or wandb (needs that package), or none."
    )
    extra: dict[str, Any] = setting(
        default_factory=dict,
        help="Any other TrainingArguments field, KEY=VALUE (repeatable), e.g. "
        "--set logging_steps=5 --set max_grad_norm=0.5.",
        flag="--set",
        repeat=True,
    )

    @field_validator("extra", mode="before")
    @classmethod
    def _sets(cls, value: Any) -> Any:
        return parse_sets(value)

    @field_validator("extra")
    @classmethod
    def _not_shadowed(cls, value: dict[str, Any]) -> dict[str, Any]:
        """``--set`` may not set what a zdebias option sets: one name per concept."""
        for key in value:
            if key in RESERVED:
                raise ValueError(f"--set {key}: zdebias sets it; use {RESERVED[key]}")
            own = HF_NAMES.get(key, key)
            if own in cls.model_fields and own != "extra":
                flag = cli_meta(cls.model_fields[own])["flag"] or "--" + own.replace("_", "-")
                raise ValueError(f"--set {key}: a zdebias setting; use {flag} ({own})")
        return value

    @classmethod
    def of(cls, settings: BaseModel | None = None, /, **overrides: Any) -> Any:
        """As :meth:`Settings.of`; a keyword that is not a field is a ``TrainingArguments``
        field and goes to ``extra`` (``train_generator(..., logging_steps=5)``)."""
        known = set(cls.model_fields)
        for info in cls.model_fields.values():
            known |= {d for d in cli_meta(info)["deprecated"] if not d.startswith("-")}
        passed = {k: overrides.pop(k) for k in list(overrides) if k not in known}
        if passed:
            before = getattr(settings, "extra", {}) if settings is not None else {}
            sets = parse_sets(overrides.get("extra"))
            twice = sorted(set(sets) & set(passed)) if isinstance(sets, dict) else []
            if twice:  # extra=["k=1"] and k=2: one setting given twice
                raise ConfigError(f"{twice[0]} is given twice (in extra and as a keyword)")
            overrides["extra"] = {**before, **sets, **passed}
        return super().of(settings, **overrides)

    def tracking_arguments(self) -> dict[str, Any]:
        """The ``TrainingArguments`` of experiment tracking (``report_to``)."""
        return {"report_to": self.report_to}

    def run_identity(self) -> dict[str, Any]:
        """These settings as a resumed run must keep them (not the checkpoint policy)."""
        return self.model_dump(mode="json", exclude=set(CHECKPOINT_FIELDS))


__all__ = [
    "CHECKPOINT_FIELDS",
    "CHECKPOINT_POLICY",
    "HF_NAMES",
    "RESERVED",
    "ReportTo",
    "TrainerSettings",
    "parse_sets",
]
