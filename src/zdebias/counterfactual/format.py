"""The infiller's text format (AutoCAD §3.2, docs/design.md §10.2): masking, source/target,
token ids.

The infiller sees the example with every rationale span replaced by a sentinel, plus a label,
and writes the fillers::

    source  "contradiction hypothesis: The <extra_id_0> is <extra_id_1>. premise: A man ..."
    target  "<extra_id_0> man<extra_id_1> sleeping</s>"

Sentinels are numbered in source order (hypothesis first, then premise; ``sentence:`` for
single-text tasks). ``ul_mask`` marks the filler (rationale) tokens of a target: sentinels,
padding and EOS are never filler tokens. A causal LM is fed ``source + "\\nfillers:"`` as a
prompt and trained on the target tokens only. No torch or transformers imports here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from zdebias.data.schema import Record
from zdebias.errors import ConfigError

Arch = Literal["seq2seq", "bert2bert", "causal"]
Span = tuple[int, int]

SENTINEL = "<extra_id_{}>"
N_SENTINELS = 100
CAUSAL_PROMPT_END = "\nfillers:"
PAIR_ORDER = ("hypothesis", "premise")


# --------------------------------------------------------------------------- text format


def field_order(record: Record) -> tuple[str, ...]:
    """Fields in source order: hypothesis then premise (AutoCAD's format), or text."""
    return PAIR_ORDER if record.is_pair else ("text",)


def mask_record(
    record: Record, spans: Mapping[str, Sequence[Span]]
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


def rebuild(record: Record, spans: Mapping[str, Sequence[Span]], fillers: Sequence[str]) -> Record:
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
    spans: Mapping[str, Sequence[Span]],
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


def encode_records(
    tokenizer: Any,
    arch: Arch,
    records: Sequence[Record],
    spans: Sequence[Mapping[str, Sequence[Span]]],
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
