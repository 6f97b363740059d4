"""Progress bars on stderr, so stdout stays clean for JSON summaries."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """``rich.progress.track`` drawn on stderr."""
    from rich.console import Console
    from rich.progress import track as rich_track

    yield from rich_track(
        items, description=description, total=total, console=Console(stderr=True), transient=True
    )
