"""Tiny random models for tests: BERT, GPT-2, Llama and T5 from small configs.

The tokenizers are trained here, in a second, on a built-in corpus (BPE / WordPiece), so tests
run fully offline and still see real sub-word splits.

>>> path = make_tiny_model("gpt2", tmp_path / "gpt2")   # doctest: +SKIP
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

Kind = Literal["bert", "gpt2", "llama", "t5"]

_CORPUS = """
A man is sleeping on a bench in the park. A woman is playing a guitar outside.
Two dogs are running through the snow. Nobody is sleeping. The child is eating an apple.
A group of people are standing near the water. The men are working on a broken umbrella.
A person is riding a bike down the street. People are sitting at a table and talking.
The woman is not outside. A boy jumps into a swimming pool. The cat sleeps on the sofa.
A girl in a red dress is dancing. The old man reads a newspaper. Some friends go to the beach.
A musician plays for the crowd at night. The team celebrates their win. It is raining today.
This movie was wonderful and moving. The film is boring, long and badly acted. I loved it.
Terrible acting, awful plot, never again. A charming and often affecting journey.
entailment neutral contradiction positive negative premise hypothesis label
""".split("\n")


def _corpus() -> list[str]:
    lines = [line.strip() for line in _CORPUS if line.strip()]
    return lines * 3 + [line.lower() for line in lines]


def tiny_tokenizer(kind: Kind, *, vocab_size: int = 400) -> PreTrainedTokenizerFast:
    """A fast tokenizer for ``kind``, trained on the built-in corpus."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    if kind == "bert":
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        tok.train_from_iterator(
            _corpus(), trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials)
        )
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
        )
        return PreTrainedTokenizerFast(
            tokenizer_object=tok,
            unk_token="[UNK]",
            pad_token="[PAD]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            mask_token="[MASK]",
            model_max_length=256,
        )
    if kind in ("gpt2", "llama"):
        eos = "<|endoftext|>"
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(
            _corpus(),
            trainers.BpeTrainer(
                vocab_size=vocab_size,
                special_tokens=[eos, "<pad>"],
                initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            ),
        )
        return PreTrainedTokenizerFast(
            tokenizer_object=tok,
            bos_token=eos,
            eos_token=eos,
            unk_token=eos,
            pad_token="<pad>",
            model_max_length=256,
        )
    if kind == "t5":
        extra = [f"<extra_id_{i}>" for i in range(20)]
        specials = ["<pad>", "</s>", "<unk>"]
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        tok.train_from_iterator(
            _corpus(),
            trainers.BpeTrainer(
                vocab_size=vocab_size,
                special_tokens=specials,
                initial_alphabet=[*string.ascii_letters, *string.digits, *string.punctuation],
            ),
        )
        tok.add_special_tokens(extra)
        tok.post_processor = processors.TemplateProcessing(
            single="$A </s>",
            pair="$A </s> $B </s>",
            special_tokens=[("</s>", tok.token_to_id("</s>"))],
        )
        return PreTrainedTokenizerFast(
            tokenizer_object=tok,
            eos_token="</s>",
            pad_token="<pad>",
            unk_token="<unk>",
            additional_special_tokens=extra,
            model_max_length=256,
        )
    raise ValueError(f"unknown tiny model kind {kind!r}; expected bert, gpt2, llama or t5")


#: what a tiny model is made for (``head="auto"``: its kind's default)
Head = Literal["classification", "encoder", "causal-lm", "seq2seq"]

#: kind → (transformers config class, sizes, special tokens the config names, default head)
_CONFIGS: dict[str, tuple[str, dict[str, int], tuple[str, ...], Head]] = {
    "bert": (
        "BertConfig",
        dict(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=256,
        ),
        ("pad",),
        "classification",
    ),
    "gpt2": (
        "GPT2Config",
        dict(n_embd=32, n_layer=2, n_head=2, n_positions=256),
        ("bos", "eos", "pad"),
        "causal-lm",
    ),
    "llama": (
        "LlamaConfig",
        dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=256,
        ),
        ("bos", "eos", "pad"),
        "causal-lm",
    ),
    "t5": (
        "T5Config",
        dict(d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2),
        ("pad", "eos"),
        "seq2seq",
    ),
}


def make_tiny_model(
    kind: Kind,
    out_dir: str | Path,
    *,
    num_labels: int = 3,
    labels: tuple[str, ...] | None = None,
    head: Literal["auto"] | Head = "auto",
    seed: int = 0,
) -> Path:
    """Build a random tiny model plus tokenizer and save them as an HF folder; return it.

    ``head="auto"``: BERT → sequence classification (``num_labels``), GPT-2 / Llama → causal
    LM, T5 → seq2seq LM. ``labels`` names the classes (defaults to NLI's three).
    """
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    tokenizer = tiny_tokenizer(kind)
    vocab = len(tokenizer)
    if kind not in _CONFIGS:
        raise ValueError(f"unknown tiny model kind {kind!r}")
    config_class, sizes, tokens, default_head = _CONFIGS[kind]
    head = default_head if head == "auto" else head
    ids = {f"{t}_token_id": getattr(tokenizer, f"{t}_token_id") for t in tokens}
    if kind == "t5":
        ids["decoder_start_token_id"] = tokenizer.pad_token_id
    config = getattr(tf, config_class)(vocab_size=vocab, **sizes, **ids)
    if head == "classification":
        names = labels or ("entailment", "neutral", "contradiction")[:num_labels]
        config.num_labels = len(names)
        config.id2label = dict(enumerate(names))
        config.label2id = {n: i for i, n in enumerate(names)}
        model = tf.AutoModelForSequenceClassification.from_config(config)
    elif head == "encoder":
        model = tf.AutoModel.from_config(config)
    elif head == "causal-lm":
        model = tf.AutoModelForCausalLM.from_config(config)
    elif head == "seq2seq":
        model = tf.AutoModelForSeq2SeqLM.from_config(config)
    else:
        raise ValueError(f"unknown head {head!r}")
    out = Path(out_dir)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
