"""zdebias: find, remove, and prove the removal of dataset shortcuts in NLI and text
classification.

>>> import zdebias
>>> out = zdebias.z_filter(df, task="nli")          # doctest: +SKIP
>>> shortcuts = zdebias.find_shortcuts(df)          # doctest: +SKIP
"""

from typing import Any

from zdebias.data.schema import Record

#: the one source of the version: pyproject.toml reads it (``[tool.setuptools.dynamic]``)
__version__ = "0.2.0"
__all__ = [
    "Record",
    "Shortcuts",
    "__version__",
    "aflite_filter",
    "artifact_accuracy",
    "cartography",
    "cartography_filter",
    "confidence_filter",
    "filter",
    "find_shortcuts",
    "shortcut_split",
    "z_filter",
]

#: loaded on first use, so that ``import zdebias`` (and the CLI) stays light
_LAZY = set(__all__) - {"Record", "__version__"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from zdebias import api

        return getattr(api, name)
    raise AttributeError(f"module 'zdebias' has no attribute {name!r}")
