"""Settings of the generator operations (docs/design.md §6): training, debiasing and sampling.

Declared once here; :func:`~zdebias.generation.trainer.train_generator`,
:func:`~zdebias.generation.sample.sample_generator`, the recipe stages
(``zdebias.pipeline.stages.generation``) and the commands (``zdebias.commands.generate``) all
take these objects. Only pydantic, the standard library and the z-filter's settings load here;
torch only inside :func:`fast_bf16`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar, cast

from pydantic import create_model, field_validator, model_validator
from pydantic.fields import FieldInfo

from zdebias.executor import ExecutorSettings
from zdebias.generation.backends import BackendName, backend_help
from zdebias.models.trainer_settings import TrainerSettings
from zdebias.settings import DEFAULT_SEED, Settings, setting
from zdebias.stats.settings import ZFilterSettings

T = TypeVar("T")
#: which tokens the ``<null>`` feature's unlikelihood covers (docs/design.md §6)
NullMask = Literal["hypothesis", "label"]
#: length-grouped training batches: on, off, or auto (on with a CUDA GPU)
GroupByLength = Literal["auto", "on", "off"]


def fast_bf16() -> bool:
    """Whether bfloat16 is fast here: a CUDA GPU, or a CPU with AVX-512 BF16 or AMX."""
    import torch

    if torch.cuda.is_available():
        return True
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


class GeneratorSettings(TrainerSettings):
    """Fine-tuning a generator (GD-NLI §2, Table 7): L_MLE + λ·L_consistency.

    Checkpoints, ``report_to`` and ``--set`` (``extra``) come from :class:`TrainerSettings`;
    a keyword of :meth:`of` that is not a field goes to ``extra``.
    """

    help_panel: ClassVar[str] = "Training"

    epochs: float = setting(
        5.0, "Training epochs (Table 7: 5).", gt=0, deprecated=("num_train_epochs",)
    )
    learning_rate: float = setting(
        1e-5, "Learning rate (Table 7: 1e-5).", gt=0, deprecated=("--lr", "lr")
    )
    batch_size: int = setting(
        24,
        "Training sequences per device batch (Table 7: 24).",
        ge=1,
        deprecated=("per_device_train_batch_size",),
    )
    gradient_accumulation_steps: int = setting(1, "Batches per optimizer step.", ge=1)
    max_length: int = setting(128, "Longest sequence in tokens; longer ones are dropped.", ge=8)
    max_steps: int = setting(-1, "Stop after this many steps (-1: run all epochs).", ge=-1)
    precision: Literal["fp32", "bf16", "auto"] = setting(
        "fp32", "fp32; bf16: bfloat16 autocast; auto: bf16 where the hardware runs it fast."
    )
    seed: int = setting(DEFAULT_SEED, "Random seed (subset, perturbed labels, training).")
    consistency_weight: float = setting(
        0.5, "λ of the label-consistency unlikelihood (0: MLE only).", ge=0
    )
    subset: int | None = setting(
        None,
        "Train on N records drawn at random (seeded by --seed), kept in file order.",
        ge=1,
        deprecated=("--limit",),
    )
    group_by_length: GroupByLength = setting(
        "auto",
        "Batch sequences of similar length (less padding; seeded, every row once an epoch): "
        "on, off, or auto (on with a CUDA GPU, off on CPU, where it would change the "
        "trained weights).",
        exclude_if=lambda value: value == "auto",  # unset: runs and stage hashes as before
    )

    @field_validator("group_by_length", mode="before")
    @classmethod
    def _on_off(cls, value: Any) -> Any:
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value

    def grouped(self, device_type: str) -> bool:
        """Whether batches are length-grouped on a ``device_type`` (``cuda``, ``cpu``...)."""
        if self.group_by_length == "auto":
            return device_type == "cuda"
        return self.group_by_length == "on"

    def pick(self, records: Sequence[T]) -> list[T]:
        """``records``, or ``subset`` of them drawn at random (seeded), kept in file order."""
        if self.subset is None or self.subset >= len(records):
            return list(records)
        keep = sorted(random.Random(self.seed).sample(range(len(records)), self.subset))
        return [records[i] for i in keep]

    def training_arguments(self, *, progress: bool = True) -> dict[str, Any]:
        """The ``GeneratorTrainingArguments`` fields these settings set (``extra`` wins)."""
        out: dict[str, Any] = {
            "num_train_epochs": self.epochs,
            "learning_rate": self.learning_rate,
            "per_device_train_batch_size": self.batch_size,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
            "max_length": self.max_length,
            "max_steps": self.max_steps,
            "seed": self.seed,
            "consistency_weight": self.consistency_weight,
            "disable_tqdm": not progress,
        }
        if self.precision == "bf16" or (self.precision == "auto" and fast_bf16()):
            import torch

            out["bf16"] = True
            if not torch.cuda.is_available():
                out["use_cpu"] = True  # HF refuses CPU bf16 unless told the run is on CPU
        return {**out, **self.extra}


class DebiasSettings(GeneratorSettings):
    """Debiasing a generator (GD-NLI §4.1): L_MLE(Z) + α·masked L_UL(Z⁻), λ off by default."""

    alpha: float = setting(
        1.0, "α of the masked unlikelihood loss on Z⁻.", ge=0, deprecated=("debias_alpha",)
    )
    consistency_weight: float = setting(
        0.0, "λ during debiasing (the paper's debiasing loss, GD-NLI §4.1, has none: 0).", ge=0
    )
    null_mask: NullMask = setting(
        "hypothesis",
        "Unlikelihood tokens of the <null> feature: hypothesis (every hypothesis token, the "
        "paper's rule for non-n-gram features) or label (the label token only).",
    )

    def training_arguments(self, *, progress: bool = True) -> dict[str, Any]:
        """As :meth:`GeneratorSettings.training_arguments`, with α (``debias_alpha``)."""
        return {"debias_alpha": self.alpha, **super().training_arguments(progress=progress)}


class SampleSettings(ExecutorSettings):
    """Sampling a generator into resumable shards (docs/design.md §6); on Ray actors with
    ``ray``."""

    help_panel: ClassVar[str] = "Sampling"
    #: the settings that decide which samples a run produces: a resumed run must keep them
    RUN_KEYS: ClassVar[tuple[str, ...]] = (
        "batch_size",
        "top_p",
        "top_k",
        "temperature",
        "seed",
        "shard_size",
        "backend",
    )

    n: int = setting(..., "Unique well-formed samples to write.", ge=1)
    batch_size: int = setting(64, "Sequences per sampling round.", ge=1)
    top_p: float = setting(0.9, "Nucleus sampling mass (1: off).")
    top_k: int = setting(0, "Sampling top-k (0: off).", ge=0)
    temperature: float = setting(1.0, "Sampling temperature.", gt=0)
    shard_size: int = setting(10_000, "Samples per shard file.", ge=1)
    backend: BackendName = setting("hf", backend_help())
    device: str | None = setting(
        None, "auto (GPU when available), cpu, cuda, cuda:1 ... (default: auto)."
    )

    @field_validator("device")
    @classmethod
    def _auto_device(cls, value: str | None) -> str | None:
        return None if value in (None, "auto") else value

    dtype: Literal["float32", "bfloat16", "float16", "auto"] | None = setting(
        None,
        "Model dtype (default: bfloat16 on CUDA, float32 elsewhere; auto: bfloat16 where the "
        "hardware runs it fast).",
    )
    threads: int | None = setting(
        None,
        "CPU threads of the hf backend while it samples (default: torch's, one per core; 1 is "
        "much faster on cores other jobs keep busy).",
        ge=1,
    )
    decode_loop: Literal["auto", "carry", "refill"] = setting(
        "auto",
        "Decoding loop of the hf backend: carry (a batch's rows start together, ended ones "
        "dropped), refill (fixed slots on a static KV cache, an ended row replaced by the "
        "next at once); auto: refill on CUDA, carry elsewhere.",
        exclude_if=lambda value: value == "auto",  # unset: runs and stage hashes as before it
    )
    decode_batch: int | None = setting(
        None,
        "Rows the hf backend decodes at once (default: 128 with carry; with refill on CUDA as "
        "many as 80% of the free GPU memory holds, up to 2048; a resumed run keeps the slots "
        "it began with). Pin it on Ray, whose actors each pick their own.",
        ge=1,
        exclude_if=lambda value: value is None,
    )
    compile: bool = setting(
        False,
        "hf backend with the refill loop: compile its decoding step (torch.compile; CUDA "
        "graphs on a GPU). Pays a compile of a minute or more per process.",
        exclude_if=lambda value: not value,
    )
    max_shards: int | None = setting(
        None, "Stop after writing this many shards (rerun to resume).", ge=1
    )
    merge: bool = setting(True, "Also write samples.jsonl (all shards) when complete.")
    patience_rounds: int = setting(
        200, "Fail after this many rounds in a row without a new sample.", ge=1
    )
    seed: int = setting(DEFAULT_SEED, "Sampling seed (round r draws with a seed from it and r).")
    keep_dropped: bool = setting(
        True, "Write every dropped output to dropped-NNNNN.jsonl.", cli=False
    )
    worker: str | None = setting(
        None,
        "I/N: be worker I (0-based) of N: sample rounds r with r % N == I into "
        "OUT/worker-I-of-N/ (resumable); then `zdebias sample merge OUT`.",
    )
    workers: int = setting(
        1,
        "Run N workers as parallel processes (one GPU each when several are visible), "
        "then merge them.",
        ge=1,
    )
    tensor_parallel_size: int = setting(
        1, "GPUs per vLLM engine (vLLM's tensor_parallel_size; --backend vllm).", ge=1
    )
    per_premise: str | None = setting(
        None,
        "With --premises and backend hf/vllm: force the labels, LABEL=COUNT rows per label "
        "and premise (e.g. entailment=1,neutral=1,contradiction=1); default: one row per "
        "premise, its label sampled by the generator.",
    )
    attempts: int = setting(
        4,
        "With --premises and backend hf/vllm: decodes per row before its premise (and label) "
        "goes short; a malformed output or a repeat within its round is decoded again.",
        ge=1,
    )

    cells_top: int | None = setting(
        None,
        "With --cells: fill the cells of the K most biased features that can be sampled "
        "(default: all of them, in order, while their rows fit in --n).",
        ge=1,
    )
    cells_max: int | None = setting(
        None,
        "With --cells: ask at most N rows of one cell (default: all the rows it needs), so "
        "--n spreads over more cells.",
        ge=1,
        exclude_if=lambda value: value is None,  # unset: runs and stage hashes as before it
    )

    @field_validator("worker")
    @classmethod
    def _worker(cls, value: str | None) -> str | None:
        if value is None:
            return None
        index, _, total = value.partition("/")
        if not (index.strip().isdigit() and total.strip().isdigit()):
            raise ValueError(f"worker must be I/N (e.g. 0/4), not {value!r}")
        i, n = int(index), int(total)
        if not 0 <= i < n:
            raise ValueError(f"worker I/N needs 0 <= I < N, not {value!r}")
        return f"{i}/{n}"

    @model_validator(mode="after")
    def _one_kind_of_worker(self) -> SampleSettings:
        if self.worker is not None and self.workers > 1:
            raise ValueError("give worker I/N (one worker) or workers N (all of them), not both")
        if self.on_ray and (self.worker is not None or self.workers > 1):
            raise ValueError("ray runs the rounds on its actors: drop worker / workers")
        return self

    def worker_index(self) -> tuple[int, int] | None:
        """``(I, N)`` when these settings run worker I of N, else None."""
        if self.worker is None:
            return None
        i, n = self.worker.split("/")
        return int(i), int(n)

    @field_validator("top_p")
    @classmethod
    def _top_p(cls, value: float) -> float:
        if not 0 < value <= 1:
            raise ValueError(f"top-p must be in (0, 1], not {value}")
        return value

    def run_settings(self) -> dict[str, Any]:
        """The :attr:`RUN_KEYS` settings, as the sampler's ``state.json`` records them."""
        return {k: getattr(self, k) for k in self.RUN_KEYS}


class ClientSettings(Settings):
    """How to reach an instruction model: an OpenAI-compatible server (``openai``) or the
    model in-process (``local``); shared by prompted sampling and prompted counterfactuals."""

    help_panel: ClassVar[str] = "Instruction model (--backend openai/local)"
    #: the client settings that decide what a run produces (kept in state.json)
    RUN_KEYS: ClassVar[tuple[str, ...]] = ("endpoint", "max_tokens")

    base_url: str | None = setting(
        None,
        "OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (/v1 is added to a bare host).",
    )
    api_key_env: str = setting(
        "OPENAI_API_KEY",
        "Name of the environment variable holding the API key (the key itself is never "
        "logged or saved; unset: no key is sent).",
    )
    endpoint: Literal["chat", "completions"] = setting(
        "chat", "chat: /chat/completions with messages; completions: /completions, raw prompt."
    )
    max_tokens: int = setting(48, "Longest answer in tokens; a cut-off answer is dropped.", ge=4)
    concurrency: int = setting(4, "Requests in flight at once (openai backend).", ge=1)
    max_retries: int = setting(
        5, "Retries of a request after 429, 5xx, a timeout or a lost connection.", ge=0
    )
    timeout: float = setting(60.0, "Seconds to wait for one response.", gt=0)
    retry_backoff: float = setting(
        1.0, "First retry waits this many seconds, doubling each time (Retry-After wins).", ge=0
    )

    def run_settings(self) -> dict[str, Any]:
        """The :attr:`RUN_KEYS` settings, as the sampler's ``state.json`` records them."""
        return {k: getattr(self, k) for k in self.RUN_KEYS}


class PromptSettings(ClientSettings):
    """Prompted generation (``--backend openai`` / ``local``): an instruction model asked for
    one hypothesis per (premise, target label), with few-shot examples from the data."""

    help_panel: ClassVar[str] = "Prompting (--backend openai/local)"
    RUN_KEYS: ClassVar[tuple[str, ...]] = ("endpoint", "few_shot", "avoid_biased", "max_tokens")

    few_shot: int = setting(
        3, "Examples of the target label shown per request (drawn, seeded, from --examples).", ge=0
    )
    avoid_biased: int = setting(
        0,
        "Bias-aware prompting: list the K most biased hypothesis words/phrases of the target "
        "label (top z in --examples) as ones to avoid (0: off).",
        ge=0,
    )


def _without_old_batch_flag() -> type[ZFilterSettings]:
    """The z-filter settings without 0.1's ``--batch-size`` spelling of
    ``--zfilter-batch-size``: on debias-generator ``--batch-size`` is the training batch."""
    info = ZFilterSettings.model_fields["zfilter_batch_size"]
    extra = cast("dict[str, dict[str, Any]]", info.json_schema_extra)  # settings.setting's
    cli = dict(extra["cli"])
    cli["deprecated"] = [d for d in cli["deprecated"] if d != "--batch-size"]
    field = FieldInfo.merge_field_infos(info, json_schema_extra={"cli": cli})
    return create_model(
        "ZFilterSettings", __base__=ZFilterSettings, zfilter_batch_size=(int | None, field)
    )


#: the z-filter settings of ``debias-generator`` (its ``--batch-size`` is the training batch)
DebiasZFilterSettings = _without_old_batch_flag()


__all__ = [
    "ClientSettings",
    "DebiasSettings",
    "DebiasZFilterSettings",
    "GeneratorSettings",
    "NullMask",
    "PromptSettings",
    "SampleSettings",
    "fast_bf16",
]
