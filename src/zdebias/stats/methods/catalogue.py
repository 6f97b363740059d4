"""The filter methods' names: the built-ins by dotted path, one line each, and the ones
registered at run time (:func:`zdebias.stats.methods.register_filter_method`). Nothing is
imported here, so that the settings can list the names and ``zdebias filter`` starts fast."""

from __future__ import annotations

from typing import Any

#: The built-in methods, name → ``module:Class``; the first is the default. One line each.
CATALOGUE: dict[str, str] = {
    "z": "zdebias.stats.methods.z:ZFilter",
    "cartography": "zdebias.stats.methods.cartography:Cartography",
    "aflite": "zdebias.stats.methods.aflite:Aflite",
}
#: The default method (z-filtering, GD-NLI Algorithm 1).
DEFAULT_METHOD = next(iter(CATALOGUE))
#: The methods found so far (built-in, registered, or at a dotted path), by name.
REGISTRY: dict[str, Any] = {}


def method_names() -> tuple[str, ...]:
    """The built-in and registered methods' names, the default first."""
    return tuple(dict.fromkeys([*CATALOGUE, *REGISTRY]))


def unknown_method(name: str) -> str | None:
    """Why ``name`` names no method (None: a known name, or a dotted path to try)."""
    if name in CATALOGUE or name in REGISTRY or "." in name or ":" in name:
        return None
    return (
        f"unknown filter method {name!r}; expected one of {', '.join(method_names())}, "
        "or a dotted path pkg.module:Method"
    )


__all__ = ["CATALOGUE", "DEFAULT_METHOD", "REGISTRY", "method_names", "unknown_method"]
