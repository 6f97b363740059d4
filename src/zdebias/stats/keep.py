"""Features that are the task (``keep_features``): the z-filter and the shortcut split leave
them alone; the statistics still compute and report them, marked as kept.

On single-text tasks words are the signal: a toxicity set's slurs *are* its "hate" label, an
intent set's "refund" its ``refund`` intent. z-statistics cannot tell such a feature from a
sampling artefact; the user can, and names them here:

- a feature's exact name (``idiot@text``, ``hypo-len<5``);
- a glob over names, matched as :func:`fnmatch.fnmatchcase` does, case counting
  (``*idiot*@text``: the word and every n-gram holding it; ``hypo-len*``);
- ``@FILE``: a text file of such names and globs, one per line (blank lines and lines that
  start with ``#`` skipped), read when the settings are made (a path relative to the working
  directory), so a recipe's stage hash holds the patterns themselves.

A file that cannot be read is an error (the filter would otherwise remove the task's own
signal); a pattern that matches no feature of the data is a warning naming it.

>>> kept = KeptFeatures.of(["idiot@text", "moron@text", "the@text", "<null>"], ["idiot@text", "m*"])
>>> kept.mask.tolist(), kept.unmatched
([True, True, False, False], [])
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zdebias.errors import ConfigError

#: the characters that make a pattern a glob (else it is an exact feature name)
GLOB_CHARS = frozenset("*?[")


def expand_patterns(values: Sequence[str]) -> list[str]:
    """``values`` with each ``@FILE`` replaced by the patterns its lines hold, in order,
    duplicates dropped; a file that cannot be read, or a line that names another file, is a
    :class:`ConfigError`."""
    out: list[str] = []
    for value in values:
        if not value.startswith("@"):
            out.append(value)
            continue
        path = Path(value[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            reason = getattr(err, "strerror", None) or type(err).__name__
            raise ConfigError(
                f"keep_features: cannot read the pattern file {str(path)!r}: {reason}"
            ) from None
        for number, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("@"):
                raise ConfigError(
                    f"{path}:{number}: keep_features: a pattern file cannot name another "
                    f"file ({line!r})"
                )
            out.append(line)
    return list(dict.fromkeys(out))


def matches(pattern: str, name: str) -> bool:
    """Whether ``pattern`` (an exact name, or a glob when it holds ``*``, ``?`` or ``[``)
    names the feature ``name``; an exact name matches itself even when it holds ``[``."""
    if pattern == name:
        return True
    return not GLOB_CHARS.isdisjoint(pattern) and fnmatch.fnmatchcase(name, pattern)


@dataclass
class KeptFeatures:
    """The features of one feature matrix that ``patterns`` keep: ``mask`` ``[F]`` (True:
    kept), and the patterns that matched none of them (``unmatched``)."""

    patterns: list[str]
    mask: np.ndarray
    unmatched: list[str]

    @classmethod
    def of(cls, names: Sequence[str], patterns: Sequence[str]) -> KeptFeatures:
        """The kept features among ``names`` (the matrix's column names)."""
        mask = np.zeros(len(names), dtype=bool)
        index = {name: j for j, name in enumerate(names)}
        unmatched = []
        for pattern in patterns:
            found = False
            if pattern in index:
                mask[index[pattern]] = found = True
            if not GLOB_CHARS.isdisjoint(pattern):
                rule = re.compile(fnmatch.translate(pattern))
                hits = [j for j, name in enumerate(names) if rule.match(name)]
                mask[hits] = True
                found = found or bool(hits)
            if not found:
                unmatched.append(pattern)
        return cls(list(patterns), mask, unmatched)

    @property
    def columns(self) -> np.ndarray:
        """The kept columns' indices, ascending."""
        return np.flatnonzero(self.mask)

    def warnings(self) -> list[str]:
        """One line per pattern that matched no feature (a typo keeps nothing)."""
        return [
            f"--keep-features {p!r} matches no feature of these rows (feature names look like "
            "'word@text', 'two words@text', 'hypo-len<5'); it keeps nothing"
            for p in self.unmatched
        ]

    def block(self, significant: np.ndarray | None = None) -> dict[str, Any]:
        """The ``keep_features`` block of a report or summary: the patterns, how many
        features they keep, and of those how many are ``significant`` (``[F]`` bool)."""
        out: dict[str, Any] = {"patterns": self.patterns, "n_features": int(self.mask.sum())}
        if significant is not None:
            out["n_significant"] = int((np.asarray(significant, dtype=bool) & self.mask).sum())
        out["unmatched"] = self.unmatched
        return out


def mark_kept(kept: KeptFeatures, *tables: dict[str, list[dict[str, Any]]]) -> None:
    """Mark the rows of per-label feature ``tables`` (``{label: [{"feature": ...}]}``) whose
    feature is kept: ``"kept": true`` (in place; other rows unchanged)."""
    names = {str(row["feature"]) for t in tables for rows in t.values() for row in rows}
    hit = {n for n in names if any(matches(p, n) for p in kept.patterns)}
    for table in tables:
        for rows in table.values():
            for row in rows:
                if row["feature"] in hit:
                    row["kept"] = True


def kept_features(names: Sequence[str], patterns: Sequence[str]) -> KeptFeatures | None:
    """:meth:`KeptFeatures.of`, or None when no pattern is given (nothing is kept)."""
    return KeptFeatures.of(names, patterns) if patterns else None


__all__ = [
    "GLOB_CHARS",
    "KeptFeatures",
    "expand_patterns",
    "kept_features",
    "mark_kept",
    "matches",
]
