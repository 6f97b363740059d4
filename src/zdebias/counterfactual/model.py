"""Infiller models: architecture detection, base models made ready, trained folders loaded.

Architectures (``arch``):

- ``seq2seq``: any HF encoder-decoder (T5 family: its own ``<extra_id_i>`` sentinels);
- ``bert2bert``: an ``EncoderDecoderModel`` built from a BERT-type encoder (e.g. ``minilm``),
  with sentinels added to its vocabulary;
- ``causal``: a decoder-only LM (e.g. ``smollm2``) fed an infilling prompt.

A trained infiller folder holds the HF model, its tokenizer and :data:`INFO_FILE`. Torch and
transformers are imported inside the functions only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from zdebias.counterfactual.format import Arch, add_sentinels, eos_id
from zdebias.errors import ConfigError
from zdebias.models.compute import model_device
from zdebias.models.resolve import resolve_model

if TYPE_CHECKING:
    from torch.nn import Embedding

#: The settings file that marks a trained infiller folder.
INFO_FILE = "zdebias_infiller.json"


def is_infiller(path: str | Path) -> bool:
    """Whether ``path`` is a trained infiller folder (it holds :data:`INFO_FILE`)."""
    return (Path(path) / INFO_FILE).is_file()


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
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as err:  # an unknown name offline: one line, no traceback
        raise ConfigError(f"cannot load model {ref!s}: {' '.join(str(err).split())}") from None
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
        embeddings = cast("Embedding", model.get_input_embeddings())  # typed as a Module
        if len(tok) > embeddings.num_embeddings:
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
    device = model_device(device)
    model.to(device).eval()  # type: ignore[arg-type]  # transformers: .to typed unbound (functools.wraps)
    return LoadedInfiller(model, tok, arch, info)  # type: ignore[arg-type]
