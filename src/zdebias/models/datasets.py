"""Encoded examples held in a list, as the torch ``Dataset`` the HF trainers (classifier,
generator) read: item ``i`` is the ``i``-th example's dict, padded later by a collator.

This module imports torch: import it lazily (never from ``zdebias.cli``).
"""

from __future__ import annotations

from typing import Any

import torch


class ListDataset(torch.utils.data.Dataset):
    """A list of encoded examples (one dict each) as a map-style torch dataset."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.rows[i]
