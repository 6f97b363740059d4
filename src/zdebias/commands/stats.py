"""``zdebias stats``, ``zdebias filter``, ``zdebias combine``: measure and remove shortcuts.

Only typer, rich and the standard library load at start-up; numpy, scipy, scikit-learn and the
plotting libraries are imported inside the commands.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from zdebias.commands._common import (
    ColumnsOpt,
    FormatOpt,
    LabelMapOpt,
    OnErrorOpt,
    SplitOpt,
    TaskOpt,
    open_input,
    report_skips,
)

FeaturesOpt = Annotated[
    str | None,
    typer.Option(
        "--features",
        help="Comma-separated feature groups (ngrams, unigrams, bigrams, "
        "hypo-len, len-ratio, lex-overlap, hypo-only, null) or pkg.module:function paths. "
        "Default: all (n-grams, length and null for single-text data).",
    ),
]
TopKOpt = Annotated[int, typer.Option("--top-k", help="Biased features per label (k).", min=0)]
HypoModelOpt = Annotated[
    str | None,
    typer.Option(
        "--hypo-only-model",
        help="Trained hypothesis-only classifier folder for the "
        "hypo-only feature (default: a cross-fitted linear model on hypothesis n-grams).",
    ),
]
HypoClfOpt = Annotated[
    str | None,
    typer.Option("--hypo-only-classifier", help="Default hypo-only model: nb (fast) or logreg."),
]
BatchOpt = Annotated[
    int, typer.Option("--batch-size", help="Examples per z-filtering batch.", min=1)
]
ShuffleSeedOpt = Annotated[
    int, typer.Option("--shuffle-seed", help="Seed of the order examples are visited in.")
]
NoShuffleOpt = Annotated[
    bool, typer.Option("--no-shuffle", help="Visit examples in file order (overrides the seed).")
]
MinZOpt = Annotated[
    float, typer.Option("--min-z", help="A feature is biased only if its z exceeds this.")
]


def _feature_settings(
    hypo_only_model: str | None, hypo_only_classifier: str | None
) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    if hypo_only_model:
        settings["hypo_only_model"] = hypo_only_model
    if hypo_only_classifier:
        settings["hypo_only_classifier"] = hypo_only_classifier
    return settings


def _features(text: str | None) -> list[str] | None:
    """Parse and check ``--features`` before any data is read (fail fast on a typo)."""
    from zdebias.features.registry import get_feature, parse_feature_list

    names = parse_feature_list(text)
    for name in names or []:
        get_feature(name)
    return names


def _read(ds: Any) -> tuple[list[Any], tuple[str, ...] | None]:
    """All records of a dataset, with the task's label set (None if unknown)."""
    from zdebias.data.labels import get_task
    from zdebias.stats.zfilter import gc_paused

    with gc_paused():
        records = list(ds)
    report_skips(ds)
    task = ds.report.task
    return records, (get_task(task).labels if task and task != "?" else None)


def _print_tables(report: dict[str, Any], top: int) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"examples: {report['n_examples']:,}   features: {report['n_features']:,}   "
        f"z_critical (α={report['alpha']}, Bonferroni): {report['z_critical']:.2f}   "
        f"significant features: {report['n_significant']:,}"
    )
    for label, rows in report["top"].items():
        table = Table("feature", "z", "n", "p̂", title=f"{label} (top {top})", title_justify="left")
        for row in rows:
            table.add_row(row["feature"], f"{row['z']:.1f}", f"{row['n']:,}", f"{row['p']:.3f}")
        console.print(table)


def stats(
    path: Annotated[str, typer.Argument(help="Dataset file (any supported format).")],
    features: FeaturesOpt = None,
    top_k: TopKOpt = 20,
    json_out: Annotated[
        str | None, typer.Option("--json", help="Write the report as JSON here ('-': stdout).")
    ] = None,
    plot: Annotated[
        str | None,
        typer.Option("--plot", help="Write the Gardner plot as OUT.png and OUT.html."),
    ] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level.")] = 0.01,
    min_n: Annotated[int, typer.Option("--min-n", help="Plot features seen more often.")] = 20,
    hypo_only_model: HypoModelOpt = None,
    hypo_only_classifier: HypoClfOpt = None,
    format: FormatOpt = None,
    task: TaskOpt = None,
    columns: ColumnsOpt = None,
    label_map: LabelMapOpt = None,
    split: SplitOpt = None,
    on_error: OnErrorOpt = "raise",
) -> None:
    """z-statistics of every feature and label; the top features per label (GD-NLI Table 12)."""
    from zdebias.data.writers import write_json
    from zdebias.features.registry import extract_features
    from zdebias.stats.zstats import describe, label_ids, z_statistics

    names = _features(features)
    ds = open_input(
        path,
        format=format,
        task=task,
        columns=columns,
        label_map=label_map,
        split=split,
        on_error=on_error,
    )
    records, labels = _read(ds)
    if not records:
        from zdebias.errors import DataError

        raise DataError("no labelled records to measure", path=path)
    settings = _feature_settings(hypo_only_model, hypo_only_classifier)
    if labels is None:
        from zdebias.stats.zstats import infer_labels

        labels = infer_labels(records)
    fm = extract_features(records, names, labels=labels, progress=True, **settings)
    report = describe(records, labels=labels, top=top_k, alpha=alpha, feature_matrix=fm)
    report = {"path": path, **report, "features": names or "default", "read": ds.report.summary()}
    if plot:
        from zdebias.report.plots import gardner_plot, plot_paths

        png, html = plot_paths(plot)
        z, n, p = z_statistics(fm.matrix, label_ids(records, labels), len(labels))
        report["plot"] = gardner_plot(
            fm.names,
            labels,
            z,
            n,
            p,
            z_c=report["z_critical"],
            png=png,
            html=html,
            min_n=min_n,
            title=Path(path).name,
        )
    if json_out == "-":
        from zdebias.commands._common import echo_json

        echo_json(report)
        return
    if json_out:
        write_json(report, json_out)
    _print_tables(report, top_k)
    if plot:
        p = report["plot"]
        sys.stdout.write(
            f"Gardner plot: {p['png']}, {p['html']} ({p['n_above_curve']:,} of "
            f"{p['n_points']:,} plotted features above the curve)\n"
        )


def _shuffle(shuffle_seed: int, no_shuffle: bool) -> int | None:
    return None if no_shuffle else shuffle_seed


def _print_filter_summary(summary: dict[str, Any], out: Path) -> None:
    lines = [
        f"input {summary['n_input']:,}"
        + (f" + seed {summary['n_seed']:,}" if summary["n_seed"] else "")
        + f": kept {summary['n_kept']:,}, rejected {summary['n_rejected']:,} "
        f"({summary['n_batches']} batches of {summary['batch_size']})",
    ]
    for label in summary["labels"]:
        before = summary["top_z_before"].get(label)
        after = summary["top_z_after"].get(label)
        fmt = lambda r: f"{r['feature']} z={r['z']:.1f}" if r else "-"  # noqa: E731
        lines.append(f"  {label}: top z {fmt(before)}  →  {fmt(after)}")
    lines.append(f"wrote {out / 'kept.jsonl'}, {out / 'rejected.jsonl'}, {out / 'summary.json'}")
    sys.stdout.write("\n".join(lines) + "\n")


def filter_command(
    path: Annotated[str, typer.Argument(help="Dataset to z-filter.")],
    out: Annotated[Path, typer.Option("--out", help="Output folder.")],
    seed_data: Annotated[
        str | None,
        typer.Option("--seed-data", help="Seed dataset: conditional z-filtering Z(D | seed)."),
    ] = None,
    top_k: TopKOpt = 20,
    batch_size: BatchOpt = 1000,
    shuffle_seed: ShuffleSeedOpt = 0,
    no_shuffle: NoShuffleOpt = False,
    features: FeaturesOpt = None,
    min_z: MinZOpt = 0.0,
    hypo_only_model: HypoModelOpt = None,
    hypo_only_classifier: HypoClfOpt = None,
    format: FormatOpt = None,
    task: TaskOpt = None,
    columns: ColumnsOpt = None,
    label_map: LabelMapOpt = None,
    split: SplitOpt = None,
    on_error: OnErrorOpt = "raise",
) -> None:
    """z-filter a dataset (GD-NLI Algorithm 1): DIR/kept.jsonl, rejected.jsonl, summary.json."""
    from zdebias.data.writers import write_json, write_jsonl
    from zdebias.stats.zfilter import z_filter

    names = _features(features)
    ds = open_input(
        path,
        format=format,
        task=task,
        columns=columns,
        label_map=label_map,
        split=split,
        on_error=on_error,
    )
    records, labels = _read(ds)
    seed_records: list[Any] = []
    seed_report = None
    if seed_data:
        seed_ds = open_input(seed_data, format=None, task=task or ds.report.task, on_error=on_error)
        seed_records, _ = _read(seed_ds)
        seed_report = seed_ds.report.summary()
    result = z_filter(
        records,
        seed_records=seed_records,
        top_k=top_k,
        batch_size=batch_size,
        shuffle_seed=_shuffle(shuffle_seed, no_shuffle),
        features=names,
        labels=labels,
        min_z=min_z,
        progress=True,
        **_feature_settings(hypo_only_model, hypo_only_classifier),
    )
    summary = {
        "path": path,
        "seed_data": seed_data,
        **result.summary,
        "read": ds.report.summary(),
        "read_seed": seed_report,
    }
    write_jsonl(result.kept, out / "kept.jsonl")
    write_jsonl(result.rejected, out / "rejected.jsonl")
    write_json(summary, out / "summary.json")
    _print_filter_summary(summary, out)


def combine_command(
    recipe: Annotated[str, typer.Option("--recipe", help="z-aug, par-z or seq-z.")],
    original: Annotated[str, typer.Option("--original", help="Original dataset D0.")],
    generated: Annotated[str, typer.Option("--generated", help="Generated dataset D_G.")],
    out: Annotated[Path, typer.Option("--out", help="Output folder.")],
    top_k: TopKOpt = 20,
    batch_size: BatchOpt = 1000,
    shuffle_seed: ShuffleSeedOpt = 0,
    no_shuffle: NoShuffleOpt = False,
    features: FeaturesOpt = None,
    min_z: MinZOpt = 0.0,
    hypo_only_model: HypoModelOpt = None,
    hypo_only_classifier: HypoClfOpt = None,
    task: TaskOpt = None,
    on_error: OnErrorOpt = "raise",
) -> None:
    """Build a debiased dataset from original + generated data: DIR/combined.jsonl,
    rejected.jsonl, summary.json (every record tagged meta.type = original | generated)."""
    from zdebias.data.writers import write_json, write_jsonl
    from zdebias.stats.recipes import RECIPE_NAMES, combine

    if recipe.lower().replace("_", "-") not in RECIPE_NAMES:
        from zdebias.errors import ConfigError

        raise ConfigError(f"unknown recipe {recipe!r}; expected one of {', '.join(RECIPE_NAMES)}")
    names = _features(features)
    orig_ds = open_input(original, task=task, on_error=on_error)
    orig, labels = _read(orig_ds)
    gen_ds = open_input(generated, task=task or orig_ds.report.task, on_error=on_error)
    gen, _ = _read(gen_ds)
    result = combine(
        recipe,
        orig,
        gen,
        top_k=top_k,
        batch_size=batch_size,
        shuffle_seed=_shuffle(shuffle_seed, no_shuffle),
        features=names,
        labels=labels,
        min_z=min_z,
        progress=True,
        **_feature_settings(hypo_only_model, hypo_only_classifier),
    )
    summary = {
        **result.summary,
        "original": original,
        "generated": generated,
        "read_original": orig_ds.report.summary(),
        "read_generated": gen_ds.report.summary(),
    }
    write_jsonl(result.records, out / "combined.jsonl")
    write_jsonl(result.rejected, out / "rejected.jsonl")
    write_json(summary, out / "summary.json")
    s = summary
    sys.stdout.write(
        f"{s['recipe']}: original {s['n_original']:,} → {s['n_output_original']:,}, generated "
        f"{s['n_generated']:,} → {s['n_output_generated']:,}; output {s['n_output']:,}, "
        f"rejected {s['n_rejected']:,}\n"
    )
    for label, row in s["top_z_output"].items():
        if row:
            sys.stdout.write(f"  {label}: top z {row['feature']} z={row['z']:.1f}\n")
    sys.stdout.write(
        f"wrote {out / 'combined.jsonl'}, {out / 'rejected.jsonl'}, {out / 'summary.json'}\n"
    )


def register(app: typer.Typer) -> None:
    """Add the stats commands."""
    app.command("stats")(stats)
    app.command("filter")(filter_command)
    app.command("combine")(combine_command)
