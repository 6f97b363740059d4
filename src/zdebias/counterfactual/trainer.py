"""Train a label-controlled infiller on HF ``Trainer`` (AutoCAD §3.2, docs/design.md §10.2).

- :class:`InfillTrainingArguments`: ``TrainingArguments`` plus α and the architecture.
- :class:`InfillTrainer`: overrides only ``compute_loss`` (MLE + α·UL, as in trl; the loss is
  :func:`zdebias.counterfactual.losses.infill_loss`) and ``log`` to report both terms.
- :func:`train_infiller` (``zdebias counterfactual train``): encode, train with the
  shared early-stopping policy (best epoch by dev loss), publish the folder atomically;
  checkpoints every ``checkpoint_steps``, resumed when started again
  (:mod:`zdebias.models.checkpoints`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from transformers import Trainer, TrainingArguments

from zdebias.counterfactual.format import Arch, Encoded, Span, encode_records
from zdebias.counterfactual.losses import infill_loss
from zdebias.counterfactual.model import INFO_FILE, is_infiller, load_base_infiller
from zdebias.counterfactual.rationales import record_spans
from zdebias.counterfactual.settings import InfillSettings
from zdebias.data.schema import Record
from zdebias.data.writers import check_out_dir
from zdebias.errors import ConfigError, DataError, ZdebiasError
from zdebias.models.checkpoints import check_extra, model_identity, records_digest
from zdebias.models.compute import compute_record
from zdebias.models.distributed import train_on_cpu, world_size
from zdebias.models.early_stopping import EarlyStopping
from zdebias.models.training_run import TrainingRun, route_logs

if TYPE_CHECKING:
    from transformers import PreTrainedModel

#: α defaults of the paper: 1 for NLI (pair tasks), 0.3 for sentiment (single text).
DEFAULT_ALPHA = {True: 1.0, False: 0.3}


@dataclass
class InfillTrainingArguments(TrainingArguments):
    """``TrainingArguments`` plus the infilling settings."""

    alpha: float = field(default=1.0, metadata={"help": "weight of the unlikelihood term"})
    infill_arch: Arch = field(default="seq2seq", metadata={"help": "seq2seq|bert2bert|causal"})


class InfillCollator:
    """Flatten each example's variants into one padded batch with an ``is_original`` flag."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        rows: list[Encoded] = []
        orig: list[bool] = []
        for feat in features:
            for j, enc in enumerate(feat["variants"]):
                rows.append(enc)
                orig.append(j == 0)
        n_in = max(len(r.input_ids) for r in rows)
        n_out = max(len(r.labels) for r in rows)

        def pad(seqs: list[list[int]], width: int, value: int) -> torch.Tensor:
            return torch.tensor([s + [value] * (width - len(s)) for s in seqs], dtype=torch.long)

        return {
            "input_ids": pad([r.input_ids for r in rows], n_in, self.pad_id),
            "attention_mask": pad([[1] * len(r.input_ids) for r in rows], n_in, 0),
            "labels": pad([r.labels for r in rows], n_out, -100),
            "ul_mask": pad([r.ul_mask for r in rows], n_out, 0),
            "is_original": torch.tensor(orig, dtype=torch.bool),
        }


class InfillTrainer(Trainer):
    """HF ``Trainer`` with the label-controlled infilling loss; logs both terms."""

    args: InfillTrainingArguments  # what train_infiller gives it

    loss_is_scaled_for_ga = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._parts: dict[str, list[float]] = {"mle": [], "ul": []}

    def compute_loss(
        self,
        model: Any,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> Any:
        loss, mle, ul, outputs = infill_loss(
            model, inputs, arch=self.args.infill_arch, alpha=self.args.alpha
        )
        if model.training and self.accelerator.num_processes > 1:
            mle, ul = self._global_means(inputs, mle, ul)
            loss = mle + self.args.alpha * ul
        if model.training:
            self._parts["mle"].append(float(mle.detach()))
            self._parts["ul"].append(float(ul.detach()))
        return (loss, outputs) if return_outputs else loss

    def _global_means(
        self, inputs: dict[str, Any], mle: torch.Tensor, ul: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Under DDP: each process's token means rescaled so that the average DDP takes of
        the processes' gradients is the gradient of the token means over the whole step
        (the same as one process training on the global batch)."""
        labels, ul_mask, orig = inputs["labels"], inputs["ul_mask"], inputs["is_original"]
        if self.args.infill_arch == "causal":
            labels, ul_mask = labels[:, 1:], ul_mask[:, 1:]
        valid = labels != -100
        local = torch.stack([valid[orig].sum(), (valid & ul_mask.bool())[~orig].sum()])
        total = self.accelerator.reduce(local.clone(), reduction="sum").clamp(min=1)
        share = local.to(mle.dtype) * self.accelerator.num_processes / total.to(mle.dtype)
        return mle * share[0], ul * share[1]

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and any(self._parts.values()):
            names = [k for k, v in self._parts.items() if v]
            means = [sum(self._parts[k]) / len(self._parts[k]) for k in names]
            if self.accelerator.num_processes > 1:  # each process holds its share of a part
                parts = torch.tensor(means, device=self.args.device)
                means = self.accelerator.reduce(parts, reduction="mean").tolist()
            for key, mean in zip(names, means, strict=True):
                logs[key] = round(mean, 4)
            for values in self._parts.values():
                values.clear()
        super().log(logs, start_time)

    def checkpoint_state(self, folder: Path) -> dict[str, Any]:
        """The loss terms since the last log (:mod:`zdebias.models.checkpoints`)."""
        return {"parts": self._parts}

    def load_checkpoint_state(self, state: dict[str, Any], folder: Path) -> None:
        """Back to what :meth:`checkpoint_state` saved."""
        self._parts = {k: list(v) for k, v in state["parts"].items()}


def _check_out(out: Path, overwrite: bool = True) -> None:
    """Refuse an ``out`` that holds something other than an earlier infiller."""
    check_out_dir(out, overwrite=overwrite)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not is_infiller(out))):
        raise ConfigError(f"{out}: exists and is not an infiller folder; choose another --out")


def train_infiller(
    records: Sequence[Record],
    out_dir: str | Path,
    settings: InfillSettings | None = None,
    *,
    labels: Sequence[str],
    spans: Sequence[Mapping[str, Sequence[Span]]] | None = None,
    dev: Sequence[Record] | None = None,
    dev_spans: Sequence[Mapping[str, Sequence[Span]]] | None = None,
    path: str | None = None,
    overwrite: bool = True,
    progress: bool = True,
    **overrides: Any,
) -> dict[str, Any]:
    """Fine-tune ``settings.model`` as an infiller on span-masked records; save it to ``out_dir``.

    ``settings`` (:class:`InfillSettings`; keywords override its fields, e.g. ``model=``).
    ``spans[i]`` are the character spans to mask in ``records[i]`` (default: by
    ``settings.spans``: the records' rationales, or seeded random spans; ``dev_spans`` alike,
    random ones seeded ``seed + 1``). With ``dev`` the model is evaluated each epoch, the best
    epoch (lowest dev loss) is kept and training stops after ``patience`` epochs without
    improvement. ``out_dir`` is written atomically; an earlier infiller there is replaced
    (refused without ``overwrite``), any other non-empty folder refused. Returns a JSON-ready
    summary.
    """
    from transformers import set_seed

    from zdebias.data.writers import write_json

    cfg = InfillSettings.of(settings, **overrides)
    check_extra(InfillTrainingArguments, cfg, own=("alpha", "infill_arch"))
    if not records:
        raise ZdebiasError("no training records (did the rationale step keep any?)")
    out = Path(out_dir)
    _check_out(out, overwrite)
    pair = records[0].is_pair
    alpha = DEFAULT_ALPHA[pair] if cfg.alpha is None else cfg.alpha
    seed, batch_size = cfg.seed, cfg.batch_size
    pick = {"fields": cfg.fields, "ratio": cfg.ratio}
    if spans is None:
        spans = record_spans(records, cfg.spans, **pick, seed=seed, path=path)
    if dev is not None and dev_spans is None:
        dev_spans = record_spans(dev, cfg.spans, **pick, seed=seed + 1, path=path)
    set_seed(seed)
    model, tok, arch_ = load_base_infiller(cfg.model, cfg.arch)
    encode = {
        "wrong_labels": alpha > 0,
        "max_source_length": cfg.max_source_length,
        "max_target_length": cfg.max_target_length,
    }
    feats, skipped = encode_records(tok, arch_, records, spans, labels, **encode)
    if not feats:
        raise DataError(f"no usable training example: skipped {dict(skipped)}")
    dev_feats: list[dict[str, Any]] = []
    dev_skipped: Counter[str] = Counter()
    if dev is not None and dev_spans is not None:
        dev_feats, dev_skipped = encode_records(tok, arch_, dev, dev_spans, labels, **encode)
    has_dev = bool(dev_feats)
    identity = (
        records_digest(records),
        list(spans),
        records_digest(dev or []),
        list(dev_spans or []),
        model_identity(cfg.model),
        list(labels),
    )
    base = dict(
        alpha=alpha,
        infill_arch=arch_,
        num_train_epochs=cfg.epochs,
        per_device_train_batch_size=batch_size,
        per_device_eval_batch_size=batch_size,
        learning_rate=cfg.learning_rate,
        weight_decay=cfg.weight_decay,
        adam_beta2=0.98,
        lr_scheduler_type="constant",
        seed=seed,
        remove_unused_columns=False,
        label_names=["labels"],
        # --batch-size is per process: a step takes batch_size × processes examples
        logging_steps=max(1, min(50, math.ceil(len(feats) / (batch_size * world_size())))),
        eval_strategy="epoch" if has_dev else "no",
        prediction_loss_only=True,
        disable_tqdm=not progress,
        dataloader_num_workers=0,
        dataloader_pin_memory=False,
        # without a GPU (for each process): use_cpu, else HF does not see a CPU `torchrun` as
        # distributed
        use_cpu=train_on_cpu(),
    )
    with TrainingRun(out, cfg, *identity) as run:
        args = run.arguments(InfillTrainingArguments, base)
        stopper = EarlyStopping("eval_loss", greater_is_better=False, patience=cfg.patience)
        before = {n: p.detach().clone() for n, p in list(model.named_parameters())[:4]}
        trainer = InfillTrainer(
            model=model,
            args=args,
            train_dataset=feats,
            eval_dataset=dev_feats or None,
            data_collator=InfillCollator(tok.pad_token_id),
            processing_class=tok,
            callbacks=[stopper, run.checkpoints] if has_dev else [run.checkpoints],
        )
        route_logs(trainer)
        resume = run.resume(trainer=trainer, early_stopping=stopper)
        result = trainer.train(resume_from_checkpoint=resume)
        stopper.restore_best(trainer.model)
        eval_loss = trainer.evaluate()["eval_loss"] if has_dev else None
        changed = any(
            not bool((p.detach().cpu() == before[n].cpu()).all())
            for n, p in cast("PreTrainedModel", trainer.model).named_parameters()
            if n in before
        )
        history = [
            {k: v for k, v in row.items() if k in ("epoch", "loss", "mle", "ul", "eval_loss")}
            for row in trainer.state.log_history
        ]
        info = {
            "arch": arch_,
            "base_model": cfg.model,
            "labels": list(labels),
            "pair": pair,
            "alpha": alpha,
            "epochs": cfg.epochs,
            "batch_size": batch_size,
            "learning_rate": cfg.learning_rate,
            "max_source_length": cfg.max_source_length,
            "max_target_length": cfg.max_target_length,
            "spans": cfg.spans,
            "fields": cfg.fields,
            "seed": seed,
            "trained": True,
        }
        summary = {
            **info,
            "out": str(out),
            "n_train": len(feats),
            "n_skipped": sum(skipped.values()),
            "skipped": dict(skipped),
            "n_dev": len(dev_feats),
            "n_dev_skipped": sum(dev_skipped.values()),
            "train_loss": round(run.train_loss(result), 6),
            "eval_loss": None if eval_loss is None else round(float(eval_loss), 6),
            "parameters_changed": changed,
            "compute": compute_record(args.device, "bfloat16" if args.bf16 else "float32"),
            "resumed_from_step": run.resumed_from,
            "history": [h for h in history if h],
        }

        def save(folder: Path) -> None:
            cast("PreTrainedModel", trainer.model).save_pretrained(folder)
            tok.save_pretrained(folder)
            write_json(info, folder / INFO_FILE)
            write_json(summary, folder / "train_summary.json")

        run.publish(trainer, save, overwrite=overwrite)
    return summary
