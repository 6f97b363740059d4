"""The generator's sequence format: premise → label token → hypothesis → end (docs/design.md §6).

A pair record becomes ``[BOS] premise <|label|> hypothesis [EOS]``; a single-text record
``[BOS] <|label|> text [EOS]``. The label tokens (``<|entailment|>``, ...) are added to the
tokenizer as special tokens, so each is one id that no text can produce. The premise and the
hypothesis are tokenized separately, which keeps exact token boundaries and character offsets
for each part (the unlikelihood mask maps biased words to sub-word tokens with them) and lets
:func:`parse_output` cut a sampled sequence back into its parts at the label token.

A generator folder is an HF ``save_pretrained`` folder (causal LM + tokenizer) plus
``zdebias_generator.json`` (:class:`GeneratorFormat`): task, labels, label tokens and ids,
start/end ids and the maximum length, so that ``zdebias sample`` can parse outputs.

>>> fmt = GeneratorFormat.load("runs/gen")                       # doctest: +SKIP
>>> enc = encode_record(record, tokenizer, fmt)                  # doctest: +SKIP
>>> parse_output(enc.input_ids[1:], tokenizer, fmt)              # doctest: +SKIP
ParsedSample(premise='A man sleeps.', label='entailment', hypothesis='A man naps.', error=None)
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from zdebias.data.labels import Task, get_task
from zdebias.data.schema import Record
from zdebias.data.writers import write_json
from zdebias.errors import ConfigError, DataError

GENERATOR_INFO = "zdebias_generator.json"
FORMAT_VERSION = 1

#: Why a sampled sequence was dropped (the keys of the sampling summary's ``malformed``).
MALFORMED_REASONS = (
    "over_length",  # no end-of-sequence token within the maximum length
    "no_label",  # no label token (or, for single-text tasks, not in first place)
    "multiple_labels",  # more than one label token
    "empty_premise",
    "empty_hypothesis",  # also: empty text for single-text tasks
    "special_token",  # a start/pad/other special token inside the text
)


def label_token(label: str) -> str:
    """The special token of a label: ``label_token("entailment") == "<|entailment|>"``."""
    return f"<|{label}|>"


@dataclass
class GeneratorFormat:
    """How records are laid out as token sequences; saved as ``zdebias_generator.json``."""

    task: str
    labels: list[str]
    pair: bool
    label_tokens: dict[str, str]
    label_token_ids: dict[str, int]
    bos_token_id: int
    eos_token_id: int
    pad_token_id: int
    max_length: int = 128
    version: int = FORMAT_VERSION
    order: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.order:
            self.order = ["premise", "label", "hypothesis"] if self.pair else ["label", "text"]

    @property
    def id_to_label(self) -> dict[int, str]:
        """Label token id → label name."""
        return {i: name for name, i in self.label_token_ids.items()}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, folder: str | Path) -> Path:
        """Write ``zdebias_generator.json`` into ``folder`` (atomically)."""
        return write_json(self.to_dict(), Path(folder) / GENERATOR_INFO)

    @classmethod
    def load(cls, folder: str | Path) -> GeneratorFormat:
        """Read the format of a generator folder; fails clearly on a non-generator folder."""
        path = Path(folder) / GENERATOR_INFO
        if not path.exists():
            raise ConfigError(
                f"{folder}: not a zdebias generator folder (no {GENERATOR_INFO}); "
                "train one with `zdebias train-generator`"
            )
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise DataError(f"invalid JSON ({err.msg})", path=str(path), line=err.lineno) from err
        if data.get("version") != FORMAT_VERSION:
            raise DataError(
                f"format version {data.get('version')!r} is not supported (expected "
                f"{FORMAT_VERSION})",
                path=str(path),
                field="version",
            )
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    @staticmethod
    def is_generator(folder: str | Path) -> bool:
        """True when ``folder`` holds a ``zdebias_generator.json``."""
        return (Path(folder) / GENERATOR_INFO).exists()


def _init_label_embeddings(tokenizer: Any, model: Any, new_ids: list[int], how: str) -> str:
    """Copy a source token's input (and untied output) embedding into each new label token,
    plus a little seeded noise so the labels start apart; returns the source token."""
    import torch

    if how == "auto":
        newline = tokenizer.encode("\n", add_special_tokens=False)
        source = newline[0] if len(newline) == 1 else tokenizer.eos_token_id
    elif how == "eos":
        source = tokenizer.eos_token_id
    else:
        ids = tokenizer.encode(how, add_special_tokens=False)
        if len(ids) != 1:
            raise ConfigError(f"label_init {how!r} is not a single token of this tokenizer")
        source = ids[0]
    gen = torch.Generator().manual_seed(0)
    tables = [model.get_input_embeddings().weight]
    out = model.get_output_embeddings()
    if out is not None and out.weight.data_ptr() != tables[0].data_ptr():
        tables.append(out.weight)
    with torch.no_grad():
        for table in tables:
            scale = 0.05 * float(table.float().std())
            for i in new_ids:
                noise = torch.randn(table.shape[1], generator=gen) * scale
                table[i] = table[source] + noise.to(table.dtype)
    return str(tokenizer.convert_ids_to_tokens(source))


def add_format_tokens(
    tokenizer: Any,
    model: Any,
    task: str | Task,
    *,
    max_length: int = 128,
    label_init: str = "auto",
) -> GeneratorFormat:
    """Add the label tokens (special) to ``tokenizer``, resize ``model``'s embeddings to match,
    and return the new :class:`GeneratorFormat`.

    The start token is the tokenizer's BOS (its EOS when it has none, as GPT-2); the end token
    is its EOS. A missing pad token is set to EOS (padding positions are never trained on).

    ``label_init`` sets the new label embeddings: ``auto`` (default) copies the newline token
    (EOS when newline is not one token), ``eos``, any single-token string, or ``mean``
    (transformers' mean resizing). A pretrained model already expects a newline after a
    sentence, so with ``auto`` it emits a label token after the premise from the first step,
    where mean-initialised tokens start with probability ~0 and need many steps to learn.
    """
    task = get_task(task)
    if task.pair is None:
        raise ConfigError(
            f"task {task.name}: say whether the generator writes pairs or single texts "
            "(Task.of_kind)"
        )
    if tokenizer.eos_token_id is None:
        raise ConfigError("the model's tokenizer has no end-of-sequence token; cannot use it")
    if not getattr(tokenizer, "is_fast", False):
        raise ConfigError("the generator needs a fast tokenizer (character offsets)")
    tokens = {name: label_token(name) for name in task.labels}
    n_new = tokenizer.add_tokens(list(tokens.values()), special_tokens=True)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    source = None
    if model is not None:
        if model.get_input_embeddings().weight.shape[0] < len(tokenizer):
            model.resize_token_embeddings(len(tokenizer), mean_resizing=label_init == "mean")
        if n_new and label_init != "mean":
            new_ids = [int(tokenizer.convert_tokens_to_ids(t)) for t in tokens.values()]
            source = _init_label_embeddings(tokenizer, model, new_ids, label_init)
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    return GeneratorFormat(
        task=task.name,
        labels=list(task.labels),
        pair=task.pair,
        label_tokens=tokens,
        label_token_ids={n: int(tokenizer.convert_tokens_to_ids(t)) for n, t in tokens.items()},
        bos_token_id=int(bos),
        eos_token_id=int(tokenizer.eos_token_id),
        pad_token_id=int(tokenizer.pad_token_id),
        max_length=max_length,
        info={"label_init": label_init, "label_init_source": source},
    )


@dataclass
class EncodedExample:
    """One record as a token sequence, with where each part sits.

    ``premise`` and ``main`` are ``[start, end)`` token index ranges of the premise and of the
    hypothesis (or text); ``*_offsets`` are the character offsets of those tokens in the
    record's own strings. ``label_index`` is the position of the label token.
    """

    input_ids: list[int]
    label_index: int
    premise: tuple[int, int]
    main: tuple[int, int]
    premise_offsets: list[tuple[int, int]]
    main_offsets: list[tuple[int, int]]

    def __len__(self) -> int:
        return len(self.input_ids)


def _pieces(tokenizer: Any, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]


def encode_record(
    record: Record, tokenizer: Any, fmt: GeneratorFormat, *, label: str | None = None
) -> EncodedExample:
    """Lay one record out as ``[BOS] P <|l|> H [EOS]`` (or ``[BOS] <|l|> T [EOS]``).

    ``label`` overrides the record's label (a perturbed label for the consistency loss).
    Raises :class:`DataError` for a label the format does not know or a missing field.
    """
    name = label if label is not None else record.label
    if name not in fmt.label_token_ids:
        raise DataError(
            f"label {name!r} is not one of the generator's labels ({', '.join(fmt.labels)})",
            path=record.id,
            field="label",
        )
    lab = fmt.label_token_ids[name]
    if fmt.pair:
        if not record.is_pair or not record.premise or not record.hypothesis:
            raise DataError(
                "the generator needs premise and hypothesis", path=record.id, field="premise"
            )
        p_ids, p_off = _pieces(tokenizer, record.premise)
        h_ids, h_off = _pieces(tokenizer, record.hypothesis)
        ids = [fmt.bos_token_id, *p_ids, lab, *h_ids, fmt.eos_token_id]
        label_index = 1 + len(p_ids)
        return EncodedExample(
            ids,
            label_index,
            (1, label_index),
            (label_index + 1, label_index + 1 + len(h_ids)),
            p_off,
            h_off,
        )
    text = record.text if record.text is not None else record.main_text
    if not text:
        raise DataError("the generator needs a non-empty text", path=record.id, field="text")
    t_ids, t_off = _pieces(tokenizer, text)
    ids = [fmt.bos_token_id, lab, *t_ids, fmt.eos_token_id]
    return EncodedExample(ids, 1, (1, 1), (2, 2 + len(t_ids)), [], t_off)


def encode_prompt(
    premise: str, tokenizer: Any, fmt: GeneratorFormat, *, label: str | None = None
) -> list[int]:
    """The premise part of the training sequence, ``[BOS] P`` (with ``label``: ``[BOS] P
    <|label|>``), tokenized as :func:`encode_record` does: what premise-conditioned sampling
    gives the model before it writes the label (or the hypothesis)."""
    if not fmt.pair:
        raise ConfigError(f"--premises: the generator's task {fmt.task!r} has no premise")
    ids = [fmt.bos_token_id, *_pieces(tokenizer, premise)[0]]
    return [*ids, fmt.label_token_ids[label]] if label is not None else ids


@dataclass
class ParsedSample:
    """A sampled sequence cut back into its parts; ``error`` names why it is malformed."""

    premise: str | None
    label: str | None
    hypothesis: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


_SPACES = re.compile(r"\s+")


def parse_output(
    ids: Sequence[int],
    tokenizer: Any,
    fmt: GeneratorFormat,
    *,
    special_ids: frozenset[int] | None = None,
) -> ParsedSample:
    """Parse generated ids (everything after the start token) into a :class:`ParsedSample`.

    The sequence must end with EOS within the format's maximum length, hold exactly one label
    token (first, for single-text tasks) and non-empty parts; anything else is malformed, and
    ``error`` is one of :data:`MALFORMED_REASONS`.
    """
    ids = list(ids)
    try:
        end = ids.index(fmt.eos_token_id)
    except ValueError:
        return ParsedSample(None, None, None, "over_length")
    if end + 2 > fmt.max_length:  # start token + body + end token
        return ParsedSample(None, None, None, "over_length")
    body = ids[:end]
    labels = fmt.id_to_label
    positions = [i for i, t in enumerate(body) if t in labels]
    if not positions or (not fmt.pair and positions[0] != 0):
        return ParsedSample(None, None, None, "no_label")
    if len(positions) > 1:
        return ParsedSample(None, None, None, "multiple_labels")
    pos = positions[0]
    label = labels[body[pos]]
    if special_ids is None:
        special_ids = frozenset(int(i) for i in tokenizer.all_special_ids)
    if any(t in special_ids for t in body):
        return ParsedSample(None, label, None, "special_token")
    premise = tokenizer.decode(body[:pos]).strip() if fmt.pair else None
    main = tokenizer.decode(body[pos + 1 :]).strip()
    if fmt.pair and not premise:
        return ParsedSample(premise, label, main, "empty_premise")
    if not main:
        return ParsedSample(premise, label, main, "empty_hypothesis")
    return ParsedSample(premise, label, main)


def sample_key(sample: ParsedSample | Record) -> tuple[str, str, str]:
    """The de-duplication key: label plus case-folded, space-collapsed texts."""
    if isinstance(sample, Record):
        premise, hyp = (sample.premise, sample.hypothesis) if sample.is_pair else ("", sample.text)
    else:
        premise, hyp = sample.premise, sample.hypothesis
    norm = [_SPACES.sub(" ", (x or "").strip()).casefold() for x in (premise, hyp)]
    return (sample.label or "", norm[0], norm[1])
