"""Text in any script (issue 53.1): Chinese, Japanese and Thai cut into characters by the
default tokeniser, spaced scripts as before, the jieba segmenter, the short-field warning."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from statistics import NormalDist

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.cli_main import run_main
from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.features.extract import extract_features
from zdebias.features.keys import FeatureKey
from zdebias.features.scripts import _FIRST, _pieces, cut, cut_tokens, has_unspaced
from zdebias.features.tokenize import TOKEN_RE, Tokenizer, tokenize, word_spans
from zdebias.stats.measure import measure

OLD = re.compile(r"\w+(?:'\w+)?")  # the default before issue 53: one pattern for all text

# premise fixed; the hypotheses' negation words (没 "not", ない "not", ไม่ "not") only in
# contradictions. Tokens written out by hand below.
ZH = (
    "男人在走。",
    [
        "人在走。",
        "男人在走路。",
        "男人在走去上班。",
        "没有人在走。",
        "男人没在走。",
        "男人不在走。",
    ],
)
JA = (
    "犬が走っている。",
    [
        "犬が走る。",
        "犬が走っている。",
        "子犬が走る。",
        "犬はいない。",
        "猫しかいない。",
        "犬が走らない。",
    ],
)
TH = ("ผู้ชายนอน", ["ผู้ชายนอน", "ชายนอนอยู่", "ผู้ชายนอนที่บ้าน", "ผู้ชายไม่นอน", "ไม่มีใครนอน", "ชายไม่อยู่"])
LABELS = ["entailment", "entailment", "neutral", "contradiction", "contradiction", "contradiction"]


def _records(data: tuple[str, list[str]]) -> list[Record]:
    premise, hypotheses = data
    return [
        Record(f"r{i}", label, premise, h)
        for i, (h, label) in enumerate(zip(hypotheses, LABELS, strict=True))
    ]


def _z(c: int, n: int, p0: float = 1 / 3) -> float:
    """z*(x, l) of docs/design.md §3 by its formula."""
    return (c / n - p0) / ((p0 * (1 - p0) / n) ** 0.5)


def test_unspaced_scripts_are_cut_into_characters() -> None:
    assert tokenize("没有人在走。") == ["没", "有", "人", "在", "走"]
    assert tokenize("コーヒーを飲みました") == [
        "コ",
        "ー",
        "ヒ",
        "ー",
        "を",
        "飲",
        "み",
        "ま",
        "し",
        "た",
    ]
    # Thai: a consonant keeps its vowel signs and tone marks (ผู้ = ผ + ู + ้; ม่ = ม + ่)
    assert tokenize("ผู้ชายไม่นอน") == ["ผู้", "ช", "า", "ย", "ไ", "ม่", "น", "อ", "น"]
    # Myanmar's ာ is a grapheme cluster of its own: it stays with its consonant
    assert tokenize("မြန်မာ") == ["မြ", "န်", "မာ"]
    # spaced words around them as before, each Han character apart from them
    assert tokenize("The man isn't 中国人, OK?") == ["the", "man", "isn't", "中", "国", "人", "ok"]
    assert tokenize("iPhone手机2020年") == ["iphone", "手", "机", "2020", "年"]
    text = "Ein Mann: 没有人 ไม่นอน"
    spans = word_spans(text)
    assert spans == [
        ("ein", 0, 3),
        ("mann", 4, 8),
        ("没", 10, 11),
        ("有", 11, 12),
        ("人", 12, 13),
        ("ไ", 14, 15),
        ("ม่", 15, 17),
        ("น", 17, 18),
        ("อ", 18, 19),
        ("น", 19, 20),
    ]
    assert all(text[s:e].lower() == tok for tok, s, e in spans)
    tok = Tokenizer()
    assert tok.is_default and tok.spec is None and tok.spans(text) == spans
    texts = ["没有人", "a b", "ไม่นอน it's", "", "x"]
    flat, lengths = tok.tokenize_many(texts)
    assert lengths is None and flat == [
        *["没", "有", "人", "\x00", "a", "b", "\x00"],
        *["ไ", "ม่", "น", "อ", "น", "it's", "\x00", "\x00", "x"],
    ]
    cased = Tokenizer(lowercase=False)
    assert cased("OK 没有") == ["OK", "没", "有"]
    assert cased.spans("OK 没有") == [("ok", 0, 2), ("没", 3, 4), ("有", 4, 5)]


def test_a_token_pattern_applies_to_all_text_as_before() -> None:
    """``--token-pattern`` is a regex over all text: ``\\w+`` keeps a clause whole (the old
    behaviour, and how a user gets it back)."""
    tok = Tokenizer(r"\w+")
    assert tok("没有人在走。他不在家") == ["没有人在走", "他不在家"]
    assert tok.spans("没有人 ok") == [("没有人", 0, 3), ("ok", 4, 6)]
    same = Tokenizer(TOKEN_RE.pattern)  # the default's regex given explicitly: no script cuts
    assert same.spec == "re:" + TOKEN_RE.pattern and same("没有人 ok") == ["没有人", "ok"]
    assert same.tokenize_many(["没有人", "ok"])[0] == ["没有人", "\x00", "ok"]
    assert same.spans("没有人 ok") == [("没有人", 0, 3), ("ok", 4, 6)]


# Latin with accents, Cyrillic (and Ukrainian's ʼ), Greek, Arabic, Hebrew, Devanagari, Hangul,
# Tibetan, full-width Latin, NUL and odd characters: all spaced, all cut as before
SPACED = [
    "Ein Mädchen läuft; ÉLAN, naïve café — İstanbul",
    "Мужчина спит. Пʼять мʼясо",
    "Ο άνθρωπος κοιμάται",
    "الرجل نائم في المنزل",
    "האיש ישן",
    "आदमी सो रहा है।",
    "남자가 자고 있다.",
    "བོད་ཡིག",
    "ＡＢＣ１２３ test_case it's o'clock",
    "a\x00b \x01 c\u200dd",
]


def test_spaced_scripts_tokenise_as_before() -> None:
    for text in SPACED:
        assert not has_unspaced(text), text
        assert tokenize(text) == OLD.findall(text.lower()), text
        assert word_spans(text) == [(m[0].lower(), m.start(), m.end()) for m in OLD.finditer(text)]
    flat, _ = Tokenizer().tokenize_many(SPACED)
    assert [t for t in flat if t != "\x00"] == [t for s in SPACED for t in OLD.findall(s.lower())]


def test_no_character_below_the_first_unspaced_one_is_cut() -> None:
    """``has_unspaced`` skips text below U+0E00 without the regex: nothing there is cut."""
    below = "".join(map(chr, range(1, ord(_FIRST))))
    assert _pieces(False).search(below) is None and _pieces(True).search(below) is None
    assert has_unspaced("ก") and has_unspaced("a 中") and not has_unspaced("ab")


MIXED = st.sampled_from(list("aZ9_' .,\x00中文ーかカไม่ຳ္ြ\u0301\u200d"))


@settings(max_examples=300, deadline=None)
@given(st.text(MIXED | st.characters(), max_size=40))
def test_any_text_spaced_as_before_unspaced_at_its_spans(text: str) -> None:
    spans = word_spans(text)
    assert all(text[s:e].lower() == tok for tok, s, e in spans)
    lower = text.lower()
    assert tokenize(text) == cut_tokens(lower, TOKEN_RE) == [t for t, _, _ in cut(lower, TOKEN_RE)]
    if not has_unspaced(text):
        assert tokenize(text) == OLD.findall(lower)


@pytest.mark.parametrize(
    ("data", "negation", "n_neg", "n_features"),
    [
        # 4 premise characters (男 人 在 走);
        # 11 in the hypotheses: 人 在 走 男 路 去 上 班 没 有 不
        (ZH, "没@hypothesis", 2, 15),
        # premise 犬 が 走 っ て い る (7);
        # hypotheses 犬 が 走 る っ て い 子 は な 猫 し か ら (14)
        (JA, "な@hypothesis", 3, 21),
        # premise ผู้ ช า ย น อ (6); hypotheses those 6 and ยู่ ที่ บ้ ไ ม่ มี ใ ค ร (15)
        (TH, "ม่@hypothesis", 3, 21),
    ],
    ids=["zh", "ja", "th"],
)
def test_negation_cues_come_out_as_hand_computed(data, negation, n_neg, n_features) -> None:
    m = measure(_records(data), features=["unigrams"], top=2)
    rep = m.report
    assert rep["n_features"] == n_features
    z_c = -NormalDist().inv_cdf(0.01 / n_features)
    assert rep["z_critical"] == pytest.approx(z_c, abs=1e-12)
    assert rep["z_critical"] == pytest.approx({15: 3.2087, 21: 3.3042}[n_features], abs=1e-4)
    top = rep["top"]["contradiction"][0]
    assert (top["feature"], top["n"], top["p"]) == (negation, n_neg, 1.0)
    # 没 in 2 contradictions: (1 - 1/3) / sqrt(2/9 / 2) = 2; ない and ไม่ in 3: sqrt(6)
    assert top["z"] == pytest.approx(_z(n_neg, n_neg), abs=1e-12)
    assert top["z"] == pytest.approx({2: 2.0, 3: 6**0.5}[n_neg], abs=1e-12)
    assert "warnings" not in rep


def test_japanese_negation_bigram_and_its_key() -> None:
    fm = extract_features(_records(JA), ["bigrams"])
    key = dict(zip(fm.names, fm.keys, strict=True))["な い@hypothesis"]
    assert key == FeatureKey("な い@hypothesis", "ngram", "hypothesis", ("な", "い"))
    assert FeatureKey.from_name(key.name) == key  # the default tokeniser: no spec recorded
    column = fm.names.index("な い@hypothesis")
    assert fm.matrix[:, column].toarray().ravel().tolist() == [0, 0, 0, 1, 1, 1]


def test_old_pattern_on_chinese_warns_about_short_fields() -> None:
    records = _records(ZH)
    rep = measure(records, features=["unigrams"], token_pattern=r"\w+").report
    assert "没有人在走@hypothesis" in {r["feature"] for r in rep["top"]["contradiction"]}
    assert rep["warnings"] == [
        "median length in tokens: premise 1, hypothesis 1 (n-gram, length and overlap "
        "features see whole phrases as words); --token-pattern '\\w+' keeps runs of Chinese, "
        "Japanese or Thai whole: leave it unset to cut them into characters, or add "
        "--segmenter jieba for Chinese words"
    ]


def _jsonl(path: Path, records: list[Record]) -> Path:
    rows = [{"premise": r.premise, "hypothesis": r.hypothesis, "label": r.label} for r in records]
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return path


def test_inspect_counts_tokens_and_warns_only_with_the_old_pattern(tmp_path, capsys) -> None:
    src = _jsonl(tmp_path / "zh.jsonl", _records(ZH))
    assert run_main(["-q", "inspect", src, "--json"]) == 0
    out = capsys.readouterr()
    info = json.loads(out.out)
    assert info["length_words"]["hypothesis"]["median"] == 1.0  # no spaces in Chinese
    # hypotheses of 3, 5, 7, 5, 5, 5 characters (punctuation is no token)
    assert info["length_tokens"]["hypothesis"] == {"min": 3, "mean": 5.0, "median": 5.0, "max": 7}
    assert info["length_tokens"]["premise"]["median"] == 4.0
    assert info["warnings"] == [] and out.err == ""
    assert run_main(["-q", "inspect", src, "--json", "--token-pattern", r"\w+"]) == 0
    out = capsys.readouterr()
    [line] = json.loads(out.out)["warnings"]
    assert line.startswith("median length in tokens: premise 1, hypothesis 1 ")
    assert "--segmenter jieba" in line and out.err.strip() == line


def test_stats_names_the_setting_for_short_english_texts() -> None:
    """One-word texts under the default tokeniser: the warning points at --token-pattern."""
    words = ["good", "bad", "fine", "awful", "great", "poor"]
    labels = ["positive", "negative"] * 3
    records = [
        Record(f"t{i}", lab, text=w) for i, (w, lab) in enumerate(zip(words, labels, strict=True))
    ]
    [line] = measure(records, features=["unigrams"]).report["warnings"]
    assert line.startswith("median length in tokens: text 1 ")
    assert line.endswith("set --token-pattern (e.g. '\\w' for one token per character)")


def test_jieba_segmenter_cuts_chinese_words() -> None:
    pytest.importorskip("jieba")
    tok = Tokenizer.from_settings({"segmenter": "jieba"})
    assert tok.spec == "seg:jieba" and Tokenizer.from_spec(tok.spec) == tok
    assert not tok.is_default
    assert tok("我们没有去北京, OK") == ["我们", "没有", "去", "北京", "ok"]
    assert tok.spans("我们没有去 OK") == [
        ("我们", 0, 2),
        ("没有", 2, 4),
        ("去", 4, 5),
        ("ok", 6, 8),
    ]
    assert tok("ไม่นอน") == ["ไ", "ม่", "น", "อ", "น"]  # other scripts as by default
    fm = extract_features(_records(ZH), ["unigrams"], segmenter="jieba")
    key = dict(zip(fm.names, fm.keys, strict=True))["没有@hypothesis"]
    assert key.tokens == ("没有",) and key.tokenizer == "seg:jieba"
    with pytest.raises(ConfigError, match="give one of them"):
        Tokenizer(r"\w+", segmenter="jieba")


def test_missing_segmenter_package_is_one_line(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "jieba", None)  # import jieba → ImportError
    with pytest.raises(ConfigError) as err:
        Tokenizer(segmenter="jieba")
    assert str(err.value) == (
        "segmenter 'jieba' needs the jieba package: pip install 'zdebias[zh]'"
    )
    with pytest.raises(ConfigError, match="unknown segmenter 'mecab'; valid: jieba"):
        Tokenizer(segmenter="mecab")


@pytest.mark.real_data
def test_snli_tokenises_and_extracts_as_before(data_dir: Path) -> None:
    """English byte for byte: tokens and spans of snli_20k's training rows, and the feature
    matrix of its first 2,000, against the pattern alone (no script cuts)."""
    from zdebias.data.readers import read_records

    every = read_records(data_dir / "snli_20k" / "train.jsonl")
    records = every[:2000]
    texts = [t for r in every for t in (r.premise, r.hypothesis)]
    assert any("'" in t for t in texts)  # ASCII all; with apostrophes: the regex route too
    assert [tokenize(t) for t in texts] == [OLD.findall(t.lower()) for t in texts]
    assert [word_spans(t) for t in texts] == [
        [(m[0].lower(), m.start(), m.end()) for m in OLD.finditer(t)] for t in texts
    ]
    new = extract_features(records, ["ngrams", "hypo-len", "len-ratio", "lex-overlap"])
    old = extract_features(
        records, ["ngrams", "hypo-len", "len-ratio", "lex-overlap"], token_pattern=OLD.pattern
    )
    assert new.names == old.names
    assert (new.matrix != old.matrix).nnz == 0


def test_a_segmenter_that_loses_characters_falls_back_to_characters() -> None:
    assert cut("他们 ok", TOKEN_RE, lambda run: ["他", "们"]) == [
        ("他", 0, 1),
        ("们", 1, 2),
        ("ok", 3, 5),
    ]
    assert cut("他们", TOKEN_RE, lambda run: ["他们们"]) == [("他", 0, 1), ("们", 1, 2)]
    assert cut("他们", TOKEN_RE, lambda run: [run]) == [("他们", 0, 2)]
