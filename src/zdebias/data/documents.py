"""Small JSON or YAML documents (configs, saved results), read with one clear error line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from zdebias.errors import ConfigError

if TYPE_CHECKING:
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")


def read_document(path: str | Path, *, missing: str) -> Any:
    """A JSON or YAML file (by its suffix), parsed; else one :class:`ConfigError` line:
    ``missing`` when there is no such file, the parser's complaint when it is not valid."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(missing)
    text = _text(path)
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.load(text, Loader=_unique_key_loader())  # a SafeLoader
        except _Repeated as rep:
            raise ConfigError(
                f"{path}:{rep.lines[1]}: field '{rep.key}': given twice (lines {rep.lines[0]} "
                f"and {rep.lines[1]}); only one value can be read"
            ) from None
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: not valid YAML: {err}") from None
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs)
    except _Repeated as rep:
        raise ConfigError(
            f"{path}: field '{rep.key}': given twice; only one value can be read"
        ) from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON ({err.msg})") from None


def _text(path: Path) -> str:
    """The file's text; one :class:`ConfigError` line for unreadable, empty, binary or
    non-UTF-8 bytes (a document zdebias writes is UTF-8 JSON or YAML)."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read ({err.strerror or err})") from None
    if not data.strip():
        raise ConfigError(f"{path}: empty file; expected a JSON or YAML document")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(f"{path}: UTF-16 text; save it as UTF-8 (a JSON or YAML document)")
    if b"\0" in data:
        raise ConfigError(f"{path}: binary data (a NUL byte); expected a JSON or YAML document")
    try:
        return data.decode("utf-8-sig")  # a byte-order mark, as some editors write, is fine
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start}); "
            "expected a JSON or YAML document"
        ) from None


def checked(doc: Any, model: type[M], path: str | Path, *, what: str) -> M:
    """``doc`` validated as ``model`` (a pydantic model of the fields zdebias reads); else one
    :class:`ConfigError` line ``PATH: field 'a.b': what is wrong; not WHAT``.

    >>> from pydantic import BaseModel
    >>> class Pair(BaseModel):
    ...     n: int
    >>> checked({"n": "x"}, Pair, "p.json", what="a pair")
    Traceback (most recent call last):
    zdebias.errors.ConfigError: p.json: field 'n': expected an integer (got 'x'); not a pair
    """
    from pydantic import ValidationError

    try:
        return model.model_validate(doc)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(x) for x in first.get("loc", ()))
        where = f"field '{loc}': " if loc else ""
        kind = first.get("type", "")
        msg = _MESSAGES.get(kind, first.get("msg", "invalid value"))
        if kind in ("literal_error", "value_error") or kind not in _MESSAGES:
            expected = (first.get("ctx") or {}).get("expected")
            msg = f"expected {expected}" if expected else first.get("msg", msg)
            msg = msg.removeprefix("Value error, ")
        got = "" if kind in ("missing", "value_error") else f" (got {_short(first.get('input'))})"
        others = list(dict.fromkeys(".".join(map(str, e["loc"])) for e in err.errors()[1:]))
        others = [f"'{o}'" for o in others if o and o != loc]
        also = f"; also {', '.join(others[:3])}" if others else ""
        also += ", ..." if len(others) > 3 else ""
        raise ConfigError(f"{path}: {where}{msg}{got}{also}; not {what}") from None


#: pydantic's error types, said in zdebias's words
_MESSAGES = {
    "missing": "missing",
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "string_type": "expected a string",
    "list_type": "expected a list",
    "dict_type": "expected an object",
    "model_type": "expected an object",
    "model_attributes_type": "expected an object",
    "bool_type": "expected true or false",
    "too_short": "expected at least one item",
}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _Repeated(Exception):
    """A mapping of a document gives ``key`` twice (at ``lines``, where known)."""

    def __init__(self, key: object, lines: tuple[int, int] = (0, 0)) -> None:
        super().__init__(key)
        self.key, self.lines = key, lines


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) < len(pairs):
        keys = [k for k, _ in pairs]
        raise _Repeated(next(k for k in keys if keys.count(k) > 1))
    return out


def _unique_key_loader() -> type:
    """``yaml.SafeLoader`` refusing a mapping that gives a key twice (PyYAML keeps the last
    value silently); keys merged in with ``<<`` may still be overridden, as YAML says."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise _Repeated(key, (seen[key], line))
                    seen[key] = line
                except TypeError:  # an unhashable key: PyYAML's own error follows
                    continue
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


__all__ = ["checked", "read_document"]
