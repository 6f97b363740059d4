"""Feature names and definitions of docs/design.md §2, the registry, and the tokenisation fast
path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError
from zdebias.features.catalogue import get_feature
from zdebias.features.context import FeatureContext
from zdebias.features.extract import extract_features
from zdebias.features.ngrams import parse_ngram
from zdebias.features.registry import register_feature
from zdebias.features.tokenize import tokenize

PAIRS = [
    # tokens: p [a, man, is, sleeping]  h [a, man, sleeps]: overlap 2/3, len 3, ratio 0.75
    Record("p1", "entailment", "A man is sleeping.", "A man sleeps"),
    # p [two, dogs, run, in, the, park]  h [dogs, run, dogs, run] -> overlap 1, ratio 4/6
    Record("p2", "entailment", "Two dogs run in the park.", "Dogs run, dogs run!"),
    # p [a, woman]  h [nobody, is, sleeping, here, today, at, all, now, ok, yes] -> overlap 0
    Record("p3", "contradiction", "A woman.", "Nobody is sleeping here today at all now ok yes"),
    # p [the, cat, sat]  h [the, cat, sat, on, a, mat]: 3/6 = 0.5 (not > 0.5), ratio 2
    Record("p4", "neutral", "The cat sat.", "The cat sat on a mat"),
]


def feats(fm, row: int) -> set[str]:
    return set(fm.features_of(row))


def test_pair_feature_names_and_bins() -> None:
    fm = extract_features(PAIRS, ["ngrams", "hypo-len", "len-ratio", "lex-overlap", "null"])
    assert fm.matrix.shape == (4, len(fm.names))
    assert fm.matrix.dtype == np.uint8 and set(fm.matrix.data.tolist()) == {1}
    assert feats(fm, 0) == {
        "a@premise",
        "man@premise",
        "is@premise",
        "sleeping@premise",
        "a man@premise",
        "man is@premise",
        "is sleeping@premise",
        "a@hypothesis",
        "man@hypothesis",
        "sleeps@hypothesis",
        "a man@hypothesis",
        "man sleeps@hypothesis",
        "hypo-len<5",
        "len-ratio<1",
        "lex-overlap>0.5",
        "lex-overlap>0.6",
        "<null>",
    }
    row2 = feats(fm, 1)
    # repeated tokens count once; overlap 1 gives every threshold plus full-lex-overlap
    assert {
        "dogs@hypothesis",
        "run@hypothesis",
        "dogs run@hypothesis",
        "run dogs@hypothesis",
    } <= row2
    assert {f for f in row2 if "lex" in f} == {
        "lex-overlap>0.5",
        "lex-overlap>0.6",
        "lex-overlap>0.7",
        "lex-overlap>0.8",
        "lex-overlap>0.9",
        "full-lex-overlap",
    }
    assert "hypo-len<5" in row2 and "len-ratio<0.75" in row2
    row3 = feats(fm, 2)
    assert {
        "no-lex-overlap",
        "hypo-len<15",
        "len-ratio>=1",
        "is sleeping@hypothesis",
        "sleeping@hypothesis",
    } <= row3
    assert not any(f.startswith("lex-overlap>") for f in row3)
    row4 = feats(fm, 3)
    assert not any("lex" in f for f in row4)  # 0.5 is not > 0.5, and not 0 or 1
    assert {"hypo-len<10", "len-ratio>=1"} <= row4
    # presence per example: the column sums are the number of examples with the feature
    col = fm.matrix.sum(axis=0).A1
    assert col[fm.index["<null>"]] == 4
    assert col[fm.index["sleeping@hypothesis"]] == 1
    assert col[fm.index["a@premise"]] == 2  # "A man is sleeping.", "A woman."
    assert col[fm.index["hypo-len<5"]] == 2
    # no empty columns are kept
    assert (col > 0).all()
    assert fm.column("hypo-len<5").tolist() == [True, True, False, False]
    assert fm.column("not-a-feature").tolist() == [False] * 4


def test_settings_change_bins_and_unknown_setting_fails() -> None:
    fm = extract_features(PAIRS, ["hypo-len"], hypo_len_bins=(4, 8))
    assert [fm.features_of(i) for i in range(4)] == [
        ["hypo-len<4"],
        ["hypo-len<8"],
        ["hypo-len>=8"],
        ["hypo-len<8"],
    ]
    fm = extract_features(PAIRS, ["lex-overlap"], lex_overlap_thresholds=[0.4])
    assert fm.features_of(3) == ["lex-overlap>0.4"]
    fm = extract_features(PAIRS, ["ngrams"], ngram_range=(2, 2), ngram_fields=["hypothesis"])
    assert all(f.endswith("@hypothesis") and " " in f for f in fm.names)
    with pytest.raises(ConfigError, match=r"unknown feature setting.*hypo_len_bin"):
        extract_features(PAIRS, ["hypo-len"], hypo_len_bin=(4,))
    with pytest.raises(ConfigError, match="strictly increasing"):
        extract_features(PAIRS, ["hypo-len"], hypo_len_bins=(8, 4))


def test_single_text_records() -> None:
    texts = [
        Record("t1", "positive", text="Great great movie"),
        Record("t2", "negative", text="Bad movie"),
    ]
    fm = extract_features(texts)
    assert set(fm.features_of(0)) == {
        "great@text",
        "movie@text",
        "great great@text",
        "great movie@text",
        "text-len<5",
        "<null>",
    }
    assert set(fm.features_of(1)) == {
        "bad@text",
        "movie@text",
        "bad movie@text",
        "text-len<5",
        "<null>",
    }
    with pytest.raises(ConfigError, match="needs premise/hypothesis pairs"):
        extract_features(texts, ["lex-overlap"])
    with pytest.raises(DataError, match="single-text"):
        extract_features([PAIRS[0], texts[0]], ["null"])


def test_registry_unknown_name_and_user_functions(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(ConfigError) as err:
        get_feature("trigram")
    for name in ("ngrams", "hypo-len", "len-ratio", "lex-overlap", "hypo-only", "null"):
        assert name in str(err.value)

    module = tmp_path / "my_feats.py"
    module.write_text(
        textwrap.dedent("""
        def negation(record, word="nobody"):
            return [f"has-{word}"] if word in record.hypothesis.lower() else []
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for path in ("my_feats:negation", "my_feats.negation"):
        fm = extract_features(PAIRS, [path, "null"])
        assert fm.names == ["has-nobody", "<null>"]
        assert fm.column("has-nobody").tolist() == [False, False, True, False]
    fm = extract_features(PAIRS, ["my_feats:negation"], word="cat")
    assert fm.names == ["has-cat"]
    with pytest.raises(ConfigError, match="has no feature function"):
        get_feature("my_feats:missing")
    with pytest.raises(ConfigError, match="cannot import"):
        get_feature("no_such_module_zz:f")

    from zdebias.features import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    @register_feature("test-first-word")
    def first_word(record: Record) -> list[str]:
        return [f"first={tokenize(record.hypothesis)[0]}"]

    fm = extract_features(PAIRS, ["test-first-word"])
    assert [fm.features_of(i) for i in range(4)] == [
        ["first=a"],
        ["first=dogs"],
        ["first=nobody"],
        ["first=the"],
    ]


def test_a_feature_file_in_the_current_folder_by_path(tmp_path: Path, monkeypatch) -> None:
    """Issue 39.6: the docs' `my_features:negation` failed with "No module named
    'my_features'" from the folder holding the file (the zdebias script does not import from
    it). A file path works from anywhere, and the dotted name's error says so."""
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "my_features_zz.py").write_text(
        textwrap.dedent("""
        def negation(record, words=("no", "not", "nobody", "never")):
            hyp = record.hypothesis.lower().split()
            return [f"negation={w}" for w in words if w in hyp]
    """)
    )
    monkeypatch.chdir(folder)
    with pytest.raises(ConfigError) as err:
        get_feature("my_features_zz:negation")
    assert "No module named 'my_features_zz'" in str(err.value)
    assert "name it by path: my_features_zz.py:negation" in str(err.value)
    fm = extract_features(PAIRS, ["my_features_zz.py:negation", "null"])
    assert fm.names == ["negation=nobody", "<null>"]
    assert fm.column("negation=nobody").tolist() == [False, False, True, False]
    # the same file by absolute path, from another folder: the same function, loaded once
    monkeypatch.chdir(tmp_path)
    same = get_feature(f"{folder / 'my_features_zz.py'}:negation")
    assert same.fn is get_feature(f"{folder / 'my_features_zz.py'}:negation").fn
    with pytest.raises(ConfigError, match=r"no such feature file 'nowhere\.py'"):
        get_feature("nowhere.py:negation")


def test_duplicate_names_from_two_groups_are_merged() -> None:
    fm = extract_features(PAIRS, ["unigrams", "ngrams"])
    assert len(fm.names) == len(set(fm.names))
    assert fm.matrix.sum(axis=0).A1[fm.index["a@premise"]] == 2


def test_fast_tokenisation_matches_tokenize() -> None:
    texts = [
        "Nobody's sleeping.",
        "ÉCOLE d'été, ΟΔΟΣ",
        "...",
        "x\x00y z",
        "Naïve café's",
        "Nobody's sleeping.",
        "a\tb\x0bc\x1cd-e",
        "A__b 12,5 \x7fdel",
        "x'y'z 'hi' dogs'",
    ]
    records = [Record(f"r{i}", "neutral", "p", t) for i, t in enumerate(texts)]
    ctx = FeatureContext(records, {})
    col = ctx.tokens("hypothesis")
    vocab = ctx.vocab_list()
    for i, text in enumerate(texts):
        assert [vocab[t] for t in col.record_tokens(i)] == tokenize(text)
    assert col.n_distinct == 8 and col.lengths.tolist() == [2, 3, 0, 3, 2, 2, 5, 4, 4]
    # without the NUL (which forces the per-text path) the one-pass paths (regex for the
    # texts with apostrophes or non-ASCII, split for the others) give the same features
    clean = [Record(f"r{i}", "neutral", "p", t.replace("\x00", " ")) for i, t in enumerate(texts)]
    for subset in (clean, [r for r in clean if r.hypothesis.isascii() and "'" not in r.hypothesis]):
        fast = extract_features(subset, ["ngrams", "hypo-len"])
        slow = extract_features(subset, ["ngrams", "hypo-len"], tokenizer=tokenize)
        assert sorted(fast.names) == sorted(slow.names)
        assert [sorted(fast.features_of(i)) for i in range(len(subset))] == [
            sorted(slow.features_of(i)) for i in range(len(subset))
        ]


def test_parse_ngram() -> None:
    assert parse_ngram("is sleeping@hypothesis") == (["is", "sleeping"], "hypothesis")
    assert parse_ngram("man@premise") == (["man"], "premise")
    assert parse_ngram("hypo-len<5") is None and parse_ngram("<null>") is None
