"""Train and debias a data generator on HF ``Trainer`` (docs/design.md §6, GD-NLI §2, §4.1,
Table 7).

- :class:`GeneratorTrainingArguments`: ``TrainingArguments`` with the Table 7 defaults (lr 1e-5,
  batch 24, 5 epochs, Adam ε 1e-6, β (0.9, 0.999), constant schedule, max length 128) plus
  λ (``consistency_weight``, 0.5), α (``debias_alpha``, 1.0) and the loss names.
- :class:`GeneratorTrainer`: overrides ``compute_loss`` only (and ``log`` to report the loss
  parts). Per micro-batch, with N = number of target tokens of the (unperturbed) sequences::

      loss = [ Σ_{I∈Z} Σ_t −log p(I_t)                          (mle)
             + α Σ_{I∈Z⁻} Σ_t −log(m_t p + (1−m_t)(1−p))        (masked_unlikelihood)
             + λ Σ_I Σ_{t∈H} −log(1 − p(H_t | l', P, H_<t)) ]  (unlikelihood) / N

  i.e. the paper's summed objectives L_MLE + λ·L_consistency and L_MLE(Z) + α·L_UL(Z⁻) scaled
  by one constant per batch. The perturbed sequence differs from the original only in its
  label token (l' drawn uniformly from the other labels, seeded), so both run in one forward.
- :func:`train_generator` (``zdebias train-generator``) and :func:`debias_generator`
  (fine-tune with Z and masked Z⁻ of a z-filter run: ``zdebias debias-generator`` and the
  recipe stage compose :func:`~zdebias.stats.zfilter.z_filter` and this). Both save
  checkpoints every ``checkpoint_steps`` and resume from them when started again
  (:mod:`zdebias.models.checkpoints`).

Speed (issue 28): the loss parts come from one log p per row kind
(:func:`~zdebias.generation.losses.objective_parts`), and a step reads nothing back from the
device: the token counts and "does this batch hold Z⁻ rows" are host ints from the collator,
the loss parts are summed on the device until logged. ``group_by_length`` (auto: on with a
GPU) batches sequences of similar length (:class:`~zdebias.models.batching.LengthGroupedSampler`);
packing several sequences into one row was not chosen: the consistency copy and the Z⁻ mask
are per sequence, and keeping packed sequences apart needs variable-length attention kernels
(flash-attention) that the CPU path and most models' default attention lack. On a GPU,
batches are padded to a multiple of 8 (few distinct shapes) and copied pinned, non-blocking.
The summary's ``throughput`` gives model tokens/s, achieved TFLOP/s and MFU
(:mod:`zdebias.models.throughput`) and the padding share.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from transformers import (
    Trainer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

from zdebias.data.labels import Task, get_task
from zdebias.data.schema import Record
from zdebias.data.writers import check_out_dir, publish_dir, write_json
from zdebias.errors import ConfigError
from zdebias.generation.format import (
    EncodedExample,
    GeneratorFormat,
    add_format_tokens,
    encode_record,
)
from zdebias.generation.losses import IGNORE_INDEX, objective_parts
from zdebias.generation.mask import MaskReport, biased_token_mask
from zdebias.generation.settings import DebiasSettings, GeneratorSettings
from zdebias.models.batching import LengthGroupedSampler
from zdebias.models.checkpoints import check_extra, model_identity, records_digest
from zdebias.models.datasets import ListDataset
from zdebias.models.distributed import (
    GPU_PAD_MULTIPLE,
    gpu_arguments,
    sum_over_processes,
    train_on_cpu,
    world_size,
)
from zdebias.models.throughput import flop_parameters, throughput
from zdebias.models.training_run import TrainingRun, route_logs

if TYPE_CHECKING:
    from transformers import PreTrainedModel

TRAIN_SUMMARY = "train_summary.json"


@dataclass
class GeneratorTrainingArguments(TrainingArguments):
    """``TrainingArguments`` with GD-NLI Table 7 defaults and the generator's loss settings."""

    output_dir: str | None = None
    learning_rate: float = 1e-5
    per_device_train_batch_size: int = 24
    num_train_epochs: float = 5.0
    adam_epsilon: float = 1e-6
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    weight_decay: float = 0.0
    lr_scheduler_type: str = "constant"
    save_strategy: str = "no"
    logging_steps: float = 50
    remove_unused_columns: bool = False
    report_to: str | list[str] | None = "none"
    consistency_weight: float = field(
        default=0.5, metadata={"help": "λ: weight of the label-consistency unlikelihood loss."}
    )
    debias_alpha: float = field(
        default=1.0, metadata={"help": "α: weight of the masked unlikelihood loss on Z⁻."}
    )
    max_length: int = field(
        default=128, metadata={"help": "Longest training sequence (tokens); longer are dropped."}
    )
    label_init: str = field(
        default="auto",
        metadata={"help": "New label embeddings: auto (newline), eos, a token, or mean."},
    )
    mle_loss: str = "mle"
    consistency_loss: str = "unlikelihood"
    negative_loss: str = "masked_unlikelihood"


class GeneratorCollator:
    """Pads a batch (right) and adds the perturbed-label copy for the consistency loss.

    The wrong label l' of an example is drawn from a generator seeded by (seed, epoch, the
    example's ``index``), not from one running stream, so a run resumed from a checkpoint
    draws the same labels as an uninterrupted one (:meth:`set_epoch` is called each epoch).
    """

    def __init__(
        self,
        fmt: GeneratorFormat,
        *,
        consistency: bool,
        seed: int = 0,
        pad_to_multiple_of: int | None = None,
    ) -> None:
        self.fmt = fmt
        self.consistency = consistency
        self.seed = seed
        self.multiple = pad_to_multiple_of
        self.epoch = 0
        self.label_ids = list(fmt.label_token_ids.values())

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next batches belong to (each epoch draws new wrong labels)."""
        self.epoch = epoch

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        batch, width = len(items), max(len(it["input_ids"]) for it in items)
        if self.multiple:  # few distinct shapes on a GPU (see the trainer's module doc)
            width = -(-width // self.multiple) * self.multiple
        ids = torch.full((batch, width), self.fmt.pad_token_id, dtype=torch.long)
        attn = torch.zeros((batch, width), dtype=torch.long)
        labels = torch.full((batch, width), IGNORE_INDEX, dtype=torch.long)
        ul_mask = torch.ones((batch, width), dtype=torch.float32)
        negative = torch.zeros(batch, dtype=torch.bool)
        for i, it in enumerate(items):
            n = len(it["input_ids"])
            ids[i, :n] = torch.tensor(it["input_ids"])
            attn[i, :n] = 1
            labels[i, 1:n] = ids[i, 1:n]  # the start token is never a target
            if it["ul_mask"] is not None:
                ul_mask[i, :n] = torch.tensor(it["ul_mask"], dtype=torch.float32)
                negative[i] = True
        out: dict[str, Any] = {
            "input_ids": ids,
            "attention_mask": attn,
            "labels": labels,
            "ul_mask": ul_mask,
            "negative": negative,
            # known here, on the host: the trainer reads them without waiting for the GPU
            "n_tokens": sum(len(it["input_ids"]) for it in items),
            "has_negative": bool(negative.any()),
        }
        if self.consistency:
            perturbed = ids.clone()
            hyp_labels = torch.full((batch, width), IGNORE_INDEX, dtype=torch.long)
            for i, it in enumerate(items):
                gold = it["input_ids"][it["label_index"]]
                rng = random.Random(f"{self.seed}:{self.epoch}:{it.get('index', i)}")
                wrong = rng.choice([t for t in self.label_ids if t != gold])
                perturbed[i, it["label_index"]] = wrong
                start, end = it["main"]
                hyp_labels[i, start:end] = ids[i, start:end]
            out["perturbed_input_ids"] = perturbed
            out["perturbed_labels"] = hyp_labels
        return out


class GeneratorTrainer(Trainer):
    """``Trainer`` with the generator objective in ``compute_loss`` (see the module doc)."""

    # compute_loss returns a per-micro-batch mean; Trainer divides it for gradient accumulation.
    loss_is_scaled_for_ga = False
    args: GeneratorTrainingArguments  # what train_generator gives it

    def __init__(self, *a: Any, sampler: torch.utils.data.Sampler | None = None, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.sampler = sampler
        # train tokens, model tokens (perturbed copies too), padded positions: host ints from
        # the collator (reading them off the device would make every step wait for it)
        self.tokens_seen = 0
        self.model_tokens = 0
        self.padded_tokens = 0
        # loss parts stay on the device until logged
        self._parts: dict[str, torch.Tensor] = {}
        self._parts_n = 0
        self._flops_n: int | None = None

    def _get_train_sampler(self, train_dataset: Any = None) -> Any:
        """The length-grouped sampler when given, else HF's choice."""
        return (
            self.sampler if self.sampler is not None else super()._get_train_sampler(train_dataset)
        )

    def floating_point_ops(self, inputs: dict[str, Any]) -> int:
        """HF's 6·N·tokens, with N counted once, not every step."""
        if self._flops_n is None:
            model = cast("PreTrainedModel", self.model)  # the causal LM it was given
            self._flops_n = int(model.num_parameters(exclude_embeddings=True))
        return 6 * inputs["input_ids"].numel() * self._flops_n

    def compute_loss(
        self,
        model: Any,
        inputs: dict[str, Any],  # tensors, and the collator's host-side counts
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        args = self.args
        ids, attn, labels = inputs["input_ids"], inputs["attention_mask"], inputs["labels"]
        batch = ids.shape[0]
        lam = args.consistency_weight if "perturbed_input_ids" in inputs else 0.0
        if lam > 0:
            ids = torch.cat([ids, inputs["perturbed_input_ids"]])
            attn = torch.cat([attn, attn])
        outputs = model(input_ids=ids, attention_mask=attn)
        logits = outputs.logits[:, :-1]
        targets = labels[:, 1:]
        n_tokens = (targets != IGNORE_INDEX).sum()
        scale = 1.0
        if model.training and self.accelerator.num_processes > 1:
            # DDP averages the processes' gradients: divide each process's sum by the tokens
            # of the whole step and undo the average, so the step equals one process
            # training on the global batch (per-device batch × processes)
            scale = float(self.accelerator.num_processes)
            n_tokens = self.accelerator.reduce(n_tokens.detach().clone(), reduction="sum")
        n_tokens = n_tokens.clamp(min=1) / scale

        has_negative = inputs.get("has_negative")
        if has_negative is None:  # a batch from another collator: ask the device
            has_negative = bool(inputs["negative"].any())
        parts = objective_parts(
            logits[:batch],
            targets,
            inputs["negative"] if has_negative else None,
            inputs["ul_mask"][:, 1:],
            logits[batch:] if lam > 0 else None,
            inputs["perturbed_labels"][:, 1:] if lam > 0 else None,
            alpha=args.debias_alpha,
            consistency_weight=lam,
            names=(args.mle_loss, args.negative_loss, args.consistency_loss),
        )
        loss = sum(parts.values()) / n_tokens

        if model.training:
            real = inputs.get("n_tokens")
            real = int(inputs["attention_mask"].sum()) if real is None else real
            copies = 2 if lam > 0 else 1
            self.tokens_seen += real
            self.model_tokens += copies * real
            self.padded_tokens += int(ids.numel())
            for name, value in parts.items():
                total = (value.detach() / n_tokens).to(torch.float64)
                self._parts[name] = self._parts[name] + total if name in self._parts else total
            self._parts_n += 1
        return (loss, outputs) if return_outputs else loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Add the mean loss parts since the last log (``loss_mle``, ``loss_consistency``...)."""
        if self._parts_n and "loss" in logs:
            names = sorted(self._parts)
            totals = torch.stack([self._parts[name] for name in names])
            if self.accelerator.num_processes > 1:  # each process holds its share of a part
                totals = self.accelerator.reduce(totals.float(), reduction="mean")
            for name, total in zip(names, totals.tolist(), strict=True):
                logs[f"loss_{name}"] = round(total / self._parts_n, 4)
            self._parts, self._parts_n = {}, 0
        super().log(logs, start_time)

    def checkpoint_state(self, folder: Path) -> dict[str, Any]:
        """Counters a resumed run continues (:mod:`zdebias.models.checkpoints`)."""
        return {
            "tokens_seen": self.tokens_seen,
            "model_tokens": self.model_tokens,
            "padded_tokens": self.padded_tokens,
            "parts": {name: float(value) for name, value in self._parts.items()},
            "parts_n": self._parts_n,
        }

    def load_checkpoint_state(self, state: dict[str, Any], folder: Path) -> None:
        """Back to the counters :meth:`checkpoint_state` saved."""
        self.tokens_seen = state["tokens_seen"]
        self.model_tokens = state.get("model_tokens", 0)
        self.padded_tokens = state.get("padded_tokens", 0)
        self._parts = {
            name: torch.tensor(value, dtype=torch.float64, device=self.args.device)
            for name, value in state["parts"].items()
        }
        self._parts_n = state["parts_n"]


class _CollatorEpoch(TrainerCallback):
    """Tells the collator (and the length-grouped sampler) the epoch, which seeds the wrong
    labels (and the batches)."""

    def __init__(
        self, collator: GeneratorCollator, sampler: LengthGroupedSampler | None = None
    ) -> None:
        self.collator = collator
        self.sampler = sampler

    def on_epoch_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: Any,
    ) -> TrainerControl:
        self.collator.set_epoch(int(state.epoch or 0))
        if self.sampler is not None:
            self.sampler.set_epoch(int(state.epoch or 0))
        return control


# --------------------------------------------------------------------------- high-level API


def _make_args(run: TrainingRun, overrides: dict[str, Any]) -> GeneratorTrainingArguments:
    if train_on_cpu():  # no GPU, or fewer GPUs than processes on this machine
        # use_cpu: without it HF does not see a CPU `torchrun` as distributed (no DDP)
        overrides = {"dataloader_pin_memory": False, "use_cpu": True, **overrides}
    else:  # pinned batches (HF's default on a GPU) copied without waiting
        overrides = {**gpu_arguments(), **overrides}
    return run.arguments(GeneratorTrainingArguments, overrides)


def _encode_all(
    records: Iterable[Record],
    tokenizer: Any,
    fmt: GeneratorFormat,
    max_length: int,
    *,
    negative: bool,
    mask_report: MaskReport | None = None,
    null_mask: str = "hypothesis",
) -> tuple[list[dict[str, Any]], list[str]]:
    items, too_long = [], []
    for record in records:
        enc: EncodedExample = encode_record(record, tokenizer, fmt)
        if len(enc) > max_length:
            too_long.append(record.id)
            continue
        mask = None
        if negative:
            biased = biased_token_mask(record, enc, report=mask_report, null_mask=null_mask)
            mask = [0.0 if b else 1.0 for b in biased]
        items.append(
            {
                "input_ids": enc.input_ids,
                "label_index": enc.label_index,
                "main": enc.main,
                "ul_mask": mask,
            }
        )
    return items, too_long


def _check_out(out: Path) -> None:
    """Refuse an ``out`` that holds something other than an older generator."""
    check_out_dir(out, overwrite=True)
    if out.exists() and (
        not out.is_dir() or (any(out.iterdir()) and not GeneratorFormat.is_generator(out))
    ):
        raise ConfigError(f"{out}: exists and is not a generator folder; choose another --out")


def _publish(tmp: Path, out: Path) -> None:
    """Move the finished folder ``tmp`` to ``out`` atomically, replacing an older generator."""
    _check_out(out)
    publish_dir(tmp, out, overwrite=True)


def train_generator(
    records: Sequence[Record],
    model: str | Path,
    out_dir: str | Path,
    settings: GeneratorSettings | None = None,
    *,
    negatives: Sequence[Record] = (),
    task: str | Task | None = None,
    progress: bool = True,
    extra_info: dict[str, Any] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Fine-tune a causal LM into a generator folder at ``out_dir``; return the summary.

    ``model`` is any causal LM reference (:func:`zdebias.models.resolve.resolve_model`) or an
    existing generator folder (its format is kept; fine-tuning continues). ``records`` are
    trained with likelihood (+ λ·consistency); ``negatives`` (Z⁻, each with
    ``meta["rejected_by"]``) with α·masked unlikelihood. ``settings``: a
    :class:`~zdebias.generation.settings.GeneratorSettings` (or :class:`DebiasSettings`, for α);
    ``overrides``: its fields as keywords (``learning_rate=1e-4, max_steps=20``); any other
    keyword is a :class:`GeneratorTrainingArguments` field (``logging_steps=5``). ``subset``
    draws from ``records``. Sequences longer than ``max_length`` are dropped and counted.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed

    from zdebias.models.compute import compute_record
    from zdebias.models.coverage import warn_vocabulary
    from zdebias.models.resolve import resolve_model

    cls = type(settings) if isinstance(settings, GeneratorSettings) else GeneratorSettings
    cfg = cls.of(settings, **overrides)
    check_extra(GeneratorTrainingArguments, cfg)
    records = cfg.pick(records)
    if not records and not negatives:
        raise ConfigError("no training records")
    out = Path(out_dir)
    _check_out(out)
    identity = (
        records_digest(records),
        records_digest(negatives),
        model_identity(model),
        None if task is None else get_task(task).name,
    )
    with TrainingRun(out, cfg, *identity) as run:
        args = _make_args(run, cfg.training_arguments(progress=progress))
        set_seed(args.seed)
        path = resolve_model(model)
        tokenizer = AutoTokenizer.from_pretrained(path)
        warn_vocabulary(tokenizer, records or negatives, model)  # SmolLM2 given Chinese, ...
        lm = AutoModelForCausalLM.from_pretrained(path)
        if GeneratorFormat.is_generator(path):
            fmt = GeneratorFormat.load(path)
            if task is not None and list(get_task(task).labels) != fmt.labels:
                raise ConfigError(
                    f"{model}: generator labels {fmt.labels} differ from task "
                    f"{get_task(task).name!r} {list(get_task(task).labels)}"
                )
            fmt.max_length = args.max_length
        else:
            kind = get_task(task or "nli").of_kind((records or negatives)[0].is_pair)
            fmt = add_format_tokens(
                tokenizer, lm, kind, max_length=args.max_length, label_init=args.label_init
            )
        lm.generation_config.bos_token_id = fmt.bos_token_id
        lm.generation_config.eos_token_id = fmt.eos_token_id
        lm.generation_config.pad_token_id = fmt.pad_token_id

        mask_report = MaskReport()
        pos_items, long_pos = _encode_all(records, tokenizer, fmt, args.max_length, negative=False)
        neg_items, long_neg = _encode_all(
            negatives,
            tokenizer,
            fmt,
            args.max_length,
            negative=True,
            mask_report=mask_report,
            null_mask=getattr(cfg, "null_mask", "hypothesis"),
        )
        items = pos_items + neg_items
        if not items:
            raise ConfigError(f"every record is longer than max_length={args.max_length}")
        for i, item in enumerate(items):
            item["index"] = i  # seeds the example's wrong labels (GeneratorCollator)
        on_gpu = args.device.type == "cuda"
        collator = GeneratorCollator(
            fmt,
            consistency=args.consistency_weight > 0,
            seed=args.seed,
            pad_to_multiple_of=GPU_PAD_MULTIPLE if on_gpu else None,
        )
        grouped = cfg.grouped(args.device.type)
        sampler = None
        if grouped:
            lengths = [len(it["input_ids"]) for it in items]
            sampler = LengthGroupedSampler(lengths, args.train_batch_size, seed=args.seed)
        trainer = GeneratorTrainer(
            model=lm,
            args=args,
            train_dataset=ListDataset(items),
            data_collator=collator,
            callbacks=[run.checkpoints, _CollatorEpoch(collator, sampler)],
            sampler=sampler,
        )
        route_logs(trainer)
        resume = run.resume(trainer=trainer)
        # a resumed run's rates count this start only
        before = (trainer.tokens_seen, trainer.model_tokens, trainer.padded_tokens)
        start = time.perf_counter()
        result = trainer.train(resume_from_checkpoint=resume)
        seconds = time.perf_counter() - start
        counts = [
            trainer.tokens_seen - before[0],
            trainer.tokens_seen,
            trainer.model_tokens - before[1],
            trainer.padded_tokens - before[2],
        ]
        if world_size() > 1:  # every process counted its own share
            counts = [int(sum_over_processes(c)) for c in counts]
        tokens = (counts[0], counts[1])
        rate = throughput(flop_parameters(lm), counts[2], seconds, args.device)
        rate["model_tokens"] = counts[2]
        rate["padding_share"] = round(1 - counts[2] / counts[3], 4) if counts[3] else 0.0

        summary: dict[str, Any] = {
            "base_model": str(model),
            "task": fmt.task,
            "n_records": len(records),
            "n_negatives": len(negatives),
            "n_trained": len(items),
            "n_dropped_too_long": len(long_pos) + len(long_neg),
            "dropped_too_long_ids": (long_pos + long_neg)[:50],
            "steps": result.global_step,
            "train_loss": round(run.train_loss(result), 4),
            "train_seconds": round(seconds, 2),
            "train_tokens": tokens[1],
            "train_tokens_per_s": round(tokens[0] / max(seconds, 1e-9), 1),
            "throughput": rate,
            "processes": world_size(),
            "compute": compute_record(
                args.device, "bfloat16" if args.bf16 else "float32", setting=cfg.precision
            ),
            "resumed_from_step": run.resumed_from,
            "settings": {
                k: getattr(args, k)
                for k in (
                    "learning_rate",
                    "per_device_train_batch_size",
                    "num_train_epochs",
                    "max_steps",
                    "gradient_accumulation_steps",
                    "adam_epsilon",
                    "adam_beta1",
                    "adam_beta2",
                    "lr_scheduler_type",
                    "max_length",
                    "consistency_weight",
                    "debias_alpha",
                    "label_init",
                    "seed",
                    "mle_loss",
                    "consistency_loss",
                    "negative_loss",
                )
            }
            | {"group_by_length": grouped},
            "log_history": trainer.state.log_history,
        }
        if negatives:
            summary["mask"] = {
                "null_mask": getattr(cfg, "null_mask", "hypothesis"),
                "n_biased_tokens": sum(mask_report.by_kind.values()),
                "biased_tokens_by_kind": mask_report.by_kind,
                "n_unmatched_ngrams": len(mask_report.unmatched),
                "unmatched_ngrams": mask_report.unmatched[:50],
                "n_negatives_without_biased_tokens": sum(
                    1 for it in neg_items if all(v == 1.0 for v in it["ul_mask"])
                ),
            }
        summary["objective"] = (
            "debias" if negatives else "consistency" if args.consistency_weight > 0 else "mle"
        )
        if extra_info:
            summary.update(extra_info)
        fmt.info = {
            **fmt.info,
            **{k: summary[k] for k in ("base_model", "n_trained", "steps", "settings")},
        }
        sharded = trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled
        if sharded:  # FSDP / ZeRO-3: every process gives its shard, the main one writes
            trainer.save_model(str(run.work))

        def save(folder: Path) -> None:
            if sharded:
                (folder / "training_args.bin").unlink(missing_ok=True)
            else:
                lm.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
            fmt.save(folder)
            write_json(summary, folder / TRAIN_SUMMARY)

        run.publish(trainer, save, publish=_publish)
    summary["out"] = str(out)
    return summary


#: the z-filter summary keys a debiased generator's summary reports
ZFILTER_SHOWN: tuple[str, ...] = (
    "n_input",
    "kept_share_of_input",
    "zfilter_batch_size",
    "biased_k",
    "features",
)
ZFILTER_SHOWN += ("top_z_before", "top_z_after", "rejections_by_feature")


def zfilter_info(result: Any) -> dict[str, Any]:
    """What a debiased generator's summary reports of the z-filter ``result`` it trained on
    (``extra_info={"z_filter": zfilter_info(result)}``)."""
    info: dict[str, Any] = {"n_kept": len(result.kept), "n_rejected": len(result.rejected)}
    info.update((k, result.summary[k]) for k in ZFILTER_SHOWN if k in result.summary)
    return info


def debias_generator(
    generator: str | Path,
    kept: Sequence[Record],
    rejected: Sequence[Record],
    out_dir: str | Path,
    settings: DebiasSettings | None = None,
    *,
    task: str | Task | None = None,
    progress: bool = True,
    extra_info: dict[str, Any] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Fine-tune ``generator`` into G* on a z-filter's output (GD-NLI §4.1).

    ``kept`` (Z) and ``rejected`` (Z⁻, each with ``meta["rejected_by"]``) are the outputs of
    :func:`zdebias.stats.zfilter.z_filter`. Loss: L_MLE on Z + α·masked L_UL on Z⁻ (mask from
    ``rejected_by``, see :mod:`zdebias.generation.mask`); λ is 0 unless given. ``settings``:
    a :class:`~zdebias.generation.settings.DebiasSettings`; ``overrides``: its fields.

    >>> result = z_filter(train, biased_k=20)                                 # doctest: +SKIP
    >>> debias_generator("runs/gen", result.kept, result.rejected, "runs/g*")  # doctest: +SKIP
    """
    missing = [r.id for r in rejected if "rejected_by" not in r.meta]
    if missing:
        raise ConfigError(
            "'rejected' records need meta.rejected_by (the output 'rejected' of z-filtering or "
            f"of a filter stage); {len(missing)} lack it, e.g. {missing[0]!r}"
        )
    return train_generator(
        kept,
        generator,
        out_dir,
        DebiasSettings.of(settings, **overrides),
        negatives=rejected,
        task=task,
        progress=progress,
        extra_info={"objective": "debias", **(extra_info or {})},
    )
