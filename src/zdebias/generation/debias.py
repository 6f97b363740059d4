"""Debias a generator on raw data (``zdebias debias-generator``): z-filter, then train.

The recipe spells the same run as two stages (a filter stage, then ``debias-generator`` on
its kept and rejected outputs); :func:`zfilter_and_debias` is that composition in one call,
with the z-filter's settings and the debiasing settings side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zdebias.data.schema import Record
from zdebias.generation.settings import DebiasSettings
from zdebias.generation.trainer import debias_generator, zfilter_info
from zdebias.stats.settings import ZFilterSettings


def zfilter_and_debias(
    generator: str | Path,
    records: Sequence[Record],
    out_dir: str | Path,
    settings: DebiasSettings | None = None,
    zfilter: ZFilterSettings | None = None,
    *,
    progress: bool = True,
) -> dict[str, Any]:
    """z-filter ``records`` (``settings.subset`` of them, drawn seeded; with the predictions
    of ``zfilter.hypo_only_model`` when it is set), then fine-tune ``generator`` on the kept
    (Z) and rejected (Z⁻) records with :func:`~zdebias.generation.trainer.debias_generator`.
    Returns its summary; ``z_filter`` says what the filter did.

    >>> zfilter = ZFilterSettings(biased_k=20)
    >>> zfilter_and_debias("runs/gen", train, "runs/g*", zfilter=zfilter)  # doctest: +SKIP
    """
    from zdebias.classify.hypo_only import apply_hypo_only_model
    from zdebias.stats.zfilter import z_filter

    cfg = DebiasSettings.of(settings)
    zcfg = zfilter if zfilter is not None else ZFilterSettings()
    picked = apply_hypo_only_model(cfg.pick(records), zcfg, None, progress=progress)
    result = z_filter(picked, zcfg, progress=progress)
    return debias_generator(
        generator,
        result.kept,
        result.rejected,
        out_dir,
        cfg,
        progress=progress,
        extra_info={"z_filter": zfilter_info(result)},
    )


__all__ = ["zfilter_and_debias"]
