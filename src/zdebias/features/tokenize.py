"""The default word tokenisation shared by features, z-statistics and unlikelihood masks.

Lower-case, then the regex ``\\w+(?:'\\w+)?`` (SPEC §2). ``word_spans`` gives the character
offsets too, so a model's sub-word tokens can be mapped back to the words they belong to.
"""

from __future__ import annotations

import re

TOKEN_RE = re.compile(r"\w+(?:'\w+)?")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens: ``tokenize("Nobody's sleeping.") == ["nobody's", "sleeping"]``."""
    return TOKEN_RE.findall(text.lower())


def word_spans(text: str) -> list[tuple[str, int, int]]:
    """``(token, start, end)`` for each word token, offsets into ``text``.

    Lower-casing can change string length for a few characters (e.g. "İ"); offsets are taken
    on the original text so they always index ``text`` itself.
    """
    return [(m.group(0).lower(), m.start(), m.end()) for m in TOKEN_RE.finditer(text)]
