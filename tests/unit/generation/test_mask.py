"""The unlikelihood mask on hand-made rejected examples, with sub-word tokens."""

from __future__ import annotations

import pytest

from zdebias.data.schema import Record
from zdebias.generation.format import add_format_tokens, encode_record
from zdebias.generation.mask import MaskReport, biased_token_mask, feature_kind

# Tiny GPT-2 BPE splits (see zdebias.models.tiny):
#   premise    "A man is sleeping on a benchy."
#              A | Ġman | Ġis | Ġsleeping | Ġon | Ġa | Ġb en ch y | .
#   hypothesis "Nobody isn't sleeping, the Man is outside."
#              N o bod y | Ġis n ' t | Ġsleeping | , | Ġthe | Ġ M an | Ġis | Ġoutside | .
PREMISE = "A man is sleeping on a benchy."
HYPOTHESIS = "Nobody isn't sleeping, the Man is outside."


def _record(features: list[str]) -> Record:
    return Record(
        id="x",
        premise=PREMISE,
        hypothesis=HYPOTHESIS,
        label="contradiction",
        meta={"rejected_by": features},
    )


def _marked(
    nli_tokenizer,
    features: list[str],
    report: MaskReport | None = None,
    null_mask: str = "hypothesis",
) -> list[str]:
    """The marked tokens, written ``part:token`` so expectations read like the text."""
    tok, fmt = nli_tokenizer
    rec = _record(features)
    enc = encode_record(rec, tok, fmt)
    mask = biased_token_mask(rec, enc, report=report, null_mask=null_mask)
    assert len(mask) == len(enc.input_ids)
    names = tok.convert_ids_to_tokens(enc.input_ids)
    out = []
    for i, flag in enumerate(mask):
        if flag:
            part = (
                "P"
                if enc.premise[0] <= i < enc.premise[1]
                else "H"
                if enc.main[0] <= i < enc.main[1]
                else "L"
                if i == enc.label_index
                else "?"
            )
            out.append(f"{part}:{names[i]}")
    return out


def test_tokenisation_is_as_documented(nli_tokenizer) -> None:
    tok, fmt = nli_tokenizer
    enc = encode_record(_record([]), tok, fmt)
    names = tok.convert_ids_to_tokens(enc.input_ids)
    assert names[slice(*enc.premise)] == [
        "A",
        "Ġman",
        "Ġis",
        "Ġsleeping",
        "Ġon",
        "Ġa",
        "Ġb",
        "en",
        "ch",
        "y",
        ".",
    ]
    assert names[slice(*enc.main)] == [
        "N",
        "o",
        "bod",
        "y",
        "Ġis",
        "n",
        "'",
        "t",
        "Ġsleeping",
        ",",
        "Ġthe",
        "Ġ",
        "M",
        "an",
        "Ġis",
        "Ġoutside",
        ".",
    ]


def test_unigram_covers_every_subword_of_the_word(nli_tokenizer) -> None:
    assert _marked(nli_tokenizer, ["benchy@premise"]) == ["P:Ġb", "P:en", "P:ch", "P:y"]
    assert _marked(nli_tokenizer, ["nobody@hypothesis"]) == ["H:N", "H:o", "H:bod", "H:y"]
    # "isn't" is one word token; all four sub-words carry it
    assert _marked(nli_tokenizer, ["isn't@hypothesis"]) == ["H:Ġis", "H:n", "H:'", "H:t"]


def test_ngrams_match_their_own_field_case_insensitively(nli_tokenizer) -> None:
    # "man" in the premise only, not the hypothesis' "Man"
    assert _marked(nli_tokenizer, ["man@premise"]) == ["P:Ġman"]
    # the hypothesis' "Man": the bare-space token before it is not part of the word
    assert _marked(nli_tokenizer, ["man@hypothesis"]) == ["H:M", "H:an"]
    # every occurrence: "sleeping" in both parts, but only the hypothesis one is asked for
    assert _marked(nli_tokenizer, ["sleeping@hypothesis"]) == ["H:Ġsleeping"]


def test_bigram_needs_adjacent_words(nli_tokenizer) -> None:
    assert _marked(nli_tokenizer, ["man is@hypothesis"]) == ["H:M", "H:an", "H:Ġis"]
    assert _marked(nli_tokenizer, ["is sleeping@premise"]) == ["P:Ġis", "P:Ġsleeping"]
    # "isn't sleeping" is not "is sleeping": no match, reported
    report = MaskReport()
    assert _marked(nli_tokenizer, ["is sleeping@hypothesis"], report) == []
    assert report.unmatched == ["is sleeping@hypothesis"]


def test_whole_hypothesis_features_and_null(nli_tokenizer) -> None:
    hyp = [
        "H:N",
        "H:o",
        "H:bod",
        "H:y",
        "H:Ġis",
        "H:n",
        "H:'",
        "H:t",
        "H:Ġsleeping",
        "H:,",
        "H:Ġthe",
        "H:Ġ",
        "H:M",
        "H:an",
        "H:Ġis",
        "H:Ġoutside",
        "H:.",
    ]
    for name in (
        "hypo-len<10",
        "len-ratio<1",
        "lex-overlap>0.5",
        "no-lex-overlap",
        "full-lex-overlap",
        "hypo-only-pred=contradiction",
        "my-plugin-feature",
    ):
        assert feature_kind(name) == "hypothesis"
        assert _marked(nli_tokenizer, [name]) == hyp  # never premise, label or EOS
    assert feature_kind("<null>") == "null"
    assert _marked(nli_tokenizer, ["<null>"]) == hyp  # the paper: all hypothesis tokens
    assert _marked(nli_tokenizer, ["<null>"], null_mask="label") == ["L:<|contradiction|>"]
    with pytest.raises(ValueError, match="'hypothesis' or 'label'"):
        _marked(nli_tokenizer, ["<null>"], null_mask="premise")


def test_union_of_features_and_report(nli_tokenizer) -> None:
    report = MaskReport()
    marked = _marked(
        nli_tokenizer,
        ["<null>", "man@premise", "outside@hypothesis", "outside@hypothesis", "dog@hypothesis"],
        report,
        null_mask="label",
    )
    assert marked == ["P:Ġman", "L:<|contradiction|>", "H:Ġoutside"]
    assert report.n_biased == 3
    assert report.by_kind == {"null": 1, "ngram": 2}
    assert report.unmatched == ["dog@hypothesis"]
    assert _marked(nli_tokenizer, []) == []


def test_single_text_mask() -> None:
    from zdebias.models.tiny import tiny_tokenizer

    tok = tiny_tokenizer("gpt2")
    fmt = add_format_tokens(tok, None, "sentiment")
    rec = Record(id="s", label="positive", text="This movie was wonderful and moving.")
    enc = encode_record(rec, tok, fmt)
    names = tok.convert_ids_to_tokens(enc.input_ids)

    def marked(features: list[str], null_mask: str = "label") -> list[str]:
        mask = biased_token_mask(rec, enc, features, null_mask=null_mask)
        return [names[i] for i, m in enumerate(mask) if m]

    # "wonderful" is four sub-words: Ġw on der ful
    assert marked(["wonderful@text"]) == ["Ġw", "on", "der", "ful"]
    assert marked(["movie@text"]) == ["Ġmov", "ie"]
    assert marked(["text-len<10"]) == names[2:-1]
    assert marked(["<null>"]) == ["<|positive|>"]
    assert marked(["<null>"], null_mask="hypothesis") == names[2:-1]  # every text token


HYPHEN_PATTERN = r"\w+(?:[-']\w+)*"  # keeps "t-shirt" and "well-known" whole


def _hyphen_pairs() -> list[Record]:
    return [
        Record("a", "contradiction", "A man in a T-shirt is sleeping.", "He wears a t-shirt."),
        Record("b", "entailment", "A woman is running.", "A well-known woman runs."),
    ]


def test_custom_token_pattern_mask_covers_the_ngram(nli_tokenizer) -> None:
    """A recipe's own token_pattern: the mask finds the words the feature counted."""
    from zdebias.features.extract import extract_features

    tok, fmt = nli_tokenizer
    fm = extract_features(_hyphen_pairs(), ["ngrams"], token_pattern=HYPHEN_PATTERN)
    key = fm.keys[fm.index["a t-shirt@hypothesis"]]
    assert key.kind == "ngram" and key.tokens == ("a", "t-shirt") and key.field == "hypothesis"
    assert key.tokenizer == "re:" + HYPHEN_PATTERN
    premise_key = fm.keys[fm.index["t-shirt@premise"]]
    rec = Record(
        "x",
        "contradiction",
        "A man in a T-shirt is sleeping.",
        "The man wears a t-shirt and a well-known hat.",
        meta={
            "rejected_by": [key.name, premise_key.name],
            "rejected_by_features": [key.to_dict(), premise_key.to_dict()],
        },
    )
    enc = encode_record(rec, tok, fmt)
    names = tok.convert_ids_to_tokens(enc.input_ids)
    report = MaskReport()
    mask = biased_token_mask(rec, enc, report=report)
    marked = [names[i] for i, m in enumerate(mask) if m]
    # premise "Ġ T - s h ir t" (the bare space token holds no character of the word),
    # hypothesis "Ġa Ġt - s h ir t"
    assert marked == ["T", "-", "s", "h", "ir", "t", "Ġa", "Ġt", "-", "s", "h", "ir", "t"]
    assert report.unmatched == [] and report.by_kind == {"ngram": 13}
    # the legacy path (names only) assumes the default tokenisation and finds nothing
    legacy = rec.replace(meta={"rejected_by": rec.meta["rejected_by"]})
    report = MaskReport()
    assert not any(biased_token_mask(legacy, enc, report=report))
    assert report.unmatched == [key.name, premise_key.name]


def test_structured_features_give_the_legacy_mask_by_default(nli_tokenizer) -> None:
    """Default settings: keys from the extractor mask exactly what the names did."""
    from zdebias.features.extract import extract_features
    from zdebias.features.keys import FeatureKey

    tok, fmt = nli_tokenizer
    rec = _record([])
    fm = extract_features([rec, Record("y", "neutral", "A dog.", "The dog isn't outside.")])
    assert [k.name for k in fm.keys] == fm.names
    enc = encode_record(rec, tok, fmt)
    for key in fm.keys:
        structured = rec.replace(meta={"rejected_by_features": [key.to_dict()]})
        assert biased_token_mask(structured, enc) == biased_token_mask(rec, enc, [key.name])
        assert FeatureKey.from_dict(key.to_dict()) == key
