"""Dataset recipes that combine original and generated data (docs/design.md §5; GD-NLI §4.2).

- **Z-Aug** ``Z(D_G | D0)``: keep the original data whole and add the generated examples that
  pass conditional z-filtering seeded with it.
- **Par-Z** ``Z(D0) ∪ Z(D_G)``: z-filter each separately and merge.
- **Seq-Z** ``Z(D_G | Z(D0))``: z-filter the original data, then use the result as the seed for
  the generated data.

Every record of every output is a copy tagged ``meta["type"]`` = ``original`` | ``generated``,
its id unique in the output (:class:`UniqueIds`: a repeated id gets ``@original`` /
``@generated``).
Nothing is lost: ``records`` (the combined dataset) and ``rejected`` (with
``meta["rejected_by"]``) together hold each input record exactly once.

Features are extracted once over original + generated data, so every stage sees the same
feature columns; the default hypothesis-only feature is trained (cross-fitted) on the original
data only and predicts the generated data, as in the paper.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zdebias.data.labels import infer_task
from zdebias.data.process import gc_paused
from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.stats.keep import kept_features, mark_kept
from zdebias.stats.settings import RECIPE_NAMES, SCALED_RULE, ZFilterSettings
from zdebias.stats.zfilter import (
    SUMMARY_TOP,
    FilterArrays,
    filter_options,
    rejected_records,
    summary_settings,
    z_filter_matrix,
)
from zdebias.stats.zstats import label_counts, label_ids, prior_p0, top_table, z_from_counts


@dataclass
class RecipeResult:
    """``records``: the combined dataset (original part first, then generated, each in input
    order). ``rejected``: everything left out, with ``meta["rejected_by"]``. ``summary``:
    sizes per part and the top z per label of each input and of the output."""

    records: list[Record]
    rejected: list[Record]
    summary: dict[str, Any]


class UniqueIds:
    """Ids made unique over the inputs of a recipe, by source: the first record with an id
    keeps it, a later one with the same id (say two inputs both named ``kept.jsonl``) becomes
    ``ID@original`` or ``ID@generated``, then ``ID@generated-2``, ... (never an id some
    record already has), its own id kept in ``meta["input_id"]``. Deterministic: the order
    of the records decides."""

    def __init__(self, *inputs: Sequence[Record]) -> None:
        counts: Counter[str] = Counter()
        for records in inputs:
            counts.update(r.id for r in records)
        self.repeated = {i for i, n in counts.items() if n > 1}
        self.taken = set(counts)
        self.seen: set[str] = set()
        #: records whose id was changed
        self.n_renamed = 0

    def __call__(self, rid: str, kind: str) -> str:
        """The id a record of ``kind`` with id ``rid`` gets."""
        if rid not in self.repeated or rid not in self.seen:
            self.seen.add(rid)
            return rid
        new, n = f"{rid}@{kind}", 1
        while new in self.taken:
            n += 1
            new = f"{rid}@{kind}-{n}"
        self.taken.add(new)
        self.n_renamed += 1
        return new


def _tagged(records: Sequence[Record], kind: str, ids: UniqueIds) -> list[Record]:
    out = []
    with gc_paused():
        for r in records:
            meta = dict(r.meta)
            meta["type"] = kind
            rid = ids(r.id, kind)
            if rid != r.id:
                meta["input_id"] = r.id
            out.append(Record(rid, r.label, r.premise, r.hypothesis, r.text, meta))
    return out


class _Combined:
    """Original + generated records with one feature matrix and the filter settings."""

    def __init__(
        self,
        original: Sequence[Record],
        generated: Sequence[Record],
        settings: ZFilterSettings,
        *,
        labels: Sequence[str] | None,
        progress: bool,
    ) -> None:
        from zdebias.features.extract import extract_features

        self.settings = settings
        self.progress = progress
        ids = UniqueIds(original, generated)
        self.original = _tagged(original, "original", ids)
        self.generated = _tagged(generated, "generated", ids)
        self.n_ids_renamed = ids.n_renamed
        self.records = self.original + self.generated
        self.labels = tuple(labels) if labels is not None else infer_task(self.records).labels
        self.y = label_ids(self.records, self.labels)
        n_orig = len(self.original)
        self.orig_rows = np.arange(n_orig)
        self.gen_rows = np.arange(n_orig, len(self.records))
        kwargs = settings.feature_kwargs()
        if n_orig:
            kwargs.setdefault("hypo_only_fit", self.orig_rows)
        self.features = settings.features
        self.fm = extract_features(
            self.records, self.features, labels=self.labels, progress=progress, **kwargs
        )
        self.options = filter_options(settings, self.fm.names)

    def filter(self, rows: np.ndarray, seed_rows: np.ndarray | None = None) -> FilterArrays:
        return z_filter_matrix(
            self.fm.matrix,
            self.y,
            len(self.labels),
            rows=rows,
            seed_rows=seed_rows,
            progress=self.progress,
            **self.options,
        )

    def _top(self, rows: np.ndarray) -> dict[str, list[dict[str, Any]]]:
        counts = label_counts(self.fm.matrix[rows], self.y[rows], len(self.labels))
        totals = np.bincount(self.y[rows], minlength=len(self.labels))
        z, n, p = z_from_counts(counts, prior_p0(totals, self.settings.label_prior))
        return top_table(self.fm.names, self.labels, z, n, p, SUMMARY_TOP)

    def result(
        self, recipe: str, kept_rows: np.ndarray, stages: list[tuple[str, FilterArrays, int]]
    ) -> RecipeResult:
        kept_rows = np.sort(kept_rows)
        rejected: list[Record] = []
        with gc_paused():
            records = [self.records[i] for i in kept_rows.tolist()]
            for _, arrays, _ in stages:
                rejected.extend(rejected_records(self.records, arrays, self.fm.names))
        n_orig = len(self.original)
        is_orig = kept_rows < n_orig
        top_out = self._top(kept_rows)

        def first(table: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
            return {name: (rows[0] if rows else None) for name, rows in table.items()}

        summary = {
            "recipe": recipe,
            "n_original": n_orig,
            "n_generated": len(self.generated),
            "n_output": len(records),
            "n_output_original": int(is_orig.sum()),
            "n_output_generated": int((~is_orig).sum()),
            "n_rejected": len(rejected),
            "n_rejected_original": sum(1 for r in rejected if r.meta["type"] == "original"),
            "n_rejected_generated": sum(1 for r in rejected if r.meta["type"] == "generated"),
            "n_ids_renamed": self.n_ids_renamed,
            "labels": list(self.labels),
            "label_counts_output": {
                name: int((self.y[kept_rows] == i).sum()) for i, name in enumerate(self.labels)
            },
            **summary_settings(self.settings),
            "label_prior": self.settings.label_prior or "uniform",
            "zfilter_batch_size_rule": (
                SCALED_RULE if self.settings.zfilter_batch_size is None else "given"
            ),
            "stages": [
                {
                    "stage": name,
                    "n_seed": n_seed,
                    "n_input": len(a.accepted) + len(a.rejected),
                    "n_accepted": len(a.accepted),
                    "n_rejected": len(a.rejected),
                    "zfilter_batch_size": a.batch_size,
                    "n_batches": a.n_batches,
                }
                for name, a, n_seed in stages
            ],
            "top_z_original": first(self._top(self.orig_rows)) if n_orig else None,
            "top_z_generated": first(self._top(self.gen_rows)) if len(self.gen_rows) else None,
            "top_z_output": first(top_out),
            "top_output": top_out,
        }
        kept = kept_features(self.fm.names, self.settings.keep_features)
        if kept is not None:  # the features that are the task: never filtered, marked
            mark_kept(kept, top_out)
            summary["kept_features"] = kept.block()
            summary["warnings"] = kept.warnings()
        return RecipeResult(records=records, rejected=rejected, summary=summary)


def _z_aug(c: _Combined) -> RecipeResult:
    gen = c.filter(c.gen_rows, seed_rows=c.orig_rows)
    kept = np.concatenate([c.orig_rows, gen.accepted])
    return c.result("z-aug", kept, [("Z(generated | original)", gen, len(c.orig_rows))])


def _par_z(c: _Combined) -> RecipeResult:
    orig = c.filter(c.orig_rows)
    gen = c.filter(c.gen_rows)
    kept = np.concatenate([orig.accepted, gen.accepted])
    return c.result("par-z", kept, [("Z(original)", orig, 0), ("Z(generated)", gen, 0)])


def _seq_z(c: _Combined) -> RecipeResult:
    orig = c.filter(c.orig_rows)
    gen = c.filter(c.gen_rows, seed_rows=orig.accepted)
    kept = np.concatenate([orig.accepted, gen.accepted])
    return c.result(
        "seq-z",
        kept,
        [("Z(original)", orig, 0), ("Z(generated | Z(original))", gen, len(orig.accepted))],
    )


RECIPES: dict[str, Callable[[_Combined], RecipeResult]] = {
    "z-aug": _z_aug,
    "par-z": _par_z,
    "seq-z": _seq_z,
}


def combine(
    recipe_name: str,
    original: Sequence[Record],
    generated: Sequence[Record],
    settings: ZFilterSettings | None = None,
    *,
    labels: Sequence[str] | None = None,
    progress: bool = False,
    **overrides: Any,
) -> RecipeResult:
    """Run the recipe of that name (``z-aug``, ``par-z``, ``seq-z``; case and ``_`` ignored).

    ``settings`` / ``overrides``: the z-filter settings, as for
    :func:`~zdebias.stats.zfilter.z_filter`.
    """
    key = recipe_name.lower().replace("_", "-")
    if key not in RECIPES:
        raise ConfigError(
            f"unknown recipe {recipe_name!r}; expected one of {', '.join(RECIPE_NAMES)}"
        )
    cfg = ZFilterSettings.of(settings, **overrides)
    return RECIPES[key](_Combined(original, generated, cfg, labels=labels, progress=progress))


def z_aug(
    original: Sequence[Record], generated: Sequence[Record], *a: Any, **kw: Any
) -> RecipeResult:
    """Z-Aug: all of D0, plus the generated records accepted by Z(D_G | D0)."""
    return combine("z-aug", original, generated, *a, **kw)


def par_z(
    original: Sequence[Record], generated: Sequence[Record], *a: Any, **kw: Any
) -> RecipeResult:
    """Par-Z: Z(D0) ∪ Z(D_G), each z-filtered on its own."""
    return combine("par-z", original, generated, *a, **kw)


def seq_z(
    original: Sequence[Record], generated: Sequence[Record], *a: Any, **kw: Any
) -> RecipeResult:
    """Seq-Z: Z(D_G | Z(D0)): filter D0, then filter D_G seeded with what D0 kept."""
    return combine("seq-z", original, generated, *a, **kw)
