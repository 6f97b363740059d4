"""The one tokeniser (settings, spans, batch route) and the structured feature keys."""

from __future__ import annotations

import pytest

from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.features.extract import extract_features
from zdebias.features.keys import FeatureKey
from zdebias.features.tokenize import Tokenizer, tokenize, word_spans

TEXTS = ["A man's T-shirt.", "Nobody is sleeping", "İstanbul café, naïve!", "", "x\x01y"]


def test_default_tokenizer_is_tokenize_everywhere() -> None:
    tok = Tokenizer.from_settings({})
    assert tok.is_default and tok.spec is None
    for text in TEXTS:
        assert tok(text) == tokenize(text)
        assert tok.spans(text) == word_spans(text)
    flat, lengths = tok.tokenize_many(TEXTS)
    assert lengths is None  # NUL-separated flat list on the batch route
    assert [t for t in flat if t != "\x00"] == [t for text in TEXTS for t in tokenize(text)]


def test_custom_pattern_function_and_spec() -> None:
    tok = Tokenizer.from_settings({"token_pattern": r"[\w-]+"})
    assert not tok.is_default and tok("A T-shirt.") == ["a", "t-shirt"]
    assert tok.spans("A T-shirt.") == [("a", 0, 1), ("t-shirt", 2, 9)]
    assert Tokenizer.from_spec(tok.spec) == tok
    flat, lengths = tok.tokenize_many(["A T-shirt.", "b-c d"])
    assert (flat, lengths.tolist()) == (["a", "t-shirt", "b-c", "d"], [2, 2])
    cased = Tokenizer.from_settings({"lowercase": False})
    assert not cased.is_default and cased("A Man") == ["A", "Man"]
    fn = Tokenizer(function="shlex:split")
    assert fn.spec == "fn:shlex:split" and Tokenizer.from_spec(fn.spec)("a b") == ["a", "b"]
    assert fn.spans("A  man") == [("a", 0, 1), ("man", 3, 6)]
    with pytest.raises(ConfigError, match="bad token_pattern"):
        Tokenizer("(")
    with pytest.raises(ConfigError, match="bad tokenizer spec"):
        Tokenizer.from_spec("what")


def test_extracted_keys_are_structured() -> None:
    pairs = [
        Record("1", "entailment", "A man sleeps.", "A man is sleeping."),
        Record("2", "contradiction", "A dog runs.", "Nobody is outside."),
    ]
    fm = extract_features(pairs, hypo_only_folds=2)
    assert len(fm.keys) == len(fm.names) == fm.n_features
    by_name = dict(zip(fm.names, fm.keys, strict=True))
    assert by_name["is sleeping@hypothesis"] == FeatureKey(
        "is sleeping@hypothesis", "ngram", "hypothesis", ("is", "sleeping")
    )
    assert by_name["man@premise"].field == "premise"
    assert by_name["hypo-len<5"] == FeatureKey("hypo-len<5", "length", "hypothesis")
    assert by_name["len-ratio>=1"].kind == "ratio"
    assert by_name["no-lex-overlap"].kind == "overlap"
    assert by_name["hypo-only-pred=entailment"].kind == "hypo-only"
    assert by_name["<null>"].kind == "null"
    # names derive the same keys (the legacy path) for the default tokenisation
    assert all(FeatureKey.from_name(k.name) == k for k in fm.keys)
    assert fm.rows([1]).keys == fm.keys
    texts = [Record("a", "positive", text="Good film"), Record("b", "negative", text="Bad")]
    keys = {k.name: k for k in extract_features(texts).keys}
    assert keys["good film@text"].tokens == ("good", "film")
    assert keys["text-len<5"].field == "text"


def test_user_features_get_custom_keys(tmp_path, monkeypatch) -> None:
    (tmp_path / "kfeats.py").write_text(
        "def neg(record):\n    return ['negation@hypothesis', 'short']\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    pairs = [Record("1", "entailment", "p", "h")]
    keys = extract_features(pairs, ["kfeats:neg"]).keys
    assert [(k.kind, k.field, k.tokens) for k in keys] == [
        ("custom", "hypothesis", ("negation",)),
        ("custom", None, ()),
    ]
    with pytest.raises(ValueError, match="unknown feature kind"):
        FeatureKey.from_dict({"name": "x", "kind": "weird"})
