"""Train a classifier (plain, hypothesis-only, PoE, Learned-Mixin, conf-reg) on HF ``Trainer``.

The custom part is small: :class:`ClassifierTrainingArguments` (a ``TrainingArguments``
dataclass with the loss name and its settings) and :class:`ClassifierTrainer` (a ``Trainer``
that overrides only ``compute_loss``). Losses live in :mod:`zdebias.classify.losses`.

Defaults follow GD-NLI Table 9: lr 1e-5, batch 32, 5 epochs, Adam ε 1e-6, constant schedule
with 2000 warm-up steps, max length 128, early-stop patience 3, best epoch by dev accuracy.
Checkpoints every ``checkpoint_steps`` go to ``.OUT.checkpoints/``; the same call started
again after an interruption resumes from the last one (:mod:`zdebias.models.checkpoints`).

>>> metrics = train_classifier(train, dev, "runs/clf", model="minilm")   # doctest: +SKIP
>>> metrics["best"]["dev_accuracy"]                                       # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import Trainer, TrainingArguments

from zdebias.classify.dynamics import INDEX_COLUMN, DynamicsRecorder
from zdebias.classify.hypo_only import CROSS_FIT_FILE as HYPO_CROSS_FIT_FILE
from zdebias.classify.learned import did_not_learn, slow_start, warn_unlearned
from zdebias.classify.losses import LOSSES, call_loss, cross_entropy, loss_needs
from zdebias.classify.predict import (
    CLASSIFIER_INFO,
    InputKind,
    hf_progress,
    load_classifier,
    model_inputs,
    predict_proba,
)
from zdebias.classify.settings import (
    ClassifierSettings,
    subset_records,
    torch_device,
)
from zdebias.data.labels import Task, get_task, infer_task, label_ids
from zdebias.data.recorded import filter_provenance
from zdebias.data.schema import Record
from zdebias.data.writers import check_out_dir, write_json, write_records
from zdebias.errors import ConfigError, DataError
from zdebias.features.hypothesis_only import DEFAULT_FOLDS
from zdebias.models.checkpoints import check_extra, model_identity, records_digest
from zdebias.models.compute import compute_record
from zdebias.models.coverage import warn_vocabulary
from zdebias.models.datasets import ListDataset
from zdebias.models.distributed import (
    GPU_PAD_MULTIPLE,
    barrier,
    gpu_arguments,
    is_main_process,
    train_on_cpu,
    world_size,
)
from zdebias.models.early_stopping import EarlyStopping
from zdebias.models.resolve import resolve_model
from zdebias.models.training_run import StepsClock, TrainingRun, route_logs
from zdebias.settings import DEFAULT_SEED
from zdebias.stats.shortcut_split import rows_digest

log = logging.getLogger("zdebias")

#: Name of the per-run metrics file written into every classifier folder.
METRICS_FILE = "metrics.json"
#: Attribute under which the Learned-Mixin gate ``w·h + c`` is attached to the model while training.
GATE_ATTR = "zdebias_mixin_gate"
#: Attribute under which joint PoE's hypothesis-only head is attached while training.
BIAS_HEAD_ATTR = "zdebias_bias_head"
#: Prefix of the hypothesis-only token fields a joint-PoE training batch carries.
HYP_PREFIX = "hyp_"
INPUT_KINDS = ("pair", "hypothesis-only", "text")
#: the out-of-fold predictions ``train_classifier`` writes with ``cross_fit``
CROSS_FIT_FILE = HYPO_CROSS_FIT_FILE
_EXTRA_COLUMNS = ("bias_probs", "teacher_probs")
#: a floored training (small data, see ``Schedule.min_steps``) is evaluated about this many
#: times: a large dev set evaluated after each short epoch would cost more than the training
FLOOR_EVALUATIONS = 5
#: the fields ``ClassifierTrainingArguments`` adds, set from the settings (not by ``--set``)
_OWN_ARGUMENTS = ("loss", "poe_beta", "poe_gamma", "entropy_weight")


@dataclass
class ClassifierTrainingArguments(TrainingArguments):
    """``TrainingArguments`` plus the debiasing loss and its settings."""

    loss: str = field(default="ce", metadata={"help": f"one of {', '.join(LOSSES)}"})
    poe_beta: float = field(default=1.0, metadata={"help": "PoE weight β on log b"})
    poe_gamma: float = field(default=0.0, metadata={"help": "PoE weight γ on CE(l, b)"})
    entropy_weight: float | None = field(
        default=None, metadata={"help": "Learned-Mixin+H entropy penalty (None: loss default)"}
    )


def encoder_summary(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """``[B, H]`` sentence vector of the shared encoder: the pooler output where the model has
    one (BERT, as robust-nli), else the first token's last hidden state."""
    base = getattr(model, "base_model", model)
    out = base(**inputs)
    pooled = getattr(out, "pooler_output", None)
    return pooled if pooled is not None else out.last_hidden_state[:, 0]


def bias_head_logits(head: torch.nn.Linear, summary: torch.Tensor) -> torch.Tensor:
    """Joint PoE's bias branch: the hypothesis-only head on a *detached* encoder summary, so
    the bias losses train the head and never the shared encoder (robust-nli's
    ``grad_mul_const(pooled_h, 0.0)``)."""
    return head(summary.detach().to(head.weight.dtype))


class ClassifierTrainer(Trainer):
    """HF ``Trainer`` whose ``compute_loss`` applies the loss named in the arguments.

    Training batches may carry ``bias_probs`` / ``teacher_probs`` (precomputed, per example),
    or, for joint PoE, the hypothesis alone (``hyp_input_ids``...): the hypothesis-only head
    attached as :data:`BIAS_HEAD_ATTR` then gives ``b`` (:func:`bias_head_logits`).
    Evaluation always scores the main model alone with plain cross-entropy. ``dynamics``
    (when set) records each training batch's main-model probabilities, by the batch's
    ``zdebias_index`` column (:mod:`zdebias.classify.dynamics`).
    """

    loss_is_scaled_for_ga = False  # our loss is a per-batch mean
    dynamics: DynamicsRecorder | None = None
    args: ClassifierTrainingArguments  # what train_classifier gives it

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        args = self.args
        inputs = dict(inputs)
        labels = inputs.pop("labels")
        index = inputs.pop(INDEX_COLUMN, None)
        extras = {k: inputs.pop(k) for k in _EXTRA_COLUMNS if k in inputs}
        n_prefix = len(HYP_PREFIX)
        hyp = {k[n_prefix:]: inputs.pop(k) for k in list(inputs) if k.startswith(HYP_PREFIX)}
        needs = loss_needs(args.loss)
        debias = model.training and args.loss != "ce"
        want_gate = debias and "gate_logits" in needs
        outputs = model(**inputs, output_hidden_states=want_gate)
        if model.training and index is not None and self.dynamics is not None:
            self.dynamics.record(index, outputs.logits, labels)
        if not debias:
            loss = cross_entropy(outputs.logits, labels)
        else:
            if want_gate:
                gate = getattr(self.accelerator.unwrap_model(model), GATE_ATTR)
                first_token = outputs.hidden_states[-1][:, 0]
                extras["gate_logits"] = gate(first_token.to(gate.weight.dtype)).squeeze(-1)
                outputs.hidden_states = None
            if hyp and "bias_probs" not in extras:
                unwrapped = self.accelerator.unwrap_model(model)
                with torch.no_grad():  # the encoder gets no gradient from the bias branch
                    summary = encoder_summary(unwrapped, hyp)
                head = getattr(unwrapped, BIAS_HEAD_ATTR)
                extras["bias_probs"] = torch.softmax(bias_head_logits(head, summary).float(), -1)
            settings = {
                "beta": args.poe_beta,
                "gamma": args.poe_gamma,
                "entropy_weight": args.entropy_weight,
            }
            loss = call_loss(args.loss, outputs.logits, labels, None, **extras, **settings)
        return (loss, outputs) if return_outputs else loss


class BestEpochCallback(EarlyStopping):
    """Keep the weights of the best dev accuracy (in memory) and stop after ``patience``
    evaluations without improvement (the shared :class:`EarlyStopping` policy)."""

    def __init__(self, patience: int) -> None:
        super().__init__(
            "eval_accuracy",
            greater_is_better=True,
            patience=patience,
            record={"dev_accuracy": "eval_accuracy", "dev_loss": "eval_loss"},
        )

    @property
    def best_accuracy(self) -> float | None:
        """The best dev accuracy so far."""
        return self.best_value


class _Collator:
    """Pads token fields per batch; stacks labels and per-example probability rows.

    ``pad_to_multiple_of`` (8 on a GPU): widths repeat from batch to batch, so the GPU meets
    a handful of shapes (each new one costs kernel selection and loading) instead of one per
    batch, and tensor-core tiles stay aligned. Off on the CPU, where it would change results.
    """

    def __init__(self, tokenizer: Any, *, pad_to_multiple_of: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.multiple = pad_to_multiple_of

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        special = ("labels", INDEX_COLUMN, *_EXTRA_COLUMNS)
        tokens = [
            {k: v for k, v in f.items() if k not in special and not k.startswith(HYP_PREFIX)}
            for f in features
        ]
        pad = {"return_tensors": "pt", "pad_to_multiple_of": self.multiple}
        batch = dict(self.tokenizer.pad(tokens, **pad))
        if any(k.startswith(HYP_PREFIX) for k in features[0]):
            n = len(HYP_PREFIX)
            hyp = [{k[n:]: v for k, v in f.items() if k.startswith(HYP_PREFIX)} for f in features]
            padded = self.tokenizer.pad(hyp, **pad)
            batch.update({HYP_PREFIX + k: v for k, v in padded.items()})
        batch["labels"] = torch.tensor([f["labels"] for f in features], dtype=torch.long)
        if INDEX_COLUMN in features[0]:  # training rows: their position, for the dynamics
            batch[INDEX_COLUMN] = torch.tensor([f[INDEX_COLUMN] for f in features])
        for key in _EXTRA_COLUMNS:
            if key in features[0]:
                batch[key] = torch.tensor(np.stack([f[key] for f in features]), dtype=torch.float32)
        return batch


# --------------------------------------------------------------------------- helpers


def aligned_probs(
    ref: str | Path,
    records: Sequence[Record],
    labels: Sequence[str],
    *,
    what: str,
    batch_size: int = 128,
    progress: bool = False,
    out_of_fold: bool = False,
) -> np.ndarray:
    """``[N, len(labels)]`` probabilities of the classifier ``ref``, columns in ``labels`` order;
    with ``out_of_fold``, a record ``ref`` was cross-fitted on gets its out-of-fold
    probabilities (:data:`CROSS_FIT_FILE`) instead of the final model's."""
    clf = load_classifier(ref)
    missing = [name for name in labels if name not in clf.labels]
    if missing:
        raise ConfigError(
            f"{what} {ref} predicts {', '.join(clf.labels)}; it lacks {', '.join(missing)}"
        )
    cols = [clf.labels.index(name) for name in labels]
    if not out_of_fold:
        probs = predict_proba(clf, records, batch_size=batch_size, progress=progress)
        out = probs[:, cols]
    else:
        held = out_of_fold_probs(ref, records, labels, what=what)
        rest = [i for i in range(len(records)) if i not in held]
        out = np.zeros((len(records), len(labels)), dtype=np.float32)
        if rest:
            part = [records[i] for i in rest]
            out[rest] = predict_proba(clf, part, batch_size=batch_size, progress=progress)[:, cols]
        for i, row in held.items():
            out[i] = row
        log.info("%s: %d rows out of fold, %d from %s", what, len(held), len(rest), ref)
    del clf
    return out / np.clip(out.sum(axis=1, keepdims=True), 1e-12, None)


def out_of_fold_probs(
    ref: str | Path, records: Sequence[Record], labels: Sequence[str], *, what: str
) -> dict[int, np.ndarray]:
    """Row index → out-of-fold probabilities (``labels`` order) of the records found, by id
    and hypothesis, in ``ref``'s cross-fit file; a folder without one is refused."""
    from zdebias.data.readers import read_records

    path = Path(ref) / CROSS_FIT_FILE
    if not path.is_file():
        raise ConfigError(
            f"{what} {ref}: no {CROSS_FIT_FILE}, so no out-of-fold probabilities; train it with "
            "--cross-fit K, or leave out --bias-out-of-fold"
        )
    found = {
        (r.id, r.hypothesis): r.meta["hypo_only_probs"]
        for r in read_records(path, format="jsonl")
        if isinstance(r.meta.get("hypo_only_probs"), dict)
    }
    out = {}
    for i, r in enumerate(records):
        probs = found.get((r.id, r.hypothesis))
        if probs is not None:
            out[i] = np.array([float(probs[name]) for name in labels])
    return out


def _hidden_size(config: Any) -> int:
    for name in ("hidden_size", "d_model", "n_embd", "dim"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    raise ConfigError("cannot find the model's hidden size for the Learned-Mixin gate")


def _encode(
    tokenizer: Any,
    records: Sequence[Record],
    kind: InputKind,
    ids: np.ndarray,
    max_length: int,
    extras: dict[str, np.ndarray | None],
    *,
    with_hypothesis: bool = False,
    index: bool = False,
) -> ListDataset:
    first, second = model_inputs(records, kind)
    enc = tokenizer(first, second, truncation=True, max_length=max_length)
    keys = list(enc.keys())
    hyp = None
    if with_hypothesis:  # joint PoE: the bias head reads the hypothesis alone
        hypotheses = [r.hypothesis or "" for r in records]
        hyp = tokenizer(hypotheses, truncation=True, max_length=max_length)
    rows: list[dict[str, Any]] = []
    for i in range(len(records)):
        row: dict[str, Any] = {k: enc[k][i] for k in keys}
        if hyp is not None:
            row.update({HYP_PREFIX + k: hyp[k][i] for k in hyp.keys()})
        row["labels"] = int(ids[i])
        if index:
            row[INDEX_COLUMN] = i
        for key, values in extras.items():
            if values is not None:
                row[key] = values[i].astype(np.float32)
        rows.append(row)
    return ListDataset(rows)


def _device_settings(device: str | None) -> dict[str, Any]:
    if device not in (None, "auto", "cpu", "cuda"):
        raise ConfigError(f"unknown device {device!r}; expected auto, cpu or cuda")
    use_gpu = not train_on_cpu(None if device == "auto" else device)
    bf16 = use_gpu and torch.cuda.is_bf16_supported()
    out: dict[str, Any] = {"use_cpu": not use_gpu, "bf16": bf16, "fp16": use_gpu and not bf16}
    if use_gpu:  # pinned batches copied without waiting (HF pins them on a GPU by default)
        out.update(gpu_arguments())
    return out


# --------------------------------------------------------------------------- public API


def train_classifier(
    train: Sequence[Record],
    dev: Sequence[Record] | None,
    out_dir: str | Path,
    settings: ClassifierSettings | None = None,
    *,
    task: str | Task | None = None,
    progress: bool = True,
    overwrite: bool = False,
    tell_steps: bool = False,
    train_file: str | Path | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Fine-tune ``settings.model`` on ``train``, keep the best epoch on ``dev``, save a
    classifier folder in ``out_dir``; returns the metrics also written to ``OUT/metrics.json``.

    ``settings``: a :class:`~zdebias.classify.settings.ClassifierSettings` (default: GD-NLI
    Table 9); ``overrides``: any of its fields by keyword (``loss="poe"``). ``task``: the label
    set (default: inferred from the records). ``input_kind``: ``pair`` (premise + hypothesis),
    ``hypothesis-only`` or ``text``; default ``pair`` for pair records, ``text`` otherwise.
    ``loss``: ``ce``, ``poe``, ``learned-mixin``, ``learned-mixin-h`` or ``conf-reg``; the last
    four need ``bias_model`` (a trained hypothesis-only classifier folder) and ``conf-reg`` also
    ``teacher_model`` (a classifier trained with plain CE). Bias and teacher probabilities are
    computed once, over the training set, before training. ``eval_steps`` evaluates every N
    steps instead of every epoch (patience then counts evaluations). ``subset`` /
    ``dev_subset`` train / evaluate on a seeded random subset; ``cross_fit`` K (hypothesis-only)
    also writes K-fold out-of-fold predictions to ``OUT/cross_fit_predictions.jsonl``
    (:func:`cross_fit_predictions`; summary under ``"cross_fit"`` in the returned metrics).
    ``progress=False`` silences HF's bars and log lines. ``tell_steps``: the planned steps
    at the start and the steps done and time taken at the end go to stderr even with
    ``-q`` (``zdebias train-classifier``); otherwise they are logged, as the estimate of the
    time left is (:class:`~zdebias.models.training_run.StepsClock`). ``train_file``: the file
    ``train`` was read from; when it is a z-filter's kept rows, the metrics record the filter's
    hypothesis-only model under ``train_filter``
    (:func:`~zdebias.data.recorded.filter_provenance`).
    """
    s = ClassifierSettings.of(settings, **overrides)
    s.check()
    train = subset_records(train, s.subset, s.seed)
    dev = subset_records(dev, s.dev_subset, s.seed) if dev is not None else None
    with hf_progress(progress):
        metrics = _train(
            train,
            dev,
            out_dir,
            s,
            task=task,
            progress=progress,
            overwrite=overwrite,
            tell_steps=tell_steps,
            provenance=filter_provenance(train_file) if train_file is not None else None,
        )
    if s.cross_fit is not None:
        out_file = Path(out_dir) / CROSS_FIT_FILE
        folds_dir = Path(out_dir) / "folds" if s.keep_folds else None
        done = cross_fit_predictions(
            train, dev, out_file, s, task=task, folds_dir=folds_dir, progress=progress
        )
        correct = sum(r.meta["hypo_only_pred"] == r.label for r in done)
        metrics["cross_fit"] = {
            "k": s.cross_fit,
            "file": str(out_file),
            "n": len(done),
            "out_of_fold_accuracy": correct / len(done),
        }
    return metrics


def _train(
    train: Sequence[Record],
    dev: Sequence[Record] | None,
    out_dir: str | Path,
    s: ClassifierSettings,
    *,
    task: str | Task | None,
    progress: bool,
    overwrite: bool,
    tell_steps: bool = False,
    provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, set_seed
    from transformers.utils import logging as hf_logging

    started = time.time()
    out = Path(out_dir)
    if not train:
        raise DataError("the training set is empty")
    check_out_dir(out, overwrite=overwrite)
    check_extra(ClassifierTrainingArguments, s, own=_OWN_ARGUMENTS)
    the_task = get_task(task) if task is not None else infer_task(train)
    labels = list(the_task.labels)
    pair = train[0].is_pair
    kind: InputKind = s.input_kind or ("pair" if pair else "text")
    if kind not in INPUT_KINDS:
        raise ConfigError(f"unknown input {kind!r}; expected one of {', '.join(INPUT_KINDS)}")
    if kind in ("pair", "hypothesis-only") and not pair:
        raise ConfigError(
            f"input {kind!r} needs premise/hypothesis records; these are single "
            "texts (use --input-kind text)"
        )
    if s.loss not in LOSSES:
        raise ConfigError(f"unknown loss {s.loss!r}; expected one of {', '.join(LOSSES)}")
    needs = loss_needs(s.loss)
    joint = s.effective_bias_mode() == "joint"
    if joint:
        if kind != "pair":
            raise ConfigError("joint PoE needs premise/hypothesis pairs (--input-kind pair)")
        needs = needs - {"bias_probs"}
    if "bias_probs" in needs and s.bias_model is None:
        raise ConfigError(f"loss {s.loss!r} needs --bias-model (a hypothesis-only classifier)")
    if "teacher_probs" in needs and s.teacher_model is None:
        raise ConfigError(f"loss {s.loss!r} needs --teacher-model (a classifier trained with ce)")
    train_ids = label_ids(train, labels, "training")
    dev_ids = label_ids(dev, labels, "dev") if dev else None

    # what the loss reads beside the logits, computed once over the training set
    extras: dict[str, np.ndarray | None] = dict.fromkeys(_EXTRA_COLUMNS)
    sources = {
        "bias_probs": ("bias model", s.bias_model),
        "teacher_probs": ("teacher model", s.teacher_model),
    }
    for key, (what, ref) in sources.items():
        if key in needs and ref is not None:  # checked above: a loss's model is given
            extras[key] = aligned_probs(
                ref,
                train,
                labels,
                what=what,
                progress=progress,
                out_of_fold=s.bias_out_of_fold and key == "bias_probs",
            )

    set_seed(s.seed)
    source = resolve_model(s.model)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "newly initialised head" notices are expected here
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        net = AutoModelForSequenceClassification.from_pretrained(
            source,
            num_labels=len(labels),
            id2label=dict(enumerate(labels)),
            label2id={n: i for i, n in enumerate(labels)},
            ignore_mismatched_sizes=True,
        )
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot load model {s.model!s}: {' '.join(str(err).split())}") from None
    finally:
        hf_logging.set_verbosity(verbosity)
    warn_vocabulary(tokenizer, train, s.model)  # an English model given Chinese, ...
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    if net.config.pad_token_id is None:
        net.config.pad_token_id = tokenizer.pad_token_id
    if "gate_logits" in needs:
        net.add_module(GATE_ATTR, torch.nn.Linear(_hidden_size(net.config), 1))
    if joint:
        net.add_module(BIAS_HEAD_ATTR, torch.nn.Linear(_hidden_size(net.config), len(labels)))

    train_ds = _encode(
        tokenizer,
        train,
        kind,
        train_ids,
        s.max_length,
        extras,
        with_hypothesis=joint,
        index=True,
    )
    dev_ds = None
    if dev and dev_ids is not None:  # evaluation order is free: sorted by length, batches pad less
        dev_ds = _encode(tokenizer, dev, kind, dev_ids, s.max_length, {})
        dev_ds.rows.sort(key=lambda row: len(row["input_ids"]))

    # under `torchrun` / `accelerate launch` --batch-size is per process: a step takes
    # batch_size × processes examples (HF's convention)
    steps_per_epoch = max(1, -(-len(train_ds) // (s.batch_size * world_size())))
    schedule = s.schedule()
    total_steps = schedule.total_steps(steps_per_epoch, s.max_steps)
    # the floor: small data repeats epochs until min_steps optimizer steps (HF's max_steps);
    # such a run is evaluated about FLOOR_EVALUATIONS times, not after each of its many short epochs
    floored = s.max_steps <= 0 and total_steps > schedule.epoch_steps(steps_per_epoch)
    max_steps = total_steps if floored else s.max_steps
    eval_steps = s.eval_steps
    if floored and eval_steps is None:
        eval_steps = max(steps_per_epoch, -(-total_steps // FLOOR_EVALUATIONS))
    if schedule.warmup_steps >= total_steps:
        sys.stderr.write(
            f"note: {schedule.warmup_steps} warm-up steps >= {total_steps} training steps; the "
            "learning rate never reaches its peak (lower --warmup-steps or raise --min-steps)\n"
        )
    evaluate = dev_ds is not None
    models = [model_identity(m) for m in (s.model, s.bias_model, s.teacher_model) if m]
    identity = (records_digest(train), records_digest(dev or []), models, the_task.name)
    base = dict(
        loss=s.loss,
        poe_beta=s.beta,
        poe_gamma=s.gamma,
        entropy_weight=s.entropy_weight,
        seed=s.seed,
        data_seed=s.seed,
        learning_rate=schedule.learning_rate,
        adam_epsilon=1e-6,
        adam_beta1=0.9,
        adam_beta2=0.999,
        weight_decay=0.0,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=schedule.warmup_steps,
        per_device_train_batch_size=s.batch_size,
        per_device_eval_batch_size=s.eval_batch_size,
        num_train_epochs=schedule.epochs,
        max_steps=max_steps,
        eval_strategy=("steps" if eval_steps else "epoch") if evaluate else "no",
        eval_steps=eval_steps,
        logging_strategy="steps",
        logging_steps=max(1, min(50, steps_per_epoch)),
        disable_tqdm=not progress,
        remove_unused_columns=False,
        label_names=["labels"],
        dataloader_num_workers=0,
        train_sampling_strategy="group_by_length" if s.group_by_length else "random",
        **_device_settings(torch_device(s.device)),
    )
    if joint or "gate_logits" in needs:
        # the bias head / mixin gate run outside the DDP-wrapped forward: DDP must not look
        # for unused parameters (it would count theirs twice); every parameter gets a gradient
        base["ddp_find_unused_parameters"] = False
    best = BestEpochCallback(s.patience)
    dynamics = DynamicsRecorder(len(train_ds))

    def accuracy(pred: Any) -> dict[str, float]:
        logits = pred.predictions[0] if isinstance(pred.predictions, tuple) else pred.predictions
        return {"accuracy": float((np.argmax(logits, axis=-1) == pred.label_ids).mean())}

    with TrainingRun(out, s, *identity) as run:
        args = run.arguments(ClassifierTrainingArguments, base)
        trainer = ClassifierTrainer(
            model=net,
            args=args,
            data_collator=_Collator(
                tokenizer, pad_to_multiple_of=None if args.use_cpu else GPU_PAD_MULTIPLE
            ),
            train_dataset=train_ds,
            eval_dataset=dev_ds,
            processing_class=tokenizer,
            compute_metrics=accuracy,
            callbacks=[best, dynamics, run.checkpoints],  # dynamics merged before a save
        )
        trainer.dynamics = dynamics
        route_logs(trainer)  # off stdout: logged, or under the progress bar on stderr
        plan = (
            f"{steps_per_epoch:,} per epoch of {len(train_ds):,} examples, "
            f"{s.batch_size * world_size():,} a step"
            + (f"; epochs repeated up to {schedule.min_steps:,} steps" if floored else "")
        )
        trainer.add_callback(StepsClock("train-classifier", plan, trainer, always=tell_steps))
        resume = run.resume(trainer, early_stopping=best, training_dynamics=dynamics)
        result = trainer.train(resume_from_checkpoint=resume)
        best.restore_best(net)
        for attr in (GATE_ATTR, BIAS_HEAD_ATTR):
            if hasattr(net, attr):
                delattr(net, attr)
        info = {
            "input": kind,
            "task": the_task.name,
            "labels": labels,
            "max_length": s.max_length,
            "loss": s.loss,
            "base_model": str(s.model),
            "seed": s.seed,
            "created_by": "zdebias train-classifier",
        }
        metrics = {
            "model": str(s.model),
            "task": the_task.name,
            "labels": labels,
            "input": kind,
            "loss": s.loss,
            "seed": s.seed,
            "settings": {
                "learning_rate": schedule.learning_rate,
                "batch_size": s.batch_size,
                "epochs": schedule.epochs,
                "max_steps": s.max_steps,
                "min_steps": schedule.min_steps,
                "floored": floored,
                "warmup_steps": schedule.warmup_steps,
                "max_length": s.max_length,
                "patience": s.patience,
                "eval_steps": eval_steps,
                "adam_epsilon": 1e-6,
                "group_by_length": s.group_by_length,
                "scheduler": "constant_with_warmup",
                "bias_mode": s.effective_bias_mode(),
                "beta": s.beta,
                "gamma": s.gamma,
                "entropy_weight": s.entropy_weight,
                "bias_model": str(s.bias_model) if s.bias_model else None,
                "teacher_model": str(s.teacher_model) if s.teacher_model else None,
                "device": "cpu" if args.use_cpu else "cuda",
                "precision": "bf16" if args.bf16 else "fp16" if args.fp16 else "fp32",
            },
            "compute": compute_record(  # the precision is always chosen for the device
                args.device,
                "bfloat16" if args.bf16 else "float16" if args.fp16 else "float32",
                setting="auto",
            ),
            "n_train": len(train),
            # which rows it learnt from, as a shortcut split records its bias model's: evaluate
            # warns when a split's bias model learnt from the rows this run's bias expert did
            "train_rows_digest": rows_digest(train),
            "n_dev": len(dev) if dev else 0,
            "train_label_counts": dict(Counter(r.label for r in train)),
            "dev_label_counts": dict(Counter(r.label for r in dev)) if dev else {},
            "steps": int(result.global_step),
            "train_loss": run.train_loss(result),  # a resumed run's: over all its steps
            "train_runtime_s": round(
                float(result.metrics.get("train_runtime", 0.0)) + run.seconds_before, 3
            ),
            "train_samples_per_second": float(result.metrics.get("train_samples_per_second", 0)),
            "history": best.history,
            "log_history": trainer.state.log_history,
            "best": {
                "step": best.best_step,
                "epoch": best.best_epoch,
                "dev_accuracy": best.best_accuracy,
            },
            "stopped_early": best.stopped_early,
            "resumed_from_step": run.resumed_from,
            "training_dynamics": None,  # filled in when saved
            "wall_time_s": round(time.time() - started + run.seconds_before, 3),
        }
        metrics["did_not_learn"] = did_not_learn(metrics)
        late = None if metrics["did_not_learn"] else slow_start(metrics)
        if late:
            metrics["slow_start"] = late
        if provenance is not None:  # evaluate warns when a split shares the filter's model
            metrics["train_filter"] = provenance
        if metrics["did_not_learn"] and is_main_process() and warn_unlearned():
            log.warning(
                "%s: this training did not learn (%s): its predictions are no better than "
                "chance. Try a lower learning rate (e.g. 2e-5), more steps (--min-steps) or "
                "another seed.",
                out,
                metrics["did_not_learn"],
            )
        elif late and is_main_process() and warn_unlearned():
            log.warning(
                "%s: a slow start: the training loss stayed at chance level for its first %d of "
                "%d steps, so this run may end far below other seeds. Try another batch order "
                "(--no-group-by-length) or more steps (--min-steps); docs/classify.md, 'A seed "
                "that trains poorly'.",
                out,
                late["steps"],
                late["of"],
            )

        def save(folder: Path) -> None:
            net.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
            labels_of = [r.label for r in train]
            metrics["training_dynamics"] = dynamics.write(folder, [r.id for r in train], labels_of)
            write_json(info, folder / CLASSIFIER_INFO)
            write_json(metrics, folder / METRICS_FILE)

        run.publish(trainer, save, overwrite=overwrite)
    return metrics


def fold_assignment(n: int, k: int, seed: int = DEFAULT_SEED) -> np.ndarray:
    """Fold index (``0..k-1``) of each of ``n`` examples: a seeded shuffle cut into ``k``
    near-equal folds."""
    if k < 2:
        raise ConfigError(f"cross-fitting needs at least 2 folds, got {k}")
    if n < k:
        raise ConfigError(f"cannot cut {n} examples into {k} folds")
    order = np.random.default_rng(seed).permutation(n)
    folds = np.empty(n, dtype=np.int64)
    folds[order] = np.arange(n) % k
    return folds


def cross_fit_predictions(
    records: Sequence[Record],
    dev: Sequence[Record] | None,
    out_file: str | Path,
    settings: ClassifierSettings | None = None,
    *,
    progress: bool = True,
    task: str | Task | None = None,
    folds_dir: str | Path | None = None,
    **overrides: Any,
) -> list[Record]:
    """Out-of-fold hypothesis-only predictions for every record (docs/design.md §2
    ``hypo-only-pred``).

    Trains K = ``cross_fit`` (default 5) hypothesis-only classifiers with ``settings``, each on
    K − 1 folds, and predicts the held-out fold, so no record is labelled by a model that saw
    it. Each returned record carries ``meta["hypo_only_pred"]`` (label name),
    ``meta["hypo_only_probs"]`` and ``meta["hypo_only_fold"]``; they are also written to
    ``out_file``. Fold models are kept in ``folds_dir`` when given, else deleted.
    """
    s = ClassifierSettings.of(settings, **overrides)
    k = s.cross_fit or DEFAULT_FOLDS
    fold_settings = ClassifierSettings.of(
        s,
        input_kind="hypothesis-only",
        cross_fit=None,
        keep_folds=False,
        subset=None,
        dev_subset=None,
    )
    records = list(records)
    folds = fold_assignment(len(records), k, s.seed)
    task = task or infer_task(records)
    labels = list(get_task(task).labels)
    result: list[Record | None] = [None] * len(records)
    keep = folds_dir is not None
    main = is_main_process()
    if keep:
        base = Path(folds_dir)  # type: ignore[arg-type]
    elif world_size() > 1:  # several processes: one folder they all know, the main one's
        base = Path(out_file).parent / f".{Path(out_file).name}.folds"
    else:
        base = Path(tempfile.mkdtemp(prefix=".zdebias-folds-"))
    try:
        for fold in range(k):
            if progress and main:
                sys.stderr.write(f"cross-fit: fold {fold + 1}/{k}\n")
            held = [i for i in range(len(records)) if folds[i] == fold]
            fit = [records[i] for i in range(len(records)) if folds[i] != fold]
            fold_dir = base / f"fold-{fold}"
            train_classifier(fit, dev, fold_dir, fold_settings, task=task, progress=progress)
            if not main:  # every process trains the folds; the main one predicts and writes
                continue
            probs = predict_proba(fold_dir, [records[i] for i in held])
            clf_labels = load_labels(fold_dir)
            for row, i in enumerate(held):
                dist = {name: float(probs[row, j]) for j, name in enumerate(clf_labels)}
                best_label = clf_labels[int(np.argmax(probs[row]))]
                meta = {
                    **records[i].meta,
                    "hypo_only_pred": best_label,
                    "hypo_only_probs": {n: dist[n] for n in labels},
                    "hypo_only_fold": fold,
                }
                result[i] = records[i].replace(meta=meta)
            if not keep:
                shutil.rmtree(fold_dir, ignore_errors=True)
    finally:
        if not keep and main:
            with contextlib.suppress(OSError):
                shutil.rmtree(base)
    if main:
        done = [r for r in result if r is not None]
        write_records(done, out_file)
    barrier()
    if not main:
        from zdebias.data.readers import read_records

        done = read_records(out_file)
    return done


def load_labels(folder: str | Path) -> list[str]:
    """Label names of a saved classifier folder, in id order (from its config)."""
    import json

    config = json.loads((Path(folder) / "config.json").read_text())
    id2label = config.get("id2label") or {}
    return [str(id2label[str(i)]) for i in range(len(id2label))]
