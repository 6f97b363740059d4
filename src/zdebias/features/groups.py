"""Running one feature group: its function called on the records, its output checked.

A batch group gets the :class:`~zdebias.features.context.FeatureContext`; a per-record (user)
group is called once per record and its names numbered by first appearance. What both the
one-process extraction (:mod:`zdebias.features.extract`) and the chunk workers
(:mod:`zdebias.features.parallel`) run for each group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.features.context import FeatureContext
from zdebias.features.keys import FeatureKey
from zdebias.features.matrix import build_csr
from zdebias.features.registry import FeatureSpec

if TYPE_CHECKING:
    import scipy.sparse as sp


def _record_feature(
    spec: FeatureSpec, records: Sequence[Record], settings: dict[str, Any]
) -> tuple[sp.csr_matrix, list[str]]:
    """Run a per-record feature function over all records."""
    if spec.settings is None:
        kwargs = dict(settings)
    else:
        kwargs = {k: v for k, v in settings.items() if k in spec.settings}
    names: dict[str, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for i, record in enumerate(records):
        out = spec.fn(record, **kwargs)
        if out is None:
            continue
        if isinstance(out, str):
            raise ConfigError(
                f"feature {spec.name!r} returned a string; it must return an iterable of names"
            )
        for fname in out:
            j = names.setdefault(str(fname), len(names))
            rows.append(i)
            cols.append(j)
    m = build_csr(
        np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64), len(records), len(names)
    )
    return m, list(names)


def run_group(
    spec: FeatureSpec,
    ctx: FeatureContext,
    records: Sequence[Record],
    settings: dict[str, Any],
    pair: bool,
) -> tuple[list[sp.csr_matrix], list[str], list[FeatureKey]]:
    """Run one feature group; its blocks (CSR), column names and keys, checked.

    A group without keys (a user feature) gets ``custom`` keys derived from its names.
    """
    if spec.pair_only and not pair:
        raise ConfigError(
            f"feature {spec.name!r} needs premise/hypothesis pairs; these records are single-text"
        )
    out: tuple[Any, ...] = spec.fn(ctx) if spec.batch else _record_feature(spec, records, settings)
    m, fnames = out[0], list(out[1])
    if len(out) > 2:
        keys = list(out[2])
    else:
        keys = [FeatureKey.from_name(name, kind="custom") for name in fnames]
    parts = m if isinstance(m, list) else [m]  # a group may return several blocks
    n_cols = sum(p.shape[1] for p in parts)
    if any(p.shape[0] != len(records) for p in parts) or n_cols != len(fnames):
        raise ConfigError(
            f"feature {spec.name!r} returned {[p.shape for p in parts]} matrices for "
            f"{len(records)} records and {len(fnames)} names"
        )
    if len(keys) != len(fnames) or any(k.name != n for k, n in zip(keys, fnames, strict=True)):
        raise ConfigError(f"feature {spec.name!r} returned keys that do not match its names")
    return [p.tocsr() for p in parts], fnames, keys
