"""Model references (hub names, local folders, packaged offline models) and tiny test models."""

from zdebias.models.resolve import cache_dir, resolve_model

__all__ = ["cache_dir", "resolve_model"]
