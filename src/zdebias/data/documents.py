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
            return yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: not valid YAML: {err}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON ({err.msg})") from None


__all__ = ["read_document"]
