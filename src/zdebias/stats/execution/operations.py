"""The statistics operations on files, as ``zdebias stats``, ``filter`` and ``combine`` and the
recipe stages run them: read the inputs (:mod:`zdebias.stats.execution.source`), decide how to
run, run, and write or publish the outputs; each returns its summary.

- :func:`filter_file`: z-filter one file into ``kept.jsonl``, ``rejected.jsonl`` and
  ``summary.json``, the way :func:`~zdebias.stats.execution.plan.plan_filter` chooses
  (:func:`run_filter`: the same, for a caller that writes into a folder of its own);
- :func:`combine_files`: a dataset recipe of an original and a generated file;
- :func:`measure_file`: the z-statistics report of one file;
- :func:`shortcut_split_file`: a test file split by a training file's shortcuts into
  ``aligned.jsonl``, ``conflicting.jsonl``, ``free.jsonl`` and ``summary.json``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from zdebias.data.options import OutputOptions
from zdebias.errors import ConfigError
from zdebias.stats.execution.plan import Filtered
from zdebias.stats.execution.source import FileInput, HypoOnly, read_source
from zdebias.stats.settings import (
    CombineSettings,
    ShortcutSplitSettings,
    StatsSettings,
    ZFilterSettings,
)

if TYPE_CHECKING:
    from zdebias.data.export import InputSchema
    from zdebias.data.schema import Record
    from zdebias.stats.aflite import Embed
    from zdebias.stats.measure import Measurement
    from zdebias.stats.summaries import FilterSummary, ShortcutSplitSummary


def filter_file(
    source: FileInput,
    out: str | Path,
    settings: ZFilterSettings,
    *,
    seed: FileInput | None = None,
    hypo_only: HypoOnly | None = None,
    embed: Embed | None = None,
    overwrite: bool = False,
    progress: bool = False,
    output: OutputOptions | None = None,
) -> FilterSummary:
    """z-filter ``source`` (GD-NLI Algorithm 1), conditionally on ``seed`` when given, and
    publish the folder ``out`` whole: ``kept.jsonl``, ``rejected.jsonl``, ``summary.json``
    (:func:`~zdebias.data.writers.publish_folder`; an existing ``out`` only with
    ``overwrite``); the summary. ``hypo_only``: applies a trained hypothesis-only model
    (:data:`~zdebias.stats.execution.source.HypoOnly`). ``output``: with ``output_schema``
    ``input``, kept and rejected are written in the input's schema instead (``kept.csv`` for a CSV,
    :mod:`zdebias.data.export`). ``settings.method`` ``aflite`` (a :class:`FilterSettings`):
    AFLite instead, on the embeddings ``embed`` gives (:mod:`zdebias.stats.aflite`)."""
    from zdebias.data.writers import publish_folder

    schema = _input_schema(source, output)
    with run_filter(
        source, settings, seed=seed, hypo_only=hypo_only, embed=embed, progress=progress
    ) as write:
        if schema is None:
            return publish_folder(out, write, overwrite=overwrite)

        def build(work: Path) -> FilterSummary:
            summary = write(work)
            seen = itertools.count()
            n_seed = summary["n_seed"]
            from_input = {"kept": lambda r: next(seen) >= n_seed, "rejected": lambda r: True}
            rewritten = _rewrite(work, summary, schema, summary["read"]["task"], from_input)
            return cast("FilterSummary", rewritten)  # with output_schema and output_files

        return publish_folder(out, build, overwrite=overwrite)


def _input_schema(source: FileInput, output: OutputOptions | None) -> InputSchema | None:
    """The input's schema when ``output`` asks for it (checked before any work), else None."""
    if output is None or output.output_schema != "input":
        return None
    from zdebias.data.export import InputSchema

    return InputSchema(source.path, source.read)


def _rewrite(
    work: Path,
    summary: Mapping[str, Any],
    schema: InputSchema,
    task: str,
    from_input: dict[str, Callable[[Any], bool]],
) -> dict[str, Any]:
    """The record files of ``work`` rewritten in ``schema``, the summary saying so."""
    from zdebias.data.export import rewrite_in_schema
    from zdebias.data.writers import write_json

    names = rewrite_in_schema(work, schema, task, from_input)
    summary = {**summary, "output_schema": "input", "output_files": [*names.values()]}
    write_json(summary, work / "summary.json")
    return summary


@contextlib.contextmanager
def run_filter(
    source: FileInput,
    settings: ZFilterSettings,
    *,
    seed: FileInput | None = None,
    hypo_only: HypoOnly | None = None,
    embed: Embed | None = None,
    progress: bool = False,
) -> Iterator[Callable[..., FilterSummary]]:
    """Read and z-filter ``source`` as :func:`~zdebias.stats.execution.plan.plan_filter` chooses (or
    run AFLite in this process, when ``settings.method`` says so);
    entered once the filter has run, it gives ``write(folder, *, sources=True)``, which
    writes the three files into ``folder`` and returns the summary (``sources``: it names
    the input files and holds their read reports, as ``zdebias filter``'s does). A
    :class:`FilterSettings` with ``method`` ``cartography`` keeps a data-map region instead
    (:mod:`zdebias.stats.cartography_filter`)."""
    seed_data = seed.path if seed is not None else None
    way = _way(source, settings, seed, hypo_only, embed, progress)
    with way as write_outputs:

        def write(folder: Path, *, sources: bool = True) -> FilterSummary:
            from zdebias.data.writers import write_json

            filtered = write_outputs(Path(folder))
            summary: FilterSummary = {**filtered.summary, "stats_of_kept": filtered.stats_of_kept}
            for line in summary["warnings"]:
                source.teller.warn(f"{source.shown}: {line}")
            if sources:
                seed_report = filtered.seed_report
                summary = {
                    "path": source.path,
                    "seed_data": seed_data,
                    **summary,
                    "read": filtered.report.summary(),
                    "read_seed": seed_report.summary() if seed_report is not None else None,
                }
            record = hypo_only_record(source, settings, Path(folder), seeded=seed is not None)
            if record is not None:  # only a filter whose features had the hypo-only model
                summary["hypo_only_model"] = record
            write_json(summary, Path(folder) / "summary.json")
            return summary

        yield write


def hypo_only_record(
    source: FileInput, settings: Any, folder: Path | None = None, *, seeded: bool = False
) -> dict[str, Any] | None:
    """The model behind a z-filter's ``hypo-only-pred`` feature, recorded as a shortcut split
    records its bias model (``summary.json`` ``hypo_only_model``): ``family``
    (``hypo-only-nb``, ``hypo-only-logreg`` or ``trained:DIR``), ``folds``, ``seed`` and
    ``train_digest`` (:func:`~zdebias.stats.shortcut_split.rows_digest` of the input's rows,
    which the cross-fitted model learnt from; a conditional filter's seed rows are not in it).
    ``evaluate`` warns when a classifier trained on the kept rows is graded on a split made
    with the same model. None for another method, single-text rows, or features without
    ``hypo-only``. The digest is taken from ``folder``'s ``kept.jsonl`` and ``rejected.jsonl``
    just written (they partition the input's labelled rows); a conditional filter's
    (``seeded``: its kept rows hold the seed too) reads the input again."""
    from zdebias.features.catalogue import DEFAULT_PAIR_FEATURES

    if getattr(settings, "method", "z") != "z" or not hasattr(settings, "hypo_only_model"):
        return None
    if "hypo-only" not in (settings.features or DEFAULT_PAIR_FEATURES):
        return None
    from zdebias.stats.shortcut_split import rows_digest

    if folder is not None and not seeded:
        records: list[Any] = _written_rows(folder)
    else:
        records, _ = source.read.read(source.path, task=source.task, what=source.what)
    if not records or not records[0].is_pair:
        return None
    model = settings.hypo_only_model
    classifier = settings.hypo_only_classifier or "nb"
    return {
        "family": f"trained:{model}" if model else f"hypo-only-{classifier}",
        "folds": None if model else settings.hypo_only_folds or 5,
        "seed": settings.seed,
        "train_digest": rows_digest(records),
    }


def _written_rows(folder: Path) -> list[Record]:
    """The rows of a filter folder's ``kept.jsonl`` and ``rejected.jsonl`` (zdebias's own
    JSONL, just written), as records with their texts and labels only."""
    import orjson

    from zdebias.data.schema import Record

    rows: list[Record] = []
    for name in ("kept.jsonl", "rejected.jsonl"):
        with open(folder / name, "rb") as fh:
            for line in fh:
                if line.strip():
                    d = orjson.loads(line)
                    rows.append(
                        Record(
                            "",
                            d["label"],
                            d.get("premise"),
                            d.get("hypothesis"),
                            d.get("text"),
                        )
                    )
    return rows


def _way(
    source: FileInput,
    settings: ZFilterSettings,
    seed: FileInput | None,
    hypo_only: HypoOnly | None,
    embed: Embed | None,
    progress: bool,
) -> contextlib.AbstractContextManager[Callable[[Path], Filtered]]:
    """The filter of ``source``, run the way its method (:mod:`zdebias.stats.methods`)
    chooses; settings it cannot honour are refused first."""
    from zdebias.stats.methods import DEFAULT_METHOD, FileJob, filter_method

    name = getattr(settings, "method", DEFAULT_METHOD)
    method = filter_method(name)
    honoured = method.settings.model_fields
    if getattr(settings, "dynamics", None) and "dynamics" not in honoured:
        raise ConfigError("--dynamics is for --method cartography")
    if not method.uses_features and settings.keep_features:  # it would do nothing
        raise ConfigError(f"--keep-features is for z-filtering; --method {name} uses no features")
    if not method.takes_seed and seed is not None:
        raise ConfigError(f"--seed-data (seed_data) is for z-filtering; --method {name} takes none")
    job = FileJob(source, settings, seed=seed, hypo_only=hypo_only, embed=embed, progress=progress)
    return method.open(job)


def combine_files(
    original: FileInput,
    generated: FileInput,
    out: str | Path,
    settings: CombineSettings,
    *,
    hypo_only: HypoOnly | None = None,
    overwrite: bool = False,
    progress: bool = False,
    output: OutputOptions | None = None,
) -> dict[str, Any]:
    """The dataset recipe ``settings.recipe`` of ``original`` and ``generated`` (read with
    the original's label set unless its own is given), published as the folder ``out``:
    ``combined.jsonl``, ``rejected.jsonl``, ``summary.json``; the summary. ``output``: with
    ``output_schema`` ``input``, combined and rejected are written in the original input's
    schema instead (generated records mapped into its columns)."""
    from zdebias.data.writers import publish_folder, write_files
    from zdebias.features.parallel import resolve_num_proc
    from zdebias.stats.recipes import combine

    schema = _input_schema(original, output)

    orig, orig_report = read_source(original, settings, hypo_only=hypo_only, progress=progress)
    if generated.task is None:
        generated = dataclasses.replace(generated, task=orig_report.task)
    gen, gen_report = read_source(generated, settings, hypo_only=hypo_only, progress=progress)
    result = combine(
        settings.recipe,
        orig,
        gen,
        ZFilterSettings.take(settings),
        labels=orig_report.labels,
        progress=progress,
    )
    for line in result.summary.get("warnings", []):  # keep_features that match nothing
        original.teller.warn(line)
    if result.summary["n_ids_renamed"]:
        original.teller.warn(
            f"{original.path} and {generated.path} repeat ids: "
            f"{result.summary['n_ids_renamed']} "
            f"record{'' if result.summary['n_ids_renamed'] == 1 else 's'} renamed "
            "ID@original / ID@generated "
            "(their own id in meta.input_id)"
        )
    summary = {
        **result.summary,
        "original": original.path,
        "generated": generated.path,
        "read_original": orig_report.summary(),
        "read_generated": gen_report.summary(),
    }
    files = {"combined.jsonl": result.records, "rejected.jsonl": result.rejected}
    num_proc = resolve_num_proc(settings.num_proc, len(result.records))

    def build(work: Path) -> dict[str, Any]:
        write_files(work, {**files, "summary.json": summary}, num_proc=num_proc)
        if schema is None:
            return summary
        original_one: Callable[[Any], bool] = lambda r: r.meta.get("type") == "original"  # noqa: E731
        from_input = {"combined": original_one, "rejected": original_one}
        return _rewrite(work, summary, schema, orig_report.task, from_input)

    return publish_folder(out, build, overwrite=overwrite)


def measure_file(
    source: FileInput,
    settings: StatsSettings,
    *,
    hypo_only: HypoOnly | None = None,
    progress: bool = False,
) -> tuple[Measurement, dict[str, Any]]:
    """The z-statistics of ``source`` (:func:`~zdebias.stats.measure.measure`) and the report
    ``zdebias stats`` gives: the measurement's, with the input's path, the features used and
    what the reader skipped."""
    from zdebias.stats.measure import measure

    records, read_report = read_source(source, settings, hypo_only=hypo_only, progress=progress)
    m = measure(records, settings, labels=read_report.labels, progress=progress)
    report = {
        "path": source.path,
        **m.report,
        "features": settings.features or "default",
        "read": read_report.summary(),
    }
    return m, report


def shortcut_split_file(
    train: FileInput,
    test: FileInput,
    out: str | Path,
    settings: ShortcutSplitSettings,
    *,
    hypo_only: HypoOnly | None = None,
    overwrite: bool = False,
    progress: bool = False,
    compare_with: str | Path | None = None,
) -> ShortcutSplitSummary:
    """Split ``test`` (read with the training set's label set unless its own is given) by
    the shortcuts of ``train`` (:mod:`zdebias.stats.shortcut_split`) and publish the folder
    ``out``: ``aligned.jsonl``, ``conflicting.jsonl``, ``free.jsonl``, ``summary.json``; the
    summary. ``hypo_only``: applies a trained hypothesis-only model
    (:data:`~zdebias.stats.execution.source.HypoOnly`) to both files. ``compare_with``: another
    split's folder of the same test set; the summary's ``agreement`` says how far the two agree."""
    from zdebias.data.writers import publish_folder, write_files
    from zdebias.stats.shortcut_split import split_records

    model = settings.with_hypo_only()  # the hypothesis-only model predicts for --by
    train_records, train_report = read_source(train, model, hypo_only=hypo_only, progress=progress)
    if test.task is None:
        test = dataclasses.replace(test, task=train_report.task)
    test_records, test_report = read_source(test, model, hypo_only=hypo_only, progress=progress)
    labels = train_report.labels
    assert labels is not None  # read_source refuses a training set without labelled records
    split = split_records(train_records, test_records, settings, labels=labels, progress=progress)
    summary: ShortcutSplitSummary = {
        "train": train.path,
        "test": test.path,
        **split.summary,
        "read_train": train_report.summary(),
        "read_test": test_report.summary(),
    }
    if compare_with is not None:
        from zdebias.stats.shortcut_votes import compare_with as compared

        summary["agreement"] = compared(split.rows, split.codes, compare_with)
    if test_report.n_unlabelled or test_report.n_errors:
        summary["warnings"].append(
            f"{test.path}: {test_report.n_unlabelled} unlabelled and {test_report.n_errors} "
            "bad rows are in no slice (counted in read_test)"
        )
    for line in summary["warnings"]:
        test.teller.warn(line)
    files = {f"{name}.jsonl": records for name, records in split.parts().items()}

    def build(work: Path) -> ShortcutSplitSummary:
        write_files(work, {**files, "summary.json": summary}, num_proc=1)
        return summary

    return publish_folder(out, build, overwrite=overwrite)


__all__ = ["combine_files", "filter_file", "measure_file", "run_filter", "shortcut_split_file"]
