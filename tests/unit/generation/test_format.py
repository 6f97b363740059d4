"""The P → label → H sequence format: encoding, parsing back, malformed outputs, saving."""

from __future__ import annotations

from pathlib import Path

import pytest

from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError
from zdebias.generation.format import (
    GENERATOR_INFO,
    GeneratorFormat,
    add_format_tokens,
    encode_record,
    label_token,
    parse_output,
    sample_key,
)

REC = Record(
    id="r1",
    premise="A man is sleeping on a bench.",
    hypothesis="Nobody is sleeping.",
    label="contradiction",
)


def test_label_tokens_are_single_added_special_tokens(nli_tokenizer) -> None:
    tok, fmt = nli_tokenizer
    assert fmt.labels == ["entailment", "neutral", "contradiction"]
    assert fmt.label_tokens["neutral"] == label_token("neutral") == "<|neutral|>"
    assert list(fmt.label_token_ids.values()) == [400, 401, 402]  # appended after 400 BPE ids
    assert len(tok) == 403
    # a label token is one id even inside running text
    ids = tok("A man<|neutral|>sleeps", add_special_tokens=False)["input_ids"]
    assert ids.count(401) == 1
    assert (fmt.bos_token_id, fmt.eos_token_id, fmt.pad_token_id) == (0, 0, 1)


def test_encode_layout_and_round_trip(nli_tokenizer) -> None:
    tok, fmt = nli_tokenizer
    enc = encode_record(REC, tok, fmt)
    ids = enc.input_ids
    assert ids[0] == fmt.bos_token_id and ids[-1] == fmt.eos_token_id
    assert ids[enc.label_index] == fmt.label_token_ids["contradiction"]
    assert enc.premise == (1, enc.label_index)
    assert enc.main == (enc.label_index + 1, len(ids) - 1)
    assert tok.decode(ids[slice(*enc.premise)]) == REC.premise
    assert tok.decode(ids[slice(*enc.main)]) == REC.hypothesis
    assert len(enc.premise_offsets) == enc.premise[1] - enc.premise[0]
    parsed = parse_output(ids[1:], tok, fmt)
    assert (parsed.premise, parsed.label, parsed.hypothesis, parsed.error) == (
        REC.premise,
        "contradiction",
        REC.hypothesis,
        None,
    )
    # trailing padding after EOS is ignored
    assert parse_output([*ids[1:], fmt.pad_token_id, fmt.pad_token_id], tok, fmt).ok
    # a perturbed label changes only the label token
    other = encode_record(REC, tok, fmt, label="neutral")
    diff = [i for i, (a, b) in enumerate(zip(ids, other.input_ids, strict=True)) if a != b]
    assert diff == [enc.label_index]


def test_encode_rejects_unknown_label_and_missing_text(nli_tokenizer) -> None:
    tok, fmt = nli_tokenizer
    with pytest.raises(DataError, match="not one of the generator's labels"):
        encode_record(REC.replace(label="positive"), tok, fmt)
    with pytest.raises(DataError, match="premise and hypothesis"):
        encode_record(REC.replace(hypothesis=""), tok, fmt)


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def test_malformed_outputs_are_named(nli_tokenizer) -> None:
    tok, fmt = nli_tokenizer
    ent, neu = fmt.label_token_ids["entailment"], fmt.label_token_ids["neutral"]
    eos = fmt.eos_token_id
    p, h = _ids(tok, "A man sleeps."), _ids(tok, "A person rests.")
    cases = {
        "over_length": [*p, ent, *h],  # never ended
        "no_label": [*p, *h, eos],
        "multiple_labels": [*p, ent, *h, neu, eos],
        "empty_premise": [ent, *h, eos],
        "empty_hypothesis": [*p, ent, eos],
        "special_token": [*p, ent, fmt.pad_token_id, *h, eos],
    }
    for reason, ids in cases.items():
        parsed = parse_output(ids, tok, fmt)
        assert parsed.error == reason, (reason, parsed)
        assert not parsed.ok
    blank = _ids(tok, "  ")
    assert parse_output([*p, ent, *blank, eos], tok, fmt).error == "empty_hypothesis"
    # start + body + EOS may fill max_length (64) exactly, one more token is over length
    filler = _ids(tok, "a")
    body = [*filler * (fmt.max_length - 2 - 1 - len(h)), ent, *h]
    assert len(body) + 2 == fmt.max_length
    assert parse_output([*body, eos], tok, fmt).ok
    assert parse_output([*filler, *body, eos], tok, fmt).error == "over_length"
    ok = parse_output([*p, ent, *h, eos], tok, fmt)
    assert (ok.premise, ok.label, ok.hypothesis) == (
        "A man sleeps.",
        "entailment",
        "A person rests.",
    )


def test_single_text_format(tmp_path: Path) -> None:
    from zdebias.models.tiny import tiny_tokenizer

    tok = tiny_tokenizer("gpt2")
    fmt = add_format_tokens(tok, None, "sentiment")
    assert not fmt.pair and fmt.order == ["label", "text"]
    rec = Record(id="s", label="positive", text="I loved it.")
    enc = encode_record(rec, tok, fmt)
    assert enc.label_index == 1 and enc.premise == (1, 1)
    assert enc.input_ids[1] == fmt.label_token_ids["positive"]
    parsed = parse_output(enc.input_ids[1:], tok, fmt)
    assert (parsed.premise, parsed.label, parsed.hypothesis) == (None, "positive", "I loved it.")
    text_first = [*_ids(tok, "I loved it."), fmt.label_token_ids["positive"], fmt.eos_token_id]
    assert parse_output(text_first, tok, fmt).error == "no_label"


def test_format_save_load(tmp_path: Path, nli_tokenizer) -> None:
    _, fmt = nli_tokenizer
    fmt.save(tmp_path)
    again = GeneratorFormat.load(tmp_path)
    assert again == fmt
    assert GeneratorFormat.is_generator(tmp_path)
    with pytest.raises(ConfigError, match="not a zdebias generator folder"):
        GeneratorFormat.load(tmp_path / "nothing")
    (tmp_path / GENERATOR_INFO).write_text("{bad json")
    with pytest.raises(DataError, match="invalid JSON"):
        GeneratorFormat.load(tmp_path)


def test_sample_key_normalises_case_and_spaces() -> None:
    a = Record(id="a", label="neutral", premise="A  man sleeps.", hypothesis="He rests. ")
    b = Record(id="b", label="neutral", premise="a man sleeps.", hypothesis=" he  rests.")
    c = b.replace(label="entailment")
    assert sample_key(a) == sample_key(b) == ("neutral", "a man sleeps.", "he rests.")
    assert sample_key(c) != sample_key(a)
