"""Word tokenisation: the one tokeniser of n-gram, length and overlap features and of
unlikelihood masks (SPEC §2).

The default: lower-case, then the regex ``\\w+(?:'\\w+)?``. The settings ``token_pattern``
(another regex), ``lowercase`` and ``tokenizer`` (a function ``text -> list[str]`` or its dotted
path) change it; :meth:`Tokenizer.from_settings` reads them. ``spans`` gives character offsets
too, so a model's sub-word tokens can be mapped back to the words they belong to, and
:attr:`Tokenizer.spec` names a non-default tokeniser in a string that
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

TOKEN_RE = re.compile(r"\w+(?:'\w+)?")
#: Spec prefixes: a token regex, or the dotted path of a tokeniser function.
_RE_SPEC, _FN_SPEC = "re:", "fn:"
#: ASCII characters that are not word characters (``\w``), mapped to a space; NUL is kept.
_ASCII_NON_WORD = str.maketrans(
    {c: " " for c in range(1, 128) if not (chr(c).isalnum() or chr(c) == "_")}
)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens: ``tokenize("Nobody's sleeping.") == ["nobody's", "sleeping"]``."""
    return TOKEN_RE.findall(text.lower())


def word_spans(text: str) -> list[tuple[str, int, int]]:
    """``(token, start, end)`` for each default word token, offsets into ``text``.

    Lower-casing can change string length for a few characters (e.g. "İ"); offsets are taken
    on the original text so they always index ``text`` itself.
    """
    return [(m.group(0).lower(), m.start(), m.end()) for m in TOKEN_RE.finditer(text)]


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
    """Cuts text into word tokens: a regex (default :data:`TOKEN_RE`), or a user function.

    >>> Tokenizer(r"[\\w-]+")("A t-shirt.")
    ['a', 't-shirt']
    """

    pattern: str | None = None
    lowercase: bool = True
    function: str | Callable[[str], list[str]] | None = None
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _fn: Callable[[str], list[str]] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fn = None
        if self.function is not None:
            fn = load_function(self.function) if isinstance(self.function, str) else self.function
            if not callable(fn):
                raise ConfigError("setting 'tokenizer' must be a function text -> list[str]")
        regex = TOKEN_RE
        if self.pattern is not None:
            try:
                regex = re.compile(self.pattern)
            except re.error as err:
                raise ConfigError(f"bad token_pattern {self.pattern!r}: {err}") from None
        object.__setattr__(self, "_regex", regex)
        object.__setattr__(self, "_fn", fn)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Tokenizer:
        """The tokeniser of the settings ``token_pattern``, ``lowercase`` and ``tokenizer``."""
        return cls(
            settings.get("token_pattern"),
            bool(settings.get("lowercase", True)),
            settings.get("tokenizer"),
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
        raise ConfigError(f"bad tokenizer spec {spec!r}; expected re:PATTERN or fn:pkg.mod:fn")

    @property
    def is_default(self) -> bool:
        """True for the default (lower-cased :data:`TOKEN_RE`), which has fast batch routes."""
        return self._fn is None and self._regex is TOKEN_RE and self.lowercase

    @property
    def spec(self) -> str | None:
        """A string naming this tokeniser, ``None`` for the default (case is not recorded).

        A function given as an object, not a dotted path, has no spec (``None``).
        """
        if self.function is not None:
            return _FN_SPEC + self.function if isinstance(self.function, str) else None
        return None if self.pattern is None else _RE_SPEC + self.pattern

    def __call__(self, text: str) -> list[str]:
        """The tokens of ``text``."""
        if self._fn is not None:
            return self._fn(text)
        return self._regex.findall(text.lower() if self.lowercase else text)

    def spans(self, text: str) -> list[tuple[str, int, int]]:
        """``(token, start, end)`` for each token, offsets into ``text``; tokens lower-cased.

        Regex tokens are matched on the lower-cased text when lower-casing keeps its length
        (so offsets still index ``text``), else on ``text``. A function's tokens are found in
        order in the text; one that is not a substring of it is skipped.
        """
        if self.is_default:
            return word_spans(text)
        lower = text.lower()
        same = len(lower) == len(text)
        if self._fn is None:
            source = lower if self.lowercase and same else text
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
                return re.findall(TOKEN_RE.pattern + r"|\x00", joined.lower()), None
        toks = list(map(self, texts))
        lengths = np.fromiter(map(len, toks), dtype=np.int64, count=n)
        return list(chain.from_iterable(toks)), lengths
