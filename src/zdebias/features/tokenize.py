"""Word tokenisation: the one tokeniser of n-gram, length and overlap features and of
unlikelihood masks (docs/design.md §2).

The default: lower-case, then the regex ``\\w+(?:'\\w+)?``, except in scripts written without
spaces (Han, kana, Thai, ...), cut into characters (:mod:`zdebias.features.scripts`). The
settings ``token_pattern`` (another regex, applied to all text as it is), ``segmenter``
(``jieba``: Chinese words), ``lowercase`` and ``tokenizer`` (a function ``text -> list[str]`` or
its dotted path) change it; :meth:`Tokenizer.from_settings` reads them. ``spans`` gives
character offsets too, so a model's sub-word tokens can be mapped back to the words they
belong to, and :attr:`Tokenizer.spec` names a non-default tokeniser in a string that
:meth:`Tokenizer.from_spec` turns back into it (stored with biased n-gram features, so a mask
finds the same words the feature counted).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

from zdebias.errors import ConfigError
from zdebias.features.scripts import cut, cut_tokens, has_unspaced, load_segmenter

TOKEN_RE = re.compile(r"\w+(?:'\w+)?")
#: TOKEN_RE or a NUL (the separator of the batch route).
_TOKEN_NUL_RE = re.compile(TOKEN_RE.pattern + r"|\x00")
#: Spec prefixes: a token regex, the dotted path of a tokeniser function, a word segmenter.
_RE_SPEC, _FN_SPEC, _SEG_SPEC = "re:", "fn:", "seg:"
#: ASCII characters that are not word characters (``\w``), mapped to a space; NUL is kept.
_ASCII_NON_WORD = str.maketrans(
    {c: " " for c in range(1, 128) if not (chr(c).isalnum() or chr(c) == "_")}
)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens: ``tokenize("Nobody's sleeping.") == ["nobody's", "sleeping"]``;
    ``tokenize("没有人") == ["没", "有", "人"]``."""
    text = text.lower()
    return TOKEN_RE.findall(text) if text.isascii() else _default_tokens(text)


def _default_tokens(text: str, segment: Callable[[str], list[str]] | None = None) -> list[str]:
    """The default tokens of ``text`` as it is (no lower-casing)."""
    if segment is None:
        return cut_tokens(text, TOKEN_RE) if has_unspaced(text) else TOKEN_RE.findall(text)
    return [tok for tok, _, _ in cut(text, TOKEN_RE, segment)]


def word_spans(text: str) -> list[tuple[str, int, int]]:
    """``(token, start, end)`` for each default word token, offsets into ``text``.

    Lower-casing can change string length for a few characters (e.g. "İ"); offsets are taken
    on the original text so they always index ``text`` itself.
    """
    if not has_unspaced(text):
        return [(m.group(0).lower(), m.start(), m.end()) for m in TOKEN_RE.finditer(text)]
    return [(tok.lower(), start, end) for tok, start, end in cut(text, TOKEN_RE)]


def _module_from_file(file: str) -> Any:
    """The module of a Python file (``my_features.py``), loaded once per absolute path under a
    name of its own, so that a file in the current folder needs no ``PYTHONPATH``."""
    import hashlib
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(file).resolve()
    if not path.is_file():
        raise ConfigError(f"no such feature file {file!r}")
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    name = f"zdebias_user.{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot load feature file {file!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[name]
        raise ConfigError(f"cannot load feature file {file!r}: {err}") from None
    return module


def load_function(path: str) -> Callable[..., Any]:
    """The function at ``pkg.module:function`` (or ``pkg.module.function``), or in a file,
    ``path/to/my_features.py:function``; ConfigError if not."""
    import importlib
    from pathlib import Path

    if ":" in path:
        module_name, _, attr = path.rpartition(":")
    else:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ConfigError(f"bad feature path {path!r}; expected pkg.module:function")
    if module_name.endswith(".py"):
        module = _module_from_file(module_name)
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            hint = ""
            local = Path(*module_name.split(".")).with_suffix(".py")
            if local.is_file():  # `zdebias` does not import from the current folder
                hint = f"; to use the file {local} here, name it by path: {local}:{attr}"
            raise ConfigError(
                f"cannot import feature module {module_name!r}: {err}{hint}"
            ) from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"module {module_name!r} has no feature function {attr!r}") from None
    if not callable(obj):
        raise ConfigError(f"feature {path!r} is not a function")
    return obj


@dataclass(frozen=True)
class Tokenizer:
    """Cuts text into word tokens: the default (:data:`TOKEN_RE`, and characters in scripts
    without spaces), a regex applied to all text, the default with a word segmenter for Han,
    or a user function.

    >>> Tokenizer(r"[\\w-]+")("A t-shirt.")
    ['a', 't-shirt']
    """

    pattern: str | None = None
    lowercase: bool = True
    function: str | Callable[[str], list[str]] | None = None
    segmenter: str | None = None
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _fn: Callable[[str], list[str]] | None = field(init=False, repr=False, compare=False)
    _segment: Callable[[str], list[str]] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fn = None
        if self.function is not None:
            fn = load_function(self.function) if isinstance(self.function, str) else self.function
            if not callable(fn):
                raise ConfigError("setting 'tokenizer' must be a function text -> list[str]")
        segment = None
        if self.segmenter is not None:
            if self.pattern is not None or self.function is not None:
                other = "token_pattern" if self.pattern is not None else "tokenizer"
                raise ConfigError(f"settings 'segmenter' and '{other}': give one of them")
            segment = load_segmenter(self.segmenter)
        object.__setattr__(self, "_segment", segment)
        regex = TOKEN_RE
        if self.pattern is not None and self.pattern != TOKEN_RE.pattern:  # that one: fast routes
            try:
                regex = re.compile(self.pattern)
            except re.error as err:
                raise ConfigError(f"bad token_pattern {self.pattern!r}: {err}") from None
        object.__setattr__(self, "_regex", regex)
        object.__setattr__(self, "_fn", fn)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Tokenizer:
        """The tokeniser of the settings ``token_pattern``, ``lowercase``, ``tokenizer`` and
        ``segmenter``."""
        return cls(
            settings.get("token_pattern"),
            bool(settings.get("lowercase", True)),
            settings.get("tokenizer"),
            settings.get("segmenter"),
        )

    @classmethod
    def from_spec(cls, spec: str | None) -> Tokenizer:
        """The inverse of :attr:`spec` (``None``: the default tokeniser)."""
        if not spec:
            return cls()
        if spec.startswith(_RE_SPEC):
            return cls(spec[len(_RE_SPEC) :])
        if spec.startswith(_FN_SPEC):
            return cls(function=spec[len(_FN_SPEC) :])
        if spec.startswith(_SEG_SPEC):
            return cls(segmenter=spec[len(_SEG_SPEC) :])
        raise ConfigError(
            f"bad tokenizer spec {spec!r}; expected re:PATTERN, fn:pkg.mod:fn or seg:NAME"
        )

    @property
    def is_default(self) -> bool:
        """True for the default (lower-cased :data:`TOKEN_RE`, unspaced scripts cut into
        characters) and for :data:`TOKEN_RE` given as ``token_pattern``: they have fast batch
        routes."""
        return (
            self._fn is None
            and self._segment is None
            and self._regex is TOKEN_RE
            and self.lowercase
        )

    @property
    def _scripts(self) -> bool:
        """Whether scripts without spaces are cut apart (the default pattern, not a regex
        given as ``token_pattern``, which applies to all text as it is)."""
        return self._fn is None and self.pattern is None

    @property
    def spec(self) -> str | None:
        """A string naming this tokeniser, ``None`` for the default (case is not recorded).

        A function given as an object, not a dotted path, has no spec (``None``).
        """
        if self.function is not None:
            return _FN_SPEC + self.function if isinstance(self.function, str) else None
        if self.segmenter is not None:
            return _SEG_SPEC + self.segmenter
        return None if self.pattern is None else _RE_SPEC + self.pattern

    def __call__(self, text: str) -> list[str]:
        """The tokens of ``text``."""
        if self._fn is not None:
            return self._fn(text)
        source = text.lower() if self.lowercase else text
        if source.isascii() or not self._scripts:  # ASCII: no script to cut, no word to segment
            return self._regex.findall(source)
        return _default_tokens(source, self._segment)

    def spans(self, text: str) -> list[tuple[str, int, int]]:
        """``(token, start, end)`` for each token, offsets into ``text``; tokens lower-cased.

        Regex tokens are matched on the lower-cased text when lower-casing keeps its length
        (so offsets still index ``text``), else on ``text``. A function's tokens are found in
        order in the text; one that is not a substring of it is skipped.
        """
        if self.is_default:  # offsets on the text itself, as before lower-casing
            if self._scripts:
                return word_spans(text)
            return [(m.group(0).lower(), m.start(), m.end()) for m in TOKEN_RE.finditer(text)]
        lower = text.lower()
        same = len(lower) == len(text)
        if self._fn is None:
            source = lower if self.lowercase and same else text
            if self._scripts:
                return [(t.lower(), s, e) for t, s, e in cut(source, TOKEN_RE, self._segment)]
            return [(m.group(0).lower(), m.start(), m.end()) for m in self._regex.finditer(source)]
        haystack = lower if same else text
        out, pos = [], 0
        for tok in self._fn(text):
            needle = tok.lower() if same else tok
            start = haystack.find(needle, pos) if needle else -1
            if start >= 0:
                pos = start + len(needle)
                out.append((tok.lower(), start, pos))
        return out

    def tokenize_many(self, texts: list[str]) -> tuple[list[str], np.ndarray | None]:
        r"""All tokens of all texts, flat, and the token count of each text.

        The default tokeniser makes one pass over the texts joined by NUL (which no token
        can contain or cross, and which lower-casing leaves alone) and returns the flat list
        *with* the NUL separators and ``None`` as counts (the caller splits on them). Texts
        that are ASCII without apostrophes take a faster exact route: every ASCII character
        other than ``[A-Za-z0-9_]`` is a separator there, so ``\w+(?:'\w+)?`` matches exactly
        the pieces ``str.split`` returns after mapping those characters to spaces. Other
        tokenisers run once per text. Both give exactly ``self(text)`` per text.
        """
        n = len(texts)
        if self.is_default and n > 1:
            joined = "\x00".join(texts)
            if joined.count("\x00") == n - 1:
                if "'" not in joined and joined.isascii():
                    spaced = " \x00 ".join(texts).lower().translate(_ASCII_NON_WORD)
                    return spaced.split(), None
                lower = joined.lower()
                if self._scripts and has_unspaced(lower):
                    return cut_tokens(lower, _TOKEN_NUL_RE), None
                return _TOKEN_NUL_RE.findall(lower), None
        toks = list(map(self, texts))
        lengths = np.fromiter(map(len, toks), dtype=np.int64, count=n)
        return list(chain.from_iterable(toks)), lengths
