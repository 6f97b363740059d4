"""Small JSON or YAML documents (configs, saved results), read with one clear error line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zdebias.errors import ConfigError


def read_document(path: str | Path, *, missing: str) -> Any:
    """A JSON or YAML file (by its suffix), parsed; else one :class:`ConfigError` line:
    ``missing`` when there is no such file, the parser's complaint when it is not valid."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(missing)
    text = path.read_text(encoding="utf-8")
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


__all__ = ["read_document"]
