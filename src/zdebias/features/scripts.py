"""Scripts written without spaces between words (Han, kana, Thai, ...): how the default
tokeniser cuts them, and the optional word segmenter for Chinese.

A word regex such as ``\\w+`` takes a whole clause of Chinese, Japanese or Thai for one word.
The default tokeniser therefore cuts such text into characters, as BERT's basic tokeniser cuts
Han: each letter of Han, Hiragana, Katakana, Bopomofo and Yi is a token; in the Brahmic scripts
of South-East Asia (Thai, Lao, Khmer, Myanmar, ...) each grapheme cluster is one, so that vowel
signs and tone marks stay with their consonant. Everything else (Latin, Cyrillic, Arabic,
Devanagari, Hangul, ...) keeps the word regex, unchanged. Which character belongs to which
script is the Unicode Script property (for Han and kana Script_Extensions, which adds the
marks they share, such as ー), as the ``regex`` package knows it.

``segmenter="jieba"`` cuts each run of Han characters into words with jieba (the ``zh``
extra) instead of into characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

from zdebias.errors import ConfigError

#: Scripts cut into single letters (and digits).
LETTER_SCRIPTS = ("Han", "Hiragana", "Katakana", "Bopomofo", "Yi")
#: Scripts cut into grapheme clusters (a letter with its vowel signs and tone marks).
CLUSTER_SCRIPTS = (
    "Thai",
    "Lao",
    "Khmer",
    "Myanmar",
    "Tai_Tham",
    "Tai_Le",
    "New_Tai_Lue",
    "Tai_Viet",
    "Javanese",
    "Balinese",
    "Buginese",
)
#: The word segmenters ``segmenter`` can name → the pip extra that installs them.
SEGMENTERS = {"jieba": "zh"}

#: A code point below this is in no script without spaces (the lowest: Thai, U+0E00).
_FIRST = "\u0e00"


def _classes(scripts: tuple[str, ...]) -> str:
    """A character class body: each script's letters, and for Han and kana also the marks
    they share with each other (Script_Extensions: 〆, ー, ...)."""
    shared = {"Han", "Hiragana", "Katakana"}
    return "".join(rf"\p{{{'scx' if name in shared else 'sc'}={name}}}" for name in scripts)


@cache
def _pieces(segment: bool, split: bool = False) -> Any:
    """The ``regex`` pattern of one token of an unspaced script (with ``segment``: a run of
    Han characters is one match, group ``run``, for the segmenter to cut; with ``split``: the
    whole match one group, for ``split``)."""
    import regex

    word = r"[\p{L}\p{N}]"
    letter = f"[[{_classes(LETTER_SCRIPTS)}]&&{word}]"
    # a cluster starts at a letter or digit and takes the clusters that start with a mark
    # (a vowel sign such as Myanmar's ာ is a cluster of its own in Unicode's rules)
    cluster = rf"(?=[[{_classes(CLUSTER_SCRIPTS)}]&&{word}])\X(?:(?=\p{{M}})\X)*"
    han = r"(?P<run>[\p{Han}&&\p{L}]+)|" if segment else ""
    body = f"{han}{letter}|{cluster}"
    return regex.compile(f"(?V1)({body})" if split else f"(?V1){body}")


def has_unspaced(text: str) -> bool:
    """Whether ``text`` holds a letter of a script without spaces (fast on ASCII text)."""
    if text.isascii() or max(text) < _FIRST:
        return False
    return _pieces(False).search(text) is not None


def cut(
    text: str,
    word_re: re.Pattern[str],
    segment: Callable[[str], list[str]] | None = None,
) -> list[tuple[str, int, int]]:
    """``(token, start, end)`` of each token of ``text``: unspaced-script letters or clusters
    (or ``segment``'s words of each Han run), and ``word_re``'s matches in the text between
    them. ``cut("我没有 time", TOKEN_RE)`` → 我, 没, 有, time."""
    out: list[tuple[str, int, int]] = []
    pos = 0
    for m in _pieces(segment is not None).finditer(text):
        start, end = m.span()
        if start > pos:
            out.extend((w.group(), w.start(), w.end()) for w in word_re.finditer(text, pos, start))
        if segment is not None and m.lastgroup == "run":
            words = segment(m.group())
            if "".join(words) != m.group():  # offsets need words that join back to the run
                words = list(m.group())
            for word in words:
                out.append((word, start, start + len(word)))
                start += len(word)
        else:
            out.append((m.group(), start, end))
        pos = end
    if pos < len(text):
        out.extend((w.group(), w.start(), w.end()) for w in word_re.finditer(text, pos))
    return out


def cut_tokens(text: str, word_re: re.Pattern[str]) -> list[str]:
    """The tokens of :func:`cut` without a segmenter, without their offsets (twice as fast:
    the batch route of Chinese, Japanese and Thai text)."""
    parts = _pieces(False, True).split(text)  # gap, token, gap, token, ..., gap
    out: list[str] = []
    words = word_re.findall
    for i in range(0, len(parts) - 1, 2):
        if parts[i]:
            out += words(parts[i])
        out.append(parts[i + 1])
    if parts[-1]:
        out += words(parts[-1])
    return out


def load_segmenter(name: str) -> Callable[[str], list[str]]:
    """The word segmenter ``name`` (a function: a run of Han characters → its words, which
    join back to it), or a ConfigError naming the valid names or the pip command."""
    if name not in SEGMENTERS:
        raise ConfigError(f"unknown segmenter {name!r}; valid: {', '.join(SEGMENTERS)}")
    try:
        import jieba
    except ImportError:
        extra = SEGMENTERS[name]
        raise ConfigError(
            f"segmenter {name!r} needs the {name} package: pip install 'zdebias[{extra}]'"
        ) from None
    import logging

    jieba.setLogLevel(logging.WARNING)  # not its "Building prefix dict ..." lines on stderr
    return _jieba_words


def _jieba_words(run: str) -> list[str]:
    import jieba

    return [word for word in jieba.lcut(run, HMM=True) if word]


__all__ = ["CLUSTER_SCRIPTS", "LETTER_SCRIPTS", "SEGMENTERS", "cut", "cut_tokens", "has_unspaced"]
