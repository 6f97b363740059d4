"""Errors that the CLI turns into one clear line and exit code 2."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

V = TypeVar("V")


class ZdebiasError(ValueError):
    """Any user-facing error: bad input, bad option, missing model. Never shown with a traceback.

    A ``ValueError`` too, so Python callers' ``except ValueError`` catches bad values given
    to the library.
    """


class DataError(ZdebiasError):
    """Bad input data, located by file, line and (where known) field.

    ``str(err)`` is ``FILE:LINE: field 'F': message`` (line and field omitted when unknown).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.field = field
        super().__init__(self.format())

    def __reduce__(self) -> tuple[object, ...]:
        # keep path, line and field across processes (a worker's error reaches the parent)
        return (_data_error, (self.message, self.path, self.line, self.field))

    def format(self) -> str:
        where = ""
        if self.path is not None:
            where = str(self.path)
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        field = f"field '{self.field}': " if self.field else ""
        return f"{where}{field}{self.message}"


def _data_error(message: str, path: str | None, line: int | None, field: str | None) -> DataError:
    return DataError(message, path=path, line=line, field=field)


class ConfigError(ZdebiasError):
    """A bad option, recipe or setting."""


def lookup(
    table: Mapping[str, V], name: str, what: str, *, error: type[Exception] = ConfigError
) -> V:
    """``table[name]``; an unknown ``name`` raises ``error``, listing the valid names:
    ``unknown loss 'focal'; expected one of mle, unlikelihood``."""
    try:
        return table[name]
    except KeyError:
        raise error(f"unknown {what} {name!r}; expected one of {', '.join(table)}") from None
