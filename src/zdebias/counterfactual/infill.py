"""Label-controlled infilling with unlikelihood (AutoCAD §3.2, SPEC §10.2).

The infiller sees the example with every rationale span replaced by a sentinel, plus a label,
and writes the fillers::

    source  "contradiction hypothesis: The <extra_id_0> is <extra_id_1>. premise: A man ..."
    target  "<extra_id_0> man<extra_id_1> sleeping</s>"

Sentinels are numbered in source order (hypothesis first, then premise; ``sentence:`` for
single-text tasks). Training loss per example::

    L = MLE(fillers | original label) + α · UL(original fillers | each wrong label)
    UL = mean over filler tokens t of −log(1 − p(z_t | x − z, ŷ, z_<t))

The unlikelihood term only touches filler (rationale) tokens: sentinels, padding and EOS are
masked out (``ul_mask``). α = 1 for NLI and 0.3 for sentiment (the paper's defaults).

Architectures (``arch``):

- ``seq2seq``: any HF encoder-decoder (T5 family: its own ``<extra_id_i>`` sentinels);
- ``bert2bert``: an ``EncoderDecoderModel`` built from a BERT-type encoder (e.g. ``minilm``),
  with sentinels added to its vocabulary;
- ``causal``: a decoder-only LM (e.g. ``smollm2``) fed ``source + "\\nfillers:"`` as a prompt,
  trained on the target tokens only.

The trainer is an HF ``Trainer`` subclass that only overrides ``compute_loss``; the losses are
plain functions picked from ``LOSSES`` by name.
"""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError, ZdebiasError
from zdebias.models.resolve import resolve_model

Arch = Literal["seq2seq", "bert2bert", "causal"]
Span = tuple[int, int]

SENTINEL = "<extra_id_{}>"
N_SENTINELS = 100
INFO_FILE = "zdebias_infiller.json"
CAUSAL_PROMPT_END = "\nfillers:"
PAIR_ORDER = ("hypothesis", "premise")
#: α defaults of the paper: 1 for NLI (pair tasks), 0.3 for sentiment (single text).
DEFAULT_ALPHA = {True: 1.0, False: 0.3}


# --------------------------------------------------------------------------- text format


def field_order(record: Record) -> tuple[str, ...]:
    """Fields in source order: hypothesis then premise (AutoCAD's format), or text."""
    return PAIR_ORDER if record.is_pair else ("text",)


def mask_record(
    record: Record, spans: dict[str, Sequence[Span]]
) -> tuple[dict[str, str], list[str]]:
    """Replace each span by the next sentinel; return masked fields and the original fillers."""
    masked: dict[str, str] = {}
    fillers: list[str] = []
    for name in field_order(record):
        text = getattr(record, name) or ""
        pieces: list[str] = []
        pos = 0
        for start, end in spans.get(name, ()):
            pieces.append(text[pos:start])
            pieces.append(SENTINEL.format(len(fillers)))
            fillers.append(text[start:end])
            pos = end
        pieces.append(text[pos:])
        masked[name] = "".join(pieces)
    return masked, fillers


def source_text(label: str, masked: dict[str, str]) -> str:
    """``<label> hypothesis: H premise: P`` (pair) or ``<label> sentence: T`` (single text)."""
    if "text" in masked:
        return f"{label} sentence: {masked['text']}"
    return f"{label} hypothesis: {masked['hypothesis']} premise: {masked['premise']}"


def target_text(fillers: Sequence[str]) -> str:
    """``<extra_id_0> f0<extra_id_1> f1...`` (EOS is appended as a token id)."""
    return "".join(f"{SENTINEL.format(i)} {f}" for i, f in enumerate(fillers))


def rebuild(record: Record, spans: dict[str, Sequence[Span]], fillers: Sequence[str]) -> Record:
    """The record with span ``i`` (in source order) replaced by ``fillers[i]``.

    An empty filler deletes its span together with one neighbouring space.
    """
    changes: dict[str, str] = {}
    k = 0
    for name in field_order(record):
        text = getattr(record, name) or ""
        out = ""
        pos = 0
        for start, end in spans.get(name, ()):
            left = text[pos:start]
            filler = fillers[k].strip()
            k += 1
            if not filler:
                right = text[end : end + 1]
                if left.endswith(" ") and not right.isalnum():
                    left = left[:-1]
            out += left + filler
            pos = end
        out += text[pos:]
        changes[name] = out.strip()
    if k != len(fillers):
        raise ValueError(f"{len(fillers)} fillers for {k} spans")
    return record.replace(**changes)


# --------------------------------------------------------------------------- tokens


def eos_id(tokenizer: Any) -> int:
    """The id that ends a target: EOS, or ``[SEP]`` for BERT vocabularies."""
    value = tokenizer.eos_token_id
    if value is None:
        value = tokenizer.sep_token_id
    if value is None:
        raise ConfigError("the infiller tokenizer has neither an EOS nor a SEP token")
    return int(value)


def sentinel_ids(tokenizer: Any, n: int = N_SENTINELS) -> list[int]:
    """Ids of ``<extra_id_0>`` .. ``<extra_id_{n-1}>`` (those the tokenizer has)."""
    out = []
    unk = tokenizer.unk_token_id
    for i in range(n):
        tid = tokenizer.convert_tokens_to_ids(SENTINEL.format(i))
        if tid is None or tid == unk:
            break
        out.append(int(tid))
    return out


def special_ids(tokenizer: Any) -> set[int]:
    """Every id that is never a rationale token: sentinels, pad, EOS/BOS, CLS/SEP, UNK, ..."""
    ids = set(sentinel_ids(tokenizer))
    ids.update(int(i) for i in tokenizer.all_special_ids if i is not None)
    for name in ("pad", "eos", "bos", "cls", "sep", "unk", "mask"):
        value = getattr(tokenizer, f"{name}_token_id", None)
        if value is not None:
            ids.add(int(value))
    return ids


def add_sentinels(tokenizer: Any, n: int = N_SENTINELS) -> int:
    """Add missing ``<extra_id_i>`` special tokens; returns how many were added."""
    have = len(sentinel_ids(tokenizer, n))
    if have >= n:
        return 0
    return tokenizer.add_tokens([SENTINEL.format(i) for i in range(have, n)], special_tokens=True)


@dataclass
class Encoded:
    """Token ids of one (source, target) variant; ``ul_mask`` marks filler tokens."""

    input_ids: list[int]
    labels: list[int]
    ul_mask: list[int]


def encode_target(
    tokenizer: Any, fillers: Sequence[str], max_length: int
) -> tuple[list[int], list[int]]:
    """Target ids ``sentinel_0 f0 ... EOS`` and the mask of its filler tokens."""
    ids = tokenizer(target_text(fillers), add_special_tokens=False)["input_ids"][: max_length - 1]
    ids = [*ids, eos_id(tokenizer)]
    specials = special_ids(tokenizer)
    return ids, [0 if t in specials else 1 for t in ids]


def encode_source(
    tokenizer: Any, arch: Arch, source: str, n_spans: int, *, max_length: int
) -> list[int] | None:
    """Source ids (a causal prompt ends with ``\nfillers:``), cut to ``max_length`` tokens.

    Text after the last sentinel may be cut; ``None`` when a sentinel itself would be lost.
    """
    if arch == "causal":
        ids = tokenizer(source, add_special_tokens=False)["input_ids"]
        end = tokenizer(CAUSAL_PROMPT_END, add_special_tokens=False)["input_ids"]
        ids = [*ids[: max(0, max_length - len(end))], *end]
    else:
        ids = tokenizer(source, truncation=True, max_length=max_length)["input_ids"]
    wanted = set(sentinel_ids(tokenizer)[:n_spans])
    if len(wanted & set(ids)) < n_spans:
        return None
    return ids


def encode_variant(
    tokenizer: Any,
    arch: Arch,
    source: str,
    n_spans: int,
    target_ids: list[int],
    target_mask: list[int],
    *,
    max_source_length: int,
) -> Encoded | None:
    """One training row; ``None`` when truncating the source would lose a sentinel."""
    ids = encode_source(tokenizer, arch, source, n_spans, max_length=max_source_length)
    if ids is None:
        return None
    if arch == "causal":
        return Encoded(
            [*ids, *target_ids],
            [-100] * len(ids) + target_ids,
            [0] * len(ids) + target_mask,
        )
    return Encoded(ids, list(target_ids), list(target_mask))


def encode_example(
    tokenizer: Any,
    arch: Arch,
    record: Record,
    spans: dict[str, Sequence[Span]],
    labels: Sequence[str],
    *,
    wrong_labels: bool = True,
    max_source_length: int = 256,
    max_target_length: int = 64,
) -> list[Encoded] | str:
    """Variants for one example: original label first, then each wrong label (if asked).

    Returns a reason string instead when the example cannot be used.
    """
    masked, fillers = mask_record(record, spans)
    if not fillers:
        return "no spans"
    sentinels = sentinel_ids(tokenizer)
    if len(fillers) > len(sentinels):
        return "more spans than sentinels"
    target_ids, target_mask = encode_target(tokenizer, fillers, max_target_length)
    wanted = set(sentinels[: len(fillers)])
    if sum(1 for t in target_ids if t in wanted) < len(fillers):
        return "target longer than max_target_length"
    if record.label not in labels:
        return f"label {record.label!r} not in {list(labels)}"
    order = [record.label, *(lab for lab in labels if lab != record.label and wrong_labels)]
    out = []
    for lab in order:
        enc = encode_variant(
            tokenizer,
            arch,
            source_text(lab, masked),
            len(fillers),
            target_ids,
            target_mask,
            max_source_length=max_source_length,
        )
        if enc is None:
            return "a span lies beyond max_source_length"
        out.append(enc)
    return out


# --------------------------------------------------------------------------- losses


def _log1mexp(logp: Any) -> Any:
    """``log(1 − exp(logp))`` for ``logp <= 0``, accurate at both ends, clamped finite."""
    import torch

    logp = logp.clamp(max=-1e-7)
    return torch.where(
        logp > -math.log(2.0), torch.log(-torch.expm1(logp)), torch.log1p(-torch.exp(logp))
    )


def token_nll(logits: Any, labels: Any, mask: Any) -> Any:
    """Mean negative log-likelihood of ``labels`` over positions where ``mask`` is set.

    ``logits [N, T, V]``, ``labels [N, T]`` (any value where masked out), ``mask [N, T]``.
    """
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    picked = logp.gather(-1, labels.clamp_min(0).unsqueeze(-1)).squeeze(-1)
    mask = mask.to(picked.dtype)
    return -(picked * mask).sum() / mask.sum().clamp_min(1.0)


def token_unlikelihood(logits: Any, labels: Any, mask: Any) -> Any:
    """Mean of ``−log(1 − p(label_t))`` over positions where ``mask`` is set."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    picked = logp.gather(-1, labels.clamp_min(0).unsqueeze(-1)).squeeze(-1)
    mask = mask.to(picked.dtype)
    return -(_log1mexp(picked) * mask).sum() / mask.sum().clamp_min(1.0)


LossFn = Callable[[Any, Any, Any], Any]
LOSSES: dict[str, LossFn] = {"mle": token_nll, "unlikelihood": token_unlikelihood}


def infill_loss(
    model: Any,
    batch: dict[str, Any],
    *,
    arch: Arch,
    alpha: float,
    mle: str = "mle",
    ul: str = "unlikelihood",
) -> tuple[Any, Any, Any, Any]:
    """``(loss, mle, ul, outputs)`` for a collated batch (see :class:`InfillCollator`).

    Rows with ``is_original`` get the likelihood term on all target tokens (fillers,
    sentinels, EOS); the other rows (wrong labels) get the unlikelihood term on ``ul_mask``.
    """
    import torch

    labels, ul_mask, is_orig = batch["labels"], batch["ul_mask"], batch["is_original"]
    kwargs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    if arch == "causal":
        outputs = model(**kwargs)
        logits = outputs.logits[:, :-1]
        labels, ul_mask = labels[:, 1:], ul_mask[:, 1:]
    else:
        kwargs["decoder_input_ids"] = model.prepare_decoder_input_ids_from_labels(labels)
        outputs = model(**kwargs)
        logits = outputs.logits
    mle_loss = LOSSES[mle](logits[is_orig], labels[is_orig], labels[is_orig] != -100)
    if alpha and bool((~is_orig).any()):
        ul_loss = LOSSES[ul](logits[~is_orig], labels[~is_orig], ul_mask[~is_orig].bool())
    else:
        ul_loss = torch.zeros((), device=logits.device)
    return mle_loss + alpha * ul_loss, mle_loss, ul_loss, outputs


class InfillCollator:
    """Flatten each example's variants into one padded batch with an ``is_original`` flag."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, Any]:
        import torch

        rows: list[Encoded] = []
        orig: list[bool] = []
        for feat in features:
            for j, enc in enumerate(feat["variants"]):
                rows.append(enc)
                orig.append(j == 0)
        n_in = max(len(r.input_ids) for r in rows)
        n_out = max(len(r.labels) for r in rows)

        def pad(seqs: list[list[int]], width: int, value: int) -> Any:
            return torch.tensor([s + [value] * (width - len(s)) for s in seqs], dtype=torch.long)

        return {
            "input_ids": pad([r.input_ids for r in rows], n_in, self.pad_id),
            "attention_mask": pad([[1] * len(r.input_ids) for r in rows], n_in, 0),
            "labels": pad([r.labels for r in rows], n_out, -100),
            "ul_mask": pad([r.ul_mask for r in rows], n_out, 0),
            "is_original": torch.tensor(orig, dtype=torch.bool),
        }


# --------------------------------------------------------------------------- models


def detect_arch(config: Any) -> Arch:
    """seq2seq for encoder-decoders, bert2bert for masked-LM encoders, else causal."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    if getattr(config, "is_encoder_decoder", False):
        return "seq2seq"
    if config.model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return "bert2bert"
    return "causal"


def load_base_infiller(ref: str | Path, arch: str = "auto") -> tuple[Any, Any, Arch]:
    """A pretrained model made ready for infilling: sentinels in its vocabulary, pad/EOS set."""
    from transformers import (
        AutoConfig,
        AutoModel,
        AutoModelForCausalLM,
        AutoModelForSeq2SeqLM,
        AutoTokenizer,
        EncoderDecoderModel,
    )

    path = resolve_model(ref)
    config = AutoConfig.from_pretrained(path)
    if arch == "auto":
        arch = detect_arch(config)
    if arch not in ("seq2seq", "bert2bert", "causal"):
        raise ConfigError(f"unknown arch {arch!r}; expected auto, seq2seq, bert2bert or causal")
    tok = AutoTokenizer.from_pretrained(path)
    add_sentinels(tok)
    if arch == "seq2seq":
        model = AutoModelForSeq2SeqLM.from_pretrained(path)
        if len(tok) > model.get_input_embeddings().num_embeddings:
            model.resize_token_embeddings(len(tok))
    elif arch == "bert2bert":
        encoder = AutoModel.from_pretrained(path)
        decoder = AutoModelForCausalLM.from_pretrained(
            path, is_decoder=True, add_cross_attention=True
        )
        encoder.resize_token_embeddings(len(tok))
        decoder.resize_token_embeddings(len(tok))
        model = EncoderDecoderModel(encoder=encoder, decoder=decoder)
        start = tok.cls_token_id if tok.cls_token_id is not None else tok.bos_token_id
        model.config.decoder_start_token_id = start
        model.config.pad_token_id = tok.pad_token_id
        model.config.eos_token_id = eos_id(tok)
        model.config.vocab_size = len(tok)
    else:
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        model = AutoModelForCausalLM.from_pretrained(path)
        if len(tok) > model.get_input_embeddings().num_embeddings:
            model.resize_token_embeddings(len(tok))
    gen = model.generation_config
    gen.pad_token_id = tok.pad_token_id
    gen.eos_token_id = eos_id(tok)
    if arch != "causal":
        gen.decoder_start_token_id = model.config.decoder_start_token_id
    return model, tok, arch  # type: ignore[return-value]


@dataclass
class LoadedInfiller:
    """An infiller ready to generate: model (eval mode), tokenizer, arch and saved settings."""

    model: Any
    tokenizer: Any
    arch: Arch
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def labels(self) -> list[str] | None:
        return self.info.get("labels")

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device


def load_infiller(
    ref: str | Path, *, arch: str = "auto", device: str | None = None
) -> LoadedInfiller:
    """A trained infiller folder, or any base model (the untrained, FlipDA-like baseline)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    path = resolve_model(ref)
    info_path = Path(path) / INFO_FILE
    if info_path.exists():
        info = json.loads(info_path.read_text())
        arch = info["arch"]
        tok = AutoTokenizer.from_pretrained(path)
        cls = AutoModelForCausalLM if arch == "causal" else AutoModelForSeq2SeqLM
        model = cls.from_pretrained(path)
        if arch == "causal" and tok.pad_token is None:
            tok.pad_token = tok.eos_token
    else:
        model, tok, arch = load_base_infiller(path, arch)
        info = {"arch": arch, "trained": False}
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device).eval()
    return LoadedInfiller(model, tok, arch, info)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- training


def encode_records(
    tokenizer: Any,
    arch: Arch,
    records: Sequence[Record],
    spans: Sequence[dict[str, Sequence[Span]]],
    labels: Sequence[str],
    *,
    wrong_labels: bool,
    max_source_length: int,
    max_target_length: int,
) -> tuple[list[dict[str, Any]], Counter[str]]:
    """Training features and a count of skipped examples by reason."""
    feats: list[dict[str, Any]] = []
    skipped: Counter[str] = Counter()
    for record, sp in zip(records, spans, strict=True):
        enc = encode_example(
            tokenizer,
            arch,
            record,
            sp,
            labels,
            wrong_labels=wrong_labels,
            max_source_length=max_source_length,
            max_target_length=max_target_length,
        )
        if isinstance(enc, str):
            skipped[enc] += 1
        else:
            feats.append({"variants": enc})
    return feats, skipped


def train_infiller(
    records: Sequence[Record],
    model_ref: str | Path,
    out_dir: str | Path,
    *,
    labels: Sequence[str],
    spans: Sequence[dict[str, Sequence[Span]]],
    alpha: float | None = None,
    arch: str = "auto",
    dev: tuple[Sequence[Record], Sequence[dict[str, Sequence[Span]]]] | None = None,
    epochs: float = 10,
    batch_size: int = 8,
    lr: float = 1e-5,
    weight_decay: float = 0.1,
    patience: int = 3,
    seed: int = 0,
    max_source_length: int = 256,
    max_target_length: int = 64,
    progress: bool = True,
    extra_info: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fine-tune an infiller on rationale-masked records; save it to ``out_dir``.

    ``spans[i]`` are the character spans to mask in ``records[i]``. With ``dev`` the model is
    evaluated each epoch, the best epoch (lowest dev loss) is kept and training stops after
    ``patience`` epochs without improvement. Returns a JSON-ready summary.
    """
    from transformers import EarlyStoppingCallback, set_seed

    from zdebias.data.writers import write_json

    if not records:
        raise ZdebiasError("no training records (did the rationale step keep any?)")
    pair = records[0].is_pair
    if alpha is None:
        alpha = DEFAULT_ALPHA[pair]
    set_seed(seed)
    model, tok, arch_ = load_base_infiller(model_ref, arch)
    feats, skipped = encode_records(
        tok,
        arch_,
        records,
        spans,
        labels,
        wrong_labels=alpha > 0,
        max_source_length=max_source_length,
        max_target_length=max_target_length,
    )
    if not feats:
        raise DataError(f"no usable training example: skipped {dict(skipped)}")
    dev_feats: list[dict[str, Any]] = []
    dev_skipped: Counter[str] = Counter()
    if dev is not None:
        dev_feats, dev_skipped = encode_records(
            tok,
            arch_,
            dev[0],
            dev[1],
            labels,
            wrong_labels=alpha > 0,
            max_source_length=max_source_length,
            max_target_length=max_target_length,
        )
    out = Path(out_dir)
    work = out / "checkpoints"
    from zdebias.counterfactual.trainer import InfillTrainer, InfillTrainingArguments

    has_dev = bool(dev_feats)
    args = InfillTrainingArguments(
        output_dir=str(work),
        alpha=alpha,
        infill_arch=arch_,
        num_train_epochs=epochs,
        per_device_train_batch_size=batch_size,
        per_device_eval_batch_size=batch_size,
        learning_rate=lr,
        weight_decay=weight_decay,
        adam_beta2=0.98,
        lr_scheduler_type="constant",
        seed=seed,
        report_to=[],
        remove_unused_columns=False,
        label_names=["labels"],
        logging_steps=max(1, min(50, math.ceil(len(feats) / batch_size))),
        eval_strategy="epoch" if has_dev else "no",
        save_strategy="epoch" if has_dev else "no",
        save_total_limit=1 if has_dev else None,
        load_best_model_at_end=has_dev,
        metric_for_best_model="eval_loss" if has_dev else None,
        greater_is_better=False if has_dev else None,
        prediction_loss_only=True,
        disable_tqdm=not progress,
        dataloader_num_workers=0,
        dataloader_pin_memory=False,
        save_only_model=True,
    )
    before = {n: p.detach().clone() for n, p in list(model.named_parameters())[:4]}
    trainer = InfillTrainer(
        model=model,
        args=args,
        train_dataset=feats,
        eval_dataset=dev_feats or None,
        data_collator=InfillCollator(tok.pad_token_id),
        processing_class=tok,
        callbacks=[EarlyStoppingCallback(early_stopping_patience=patience)] if has_dev else [],
    )
    result = trainer.train()
    eval_loss = trainer.evaluate()["eval_loss"] if has_dev else None
    changed = any(
        not bool((p.detach().cpu() == before[n].cpu()).all())
        for n, p in trainer.model.named_parameters()
        if n in before
    )
    trainer.model.save_pretrained(out)
    tok.save_pretrained(out)
    shutil.rmtree(work, ignore_errors=True)
    history = [
        {k: v for k, v in row.items() if k in ("epoch", "loss", "mle", "ul", "eval_loss")}
        for row in trainer.state.log_history
    ]
    info = {
        "arch": arch_,
        "base_model": str(model_ref),
        "labels": list(labels),
        "pair": pair,
        "alpha": alpha,
        "epochs": epochs,
        "batch_size": batch_size,
        "lr": lr,
        "max_source_length": max_source_length,
        "max_target_length": max_target_length,
        "trained": True,
        **(extra_info or {}),
    }
    write_json(info, out / INFO_FILE)
    summary = {
        **info,
        "out": str(out),
        "n_train": len(feats),
        "n_skipped": sum(skipped.values()),
        "skipped": dict(skipped),
        "n_dev": len(dev_feats),
        "n_dev_skipped": sum(dev_skipped.values()),
        "train_loss": round(float(result.training_loss), 6),
        "eval_loss": None if eval_loss is None else round(float(eval_loss), 6),
        "parameters_changed": changed,
        "history": [h for h in history if h],
    }
    write_json(summary, out / "train_summary.json")
    return summary
