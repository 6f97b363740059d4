"""Terminal text of command results: what ``zdebias inspect``, ``stats``, ``filter``,
``combine``, ``run`` and the others print without ``--json`` (the JSON is the same dict)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zdebias.data.options import counted

if TYPE_CHECKING:
    from zdebias.stats.summaries import (
        AfliteSummary,
        CartographySummary,
        FilterSummary,
        ShortcutSplitSummary,
        ZFilterSummary,
    )


def inspect_text(info: dict[str, Any]) -> str:
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    buf = StringIO()
    console = Console(file=buf, width=100, soft_wrap=True)
    console.print(f"[bold]{info['path']}[/bold]  format={info['format']}  task={info['task']}")
    console.print(f"examples: {info['n_examples']:,}")
    if info.get("label_map"):
        mapped = ", ".join(f"{k}={v}" for k, v in info["label_map"].items())
        console.print(f"raw labels read as {mapped} ({info['label_map_from']})", markup=False)
    table = Table("label", "count", "share")
    total = max(info["n_examples"], 1)
    for name, count in info["label_counts"].items():
        table.add_row(name, f"{count:,}", f"{count / total:.1%}")
    console.print(table)
    console.print(
        f"skipped: {info['n_skipped_unlabelled']:,} without gold label, "
        f"{counted(info['n_skipped_errors'], 'bad row')}"
        + (
            f", {info['n_skipped_by_where']:,} not selected by --where"
            if "n_skipped_by_where" in info
            else ""
        )
    )
    for line in info["skipped_errors"][:5]:
        console.print(f"  {line}", markup=False)
    lengths = Table("field", "min", "mean", "median", "max", title="length (words between spaces)")
    for fld, st in info["length_words"].items():
        lengths.add_row(fld, *(str(st[k]) for k in ("min", "mean", "median", "max")))
    console.print(lengths)
    if info.get("length_tokens"):
        title = "length (tokens, as the features cut them)"
        lengths = Table("field", "min", "mean", "median", "max", title=title)
        for fld, st in info["length_tokens"].items():
            lengths.add_row(fld, *(str(st[k]) for k in ("min", "mean", "median", "max")))
        console.print(lengths)
    return buf.getvalue().rstrip("\n")


def stats_text(report: dict[str, Any], top: int) -> str:
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    buf = StringIO()
    console = Console(file=buf, width=100, soft_wrap=True)
    console.print(
        f"examples: {report['n_examples']:,}   features: {report['n_features']:,}   "
        f"z_critical (α={report['alpha']}, Bonferroni): {report['z_critical']:.2f}   "
        f"significant features: {report['n_significant']:,}"
        + kept_note(report.get("kept_features"))
    )
    for line in prior_lines(report):
        _plain(console, line)
    for line in artifact_lines(report.get("artifact_model")):
        _plain(console, line)
    for line in report.get("warnings", []):
        _plain(console, f"warning: {line}")
    for label, rows in report["top"].items():
        table = Table("feature", "z", "n", "p̂", title=f"{label} (top {top})", title_justify="left")
        for row in rows:
            name = row["feature"] + (" (kept)" if row.get("kept") else "")
            table.add_row(name, f"{row['z']:.1f}", f"{row['n']:,}", f"{row['p']:.3f}")
        console.print(table)
    tracked = {k: v for k, v in (report.get("tracked") or {}).items() if v}
    if tracked:
        table = Table("feature", "label", "z", "n", "p̂", "rank", title="tracked features")
        table.title_justify = "left"
        for feature, cells in tracked.items():
            for label, c in cells.items():
                table.add_row(
                    feature, label, f"{c['z']:.1f}", f"{c['n']:,}", f"{c['p']:.3f}", str(c["rank"])
                )
        console.print(table)
    if "plot" in report:
        p = report["plot"]
        _plain(
            console,
            f"Gardner plot: {p['png']}, {p['html']} ({p['n_above_curve']:,} of "
            f"{p['n_points']:,} plotted features above the curve)",
        )
    return buf.getvalue().rstrip("\n")


def artifact_lines(block: dict[str, Any] | None) -> list[str]:
    """``stats --artifact-model``: the partial-input model's cross-validated accuracy against
    the majority share, and for single text the note that it partly measures the task."""
    if not block:
        return []
    seen = "hypothesis only" if block["input"] == "hypothesis" else "text"
    lines = [
        f"artifact model ({seen}; {block['model']}): "
        f"{100 * block['accuracy']:.1f}% ± {100 * block['accuracy_std']:.1f} accuracy over "
        f"{block['folds']} folds (seed {block['seed']}, {block['n_rows']:,} rows), majority "
        f"share {100 * block['majority_share']:.1f}% ({block['majority_label']}): "
        f"{block['above_majority_points']:+.1f} points; macro-F1 {block['macro_f1']:.3f}"
    ]
    if block["input"] != "hypothesis":
        lines.append(f"  note: {block['note']}")
    return lines


def kept_note(block: dict[str, Any] | None, key: str = "n_significant") -> str:
    """`` (K of them kept: the task's own, --keep-features)`` for a report's or summary's
    ``kept_features`` block (its count under ``key``); empty without one."""
    if not block:
        return ""
    return f" ({block[key]:,} of them kept: the task's own, --keep-features)"


def _plain(console: Any, text: str) -> None:
    """Print ``text`` as it is (no rich markup or highlighting: paths, feature names)."""
    console.print(text, markup=False, highlight=False)


def cells_text(cells: dict[str, Any], top: int) -> str:
    """``stats --cells``: the shortcut-breaking cells of the ``top`` most biased features
    (docs/design.md §12), one row per cell, and where all of them were written."""
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    features = list(dict.fromkeys(c["feature"] for c in cells["cells"]))[:top]
    shown = set(features)
    table = Table(
        "feature",
        "favoured label",
        "z",
        "target label",
        "rows now",
        "rows needed",
        title=f"shortcut-breaking cells (z > {cells['threshold']:.2f}; the {len(features)} "
        "most biased features)",
        title_justify="left",
    )
    for c in cells["cells"]:
        if c["feature"] in shown:
            table.add_row(
                c["feature"],
                c["favoured"],
                f"{c['z']:.1f}",
                c["label"],
                f"{c['rows']:,}",
                f"{c['needed']:,}",
            )
    buf = StringIO()
    console = Console(file=buf, width=110, soft_wrap=True)
    console.print(table)
    _plain(
        console,
        f"{cells['n_cells']:,} cells of {cells['n_features']:,} biased features need "
        f"{cells['rows_needed']:,} rows in all; written to {cells['path']}",
    )
    return buf.getvalue().rstrip("\n")


def batches_text(summary: ZFilterSummary) -> str:
    """How a z-filter summary's input was cut: ``20 batches of 44, scaled to the data`` (a
    default batch below the paper's 1,000), ``20 batches of 1000``."""
    from zdebias.stats.settings import DEFAULT_BATCH_SIZE

    size = summary["zfilter_batch_size"]
    scaled = summary["zfilter_batch_size_rule"] != "given" and size < DEFAULT_BATCH_SIZE
    return f"{summary['n_batches']} batches of {size}" + (", scaled to the data" if scaled else "")


def prior_lines(report: Mapping[str, Any]) -> list[str]:
    """What a stats report or filter summary says of its label prior (docs/design.md §14): the
    empirical prior named (and its cells tested exactly, :func:`exact_test_line`), or the
    warning that the labels are imbalanced under 1/L."""
    from zdebias.stats.zstats import imbalance_line

    if report.get("label_prior") == "empirical":
        shares = ", ".join(f"{k} {v:.3f}" for k, v in (report.get("p0") or {}).items())
        exact = exact_test_line(report)
        shares = f": {shares}" if shares else ""
        return [
            f"label prior: empirical (z against each label's share{shares})",
            *([exact] if exact else []),
        ]
    line = imbalance_line(report.get("imbalance"))
    return [f"warning: {line}"] if line else []


def exact_test_line(report: Mapping[str, Any]) -> str | None:
    """What a stats report or filter summary says of its cells tested exactly (a label
    share below 1/L with fewer than 5 rows expected), None when there were none."""
    info = report.get("exact_test")
    if not info:
        return None
    per = ", ".join(f"{k} {v:,}" for k, v in info["per_label"].items() if v)
    lost = info["n_not_significant"]
    return (
        f"exact test: {info['n_cells']:,} (feature, label) cells expect under 5 rows at a "
        f"label share below 1/L ({per}): their z is the binomial tail's; {lost:,} of them "
        "would pass z_critical by the normal approximation"
    )


def filter_notes(summary: ZFilterSummary) -> list[str]:
    """What a z-filter summary's HTML report lists under its counts: :func:`discard_lines`
    and the summary's warnings (none for another method, whose summary has none of the
    z-filter's keys, or an older summary)."""
    return [line.strip() for line in discard_lines(summary)] + list(summary.get("warnings", []))


def discard_lines(summary: ZFilterSummary) -> list[str]:
    """A z-filter summary's account of what it removed: the share of the input rows
    rejected, overall and per label; the rows rejected only by features below z_critical
    (and the option that spares them) or that --min-z critical was used; the rows the
    --min-label-share floor kept; the cells tested exactly."""
    share = summary.get("discarded_share")
    if share is None:
        return []
    per = ", ".join(
        f"{k} {100 * v:.1f}%" for k, v in summary["label_discarded_share"].items() if v is not None
    )
    lines = [f"  discarded {100 * share:.1f}% of the input rows: {per}"]
    z_c = summary["z_critical"]
    if summary.get("min_z") == "critical":
        lines.append(
            f"  rows removed only for significant features (--min-z critical: z > {z_c:.2f})"
        )
    elif summary.get("n_rejected_below_critical") and summary["n_rejected"]:
        below = summary["n_rejected_below_critical"]
        lines.append(
            f"  {below:,} of the {summary['n_rejected']:,} rejected rows were rejected only by "
            f"features below z_c {z_c:.2f} (--min-z {summary.get('min_z', 0):g}, the paper's: "
            "the top k per label, significant or not; --min-z critical removes rows only for "
            "significant features)"
        )
    if summary.get("n_kept_by_floor") is not None:
        per_floor = ", ".join(f"{k} {v:,}" for k, v in summary["label_kept_by_floor"].items() if v)
        lines.append(
            f"  --min-label-share {summary['min_label_share']:g} kept "
            f"{counted(summary['n_kept_by_floor'], 'row')} the biased features rejected"
            + (f" ({per_floor})" if per_floor else "")
        )
    lines.extend(f"  warning: {w}" for w in summary.get("label_share_warnings") or [])
    line = exact_test_line(summary)
    if line:
        lines.append(f"  {line}")
    return lines


def filter_text(summary: FilterSummary, out: Path) -> str:
    """What ``zdebias filter`` prints: the text of the summary's method
    (:func:`zdebias.stats.methods.render_text`), or its counts, labels and files."""
    from zdebias.stats.methods import render_text

    text = render_text(summary, out)
    return text if text is not None else method_text(summary, out)


def method_text(s: FilterSummary, out: Path) -> str:
    """A filter method's lines when it renders none of its own: counts, labels, files."""
    lines = [f"input {s['n_input']:,}: kept {s['n_kept']:,}, rejected {s['n_rejected']:,}"]
    before, after = s.get("label_counts_before"), s.get("label_counts_after") or {}
    if before:
        lines.append(
            "  labels: " + ", ".join(f"{k} {before[k]:,} → {after.get(k, 0):,}" for k in before)
        )
    return "\n".join([*lines, *_kept_and_written(s, out, "")])


def z_filter_text(summary: ZFilterSummary, out: Path) -> str:
    """What ``zdebias filter`` (z-filtering) prints."""
    lines = [
        f"input {summary['n_input']:,}"
        + (f" + seed {summary['n_seed']:,}" if summary["n_seed"] else "")
        + f": kept {summary['n_kept']:,}, rejected {summary['n_rejected']:,} "
        f"({batches_text(summary)})",
        *discard_lines(summary),
    ]
    for label in summary["labels"]:
        before = summary["top_z_before"].get(label)
        after = summary["top_z_after"].get(label)
        fmt = lambda r: (  # noqa: E731
            f"{r['feature']}{' (kept)' if r.get('kept') else ''} z={r['z']:.1f}" if r else "-"
        )
        lines.append(f"  {label}: top z {fmt(before)}  →  {fmt(after)}")
    if "n_significant_after" in summary:
        lines.append(
            f"  significant features {summary['n_significant_before']:,} → "
            f"{summary['n_significant_after']:,} (features as filtered, z_c "
            f"{summary['z_critical']:.2f})"
        )
        kept = summary.get("kept_features")
        if kept:
            lines.append(
                f"    of them kept (the task's own, --keep-features, never filtered): "
                f"{kept['n_significant_before']:,} → {kept['n_significant_after']:,}; "
                f"{kept['n_features']:,} feature{'s' if kept['n_features'] != 1 else ''} kept "
                "in all"
            )
    if summary.get("label_prior") == "empirical":
        lines.append("  label prior: empirical (z against the label shares of the input)")
    elif (i := summary.get("imbalance")) and i.get("n_only_label_shares"):
        lines.append(
            f"  warning: labels are imbalanced: {i['n_only_label_shares']:,} of "
            f"{i['n_significant_uniform']:,} significant features only reflect the label "
            "shares; --label-prior empirical filters beyond them and keeps the label shares"
        )
    if summary.get("shuffle") and "seed" in summary:  # users compare counts across seeds
        lines.append(
            f"  rows visited in a seeded random order (--seed {summary['seed']}): another "
            "seed keeps another number of rows"
        )
    return "\n".join([*lines, *_kept_and_written(summary, out, "features refit on it, ")])


def _wrote(summary: Mapping[str, Any], out: Path, main: str) -> str:
    """A filter's or recipe's last line: the files it wrote (``main`` and ``rejected.jsonl``
    unless the summary lists its ``output_files``), and ``summary.json``."""
    names = [*summary.get("output_files", [main, "rejected.jsonl"]), "summary.json"]
    return f"wrote {', '.join(str(out / name) for name in names)}"


def _kept_file(summary: Mapping[str, Any]) -> str:
    """The kept rows' file: ``kept.jsonl``, or in the input's schema ``kept.tsv`` etc."""
    return str(summary.get("output_files", ["kept.jsonl"])[0])


def _kept_and_written(summary: FilterSummary, out: Path, note: str) -> list[str]:
    """A filter's last lines: ``zdebias stats`` of the kept rows, and the files written."""
    lines = []
    kept = summary.get("stats_of_kept")
    if kept:
        tops = " / ".join(
            f"{r['feature']} z={r['z']:.1f}" if r else "-" for r in kept["top_z"].values()
        )
        lines.append(
            f"  `zdebias stats` of {_kept_file(summary)} ({note}z_c "
            f"{kept['z_critical']:.2f}): {kept['n_significant']:,} significant; top z {tops}"
        )
    lines.append(_wrote(summary, out, "kept.jsonl"))
    return lines


def aflite_text(s: AfliteSummary, out: Path) -> str:
    """``zdebias filter --method aflite``'s lines: counts, settings, rounds, embeddings."""
    emb = s["embeddings"]
    cache = "cache hit" if emb.get("cache_hit") else "embedded, cached"
    rounds = f"{s['n_rounds']} round" + ("" if s["n_rounds"] == 1 else "s")
    lines = [
        f"input {s['n_input']:,}: kept {s['n_kept']:,}, rejected {s['n_rejected']:,} "
        f"(aflite: {rounds}, n={s['aflite_n']} m={s['aflite_m']:,} "
        f"k={s['aflite_k']:,} τ={s['aflite_tau']} target={s['aflite_target']:,}; "
        f"stopped: {s['stopped']})",
        f"  embeddings: {emb.get('encoder', 'given')} {emb['shape'][0]:,}×{emb['shape'][1]}"
        + (f" ({cache})" if "cache_hit" in emb else ""),
    ]
    removed = ", ".join(str(r["removed"]) for r in s["rounds"])
    if removed:
        lines.append(f"  removed per round: {removed}")
    before, after = s["label_counts_before"], s["label_counts_after"]
    lines.append(
        "  labels: " + ", ".join(f"{k} {before[k]:,} → {after.get(k, 0):,}" for k in before)
    )
    return "\n".join([*lines, *_kept_and_written(s, out, "")])


def cartography_text(summary: CartographySummary, out: Path) -> str:
    """What ``zdebias filter --method cartography`` prints."""
    means = summary["kept_means"]
    lines = [
        f"input {summary['n_input']:,}: kept {summary['n_kept']:,} {summary['region']} "
        f"({summary['fraction']:.0%}, {summary['region_order']}), rejected "
        f"{summary['n_rejected']:,}; dynamics of {summary['epochs']} epochs",
    ]
    if means:
        inp = summary["input_means"]
        lines.append(
            "  mean confidence {:.3f} → {:.3f}, variability {:.3f} → {:.3f}, correctness "
            "{:.3f} → {:.3f} (input → kept)".format(
                inp["confidence"],
                means["confidence"],
                inp["variability"],
                means["variability"],
                inp["correctness"],
                means["correctness"],
            )
        )
    for label, n in summary["label_counts_before"].items():
        lines.append(f"  {label}: {n:,} → {summary['label_counts_after'].get(label, 0):,}")
    kept = summary.get("stats_of_kept")
    if kept:
        lines.append(
            f"  `zdebias stats` of {_kept_file(summary)} (z_c {kept['z_critical']:.2f}): "
            f"{kept['n_significant']:,} significant features"
        )
    lines.append(_wrote(summary, out, "kept.jsonl"))
    return "\n".join(lines)


def combine_text(s: dict[str, Any], out: Path) -> str:
    lines = [
        f"{s['recipe']}: original {s['n_original']:,} → {s['n_output_original']:,}, generated "
        f"{s['n_generated']:,} → {s['n_output_generated']:,}; output {s['n_output']:,}, "
        f"rejected {s['n_rejected']:,}"
    ]
    for label, row in s["top_z_output"].items():
        if row:
            lines.append(f"  {label}: top z {row['feature']} z={row['z']:.1f}")
    lines.append(_wrote(s, out, "combined.jsonl"))
    return "\n".join(lines)


def shortcut_split_text(s: ShortcutSplitSummary, out: Path) -> str:
    """``zdebias shortcut-split``: rows per slice (and per gold label), the features that
    decided most rows."""
    c, n = s["counts"], max(s["n_test"], 1)
    lines = [
        f"{s['n_test']:,} test rows by {s['by']}: "
        + ", ".join(f"{name} {c[name]:,} ({100 * c[name] / n:.1f}%)" for name in c)
    ]
    for label, row in s["per_label"].items():
        lines.append(f"  {label}: " + ", ".join(f"{k} {v:,}" for k, v in row.items()))
    if s["by"] != "hypothesis-only":
        lines.append(
            f"{s['n_significant']:,} significant training features (z > {s['z_critical']:.2f})"
            + (
                f", {s['kept_features']['n_significant']:,} of them kept (--keep-features: "
                "they do not vote)"
                if s.get("kept_features")
                else ""
            )
            + (f"; {counted(s['n_tied'], 'row')} tied (free)" if s["n_tied"] else "")
        )
        if exact_test_line(s):
            lines.append(f"  {exact_test_line(s)}")
        for row in s["deciding_features"][:5]:
            lines.append(
                f"  {row['feature']} → {row['label']}: decides {counted(row['n_rows'], 'row')} "
                f"({row['aligned']:,} aligned, {row['conflicting']:,} conflicting)"
            )
    if s.get("hypothesis_only_accuracy") is not None:
        accuracy = s["hypothesis_only_accuracy"]
        lines.append(f"hypothesis-only accuracy on the test set {accuracy:.4f}")
    gate = s.get("gate")
    if gate:  # the effect rule's partial-input model: where it may vote
        lines.append(
            f"partial-input model ({(s.get('used') or {}).get('bias_model', {}).get('family')}) "
            f"votes on {gate['test_votes']:,} test rows: where its top probability is above "
            + ", ".join(
                f"{lab} {g['threshold']:.3f}" if g["threshold"] is not None else f"{lab} never"
                for lab, g in gate["per_label"].items()
            )
        )
    agree = s.get("agreement")
    if agree:
        kappa = "n/a" if agree["kappa"] is None else f"{agree['kappa']:.3f}"
        lines.append(
            f"agreement with {agree['other']}: {agree['same']:,} of {agree['n']:,} rows in "
            f"the same slice ({100 * (agree['share'] or 0):.1f}%), Cohen's kappa {kappa}"
        )
    lines.append(f"wrote {out}/aligned.jsonl, conflicting.jsonl, free.jsonl, summary.json")
    return "\n".join(lines)


def train_text(s: dict[str, Any]) -> str:
    best = s["best"]
    line = f"trained on {counted(s['n_train'], 'example')}: {counted(s['steps'], 'step')}"
    if best.get("dev_accuracy") is not None:
        line += f", best dev accuracy {best['dev_accuracy']:.4f} at step {best['step']}"
    lines = [line]
    if "cross_fit" in s:
        cf = s["cross_fit"]
        lines.append(
            f"cross-fit, {cf['k']} folds: out-of-fold accuracy {cf['out_of_fold_accuracy']:.4f}"
        )
    return "\n".join([*lines, f"wrote {s['out']}"])


def stages_text(kinds: dict[str, Any]) -> str:
    """``zdebias stages``: each kind, its outputs, its settings (* required, → reference)."""
    lines = []
    for kind, info in kinds.items():
        outs = ", ".join(f"{k} ({v})" for k, v in info["outputs"].items())
        names = [
            n + ("*" if f["required"] else "") + (f" → {f['ref']}" if f["ref"] else "")
            for n, f in info["settings"].items()
        ]
        lines += [f"{kind}: {info['doc']}", f"    outputs: {outs}"]
        lines.append(f"    settings: {', '.join(names)}")
    return "\n".join(lines)


def plan_text(
    recipe: str, run_dir: Path, config: dict[str, Any], plan: list[dict[str, Any]]
) -> str:
    """``zdebias run --dry-run``: the run folder, the resolved recipe (as YAML) and what each
    stage would do (``zdebias.pipeline.runner.Runner.plan``)."""
    from zdebias.pipeline.config import dump_yaml

    lines = [f"# recipe {recipe} → run folder {run_dir}", dump_yaml(config).rstrip(), "# plan"]
    lines += [f"#   {row['name']:<24} {row['stage']:<26} {row['action']}" for row in plan]
    return "\n".join(lines)


def interrupted_text(run_dir: Path) -> str:
    """What ``zdebias run`` says when Ctrl-C or SIGTERM stops it (then it exits with 130)."""
    return (
        f"interrupted; finished stages are kept in {run_dir}. Run the same command again "
        "to resume.\n"
    )


def fields_text(result: dict[str, Any], keys: str) -> str:
    """``key: value`` of the space-separated ``keys`` of ``result`` on one line (missing or None
    values left out)."""
    return "  ".join(f"{k}: {result[k]}" for k in keys.split() if result.get(k) is not None)


def generator_text(s: dict[str, Any]) -> str:
    """``train-generator`` / ``debias-generator``: the trained generator, and the z-filter."""
    lines = [
        f"generator saved to {s['out']}: {s['n_trained']:,} sequences trained "
        f"({s['n_dropped_too_long']:,} too long dropped), {s['steps']} steps, "
        f"loss {s['train_loss']}, {s['train_tokens_per_s']:,.0f} tokens/s"
    ]
    if "z_filter" in s:
        z, mask = s["z_filter"], s.get("mask", {})
        lines.append(
            f"z-filter: kept {z['n_kept']:,} (Z), rejected {z['n_rejected']:,} (Z⁻); "
            f"unlikelihood on {mask.get('n_biased_tokens', 0):,} tokens "
            f"{mask.get('biased_tokens_by_kind', {})}; "
            f"{mask.get('n_unmatched_ngrams', 0)} n-grams not found"
        )
    return "\n".join(lines)


def transform_text(s: dict[str, Any], out: str) -> str:
    """``transform``: records written per rule, and why the others were skipped."""
    lines = [f"{s['n_written']:,} transformed pairs in {out} {s['labels']}"]
    for rule, r in s["rules"].items():
        lines.append(
            f"  {rule}: {r['written']:,} written, applied to {r['applied']:,} of "
            f"{r['tried']:,} premises tried; skipped {r['skipped']}"
        )
    return "\n".join(lines)


def sample_text(s: dict[str, Any]) -> str:
    """``sample``: how many samples were written, and what was dropped."""
    state = "complete" if s["complete"] else "stopped (rerun the same command to resume)"
    text = (
        f"{s['n_written']:,}/{s['n_requested']:,} samples in {s['out']}, {state}; "
        f"generated {s['n_generated']:,}, malformed {s['n_malformed']:,} {s['malformed']}, "
        f"duplicates {s['n_duplicates']:,}; parseable {s['parseable_share']}, "
        f"{s['samples_per_s']} samples/s"
    )
    if u := s.get("usage"):  # prompted sampling: requests and tokens
        text += (
            f"\nrequests {u['requests']:,} ({u['failed_requests']:,} failed, "
            f"{u['retries']:,} retries); tokens {u['prompt_tokens']:,} prompt + "
            f"{u['completion_tokens']:,} completion"
        )
    if c := s.get("cells"):  # targeted sampling: a row per cell
        text += "\n" + sampled_cells_text(c)
    return text


#: cells ``sample --cells`` prints (all of them are in summary.json)
SHOWN_CELLS = 20


def sampled_cells_text(c: dict[str, Any]) -> str:
    """``sample --cells``: per cell asked, generated, fired, missed, prefix only, short (and
    z before → after with --measure-with), and the skipped cells with their reasons."""
    measured = any("z_after" in row for row in c["rows"])
    lines = [
        f"{c['n_cells']} cells: {c['fired']:,}/{c['asked']:,} rows with their feature, "
        f"{c['short']:,} short; {c['n_skipped']} cells skipped ({c['skipped_rows']:,} rows)",
        "  cell | steer | asked | generated | fired | missed | prefix only | short"
        + (" | z before → after" if measured else ""),
    ]
    for r in c["rows"][:SHOWN_CELLS]:
        line = (
            f"  {r['cell']} | {r['steer']} | {r['asked']} | {r['generated']} | {r['fired']} | "
            f"{r['missed']} | {r['prefix_only']} | {r['short']}"
        )
        if measured and r.get("z_after") is not None:
            line += f" | {r['z_before']:.2f} → {r['z_after']:.2f}"
        lines.append(line)
    if len(c["rows"]) > SHOWN_CELLS:
        lines.append(f"  ... {len(c['rows']) - SHOWN_CELLS} more cells in summary.json")
    reasons: dict[str, list[str]] = {}
    for row in c["skipped"]:
        reasons.setdefault(row["reason"], []).append(row["cell"])
    for reason, names in reasons.items():
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        lines.append(f"  skipped, {reason}: {len(names)} cells ({shown})")
    return "\n".join(lines)


def worker_text(s: dict[str, Any]) -> str:
    """``sample --worker I/N``: the worker's samples, and what the merge still needs."""
    state = "finished" if s["complete"] else "stopped (rerun the same command to resume)"
    then = (
        f"the merge is ready: zdebias sample merge {Path(s['out']).parent}"
        if s["ready_to_merge"]
        else "still to run: worker " + ", ".join(map(str, s["pending_workers"]))
    )
    return (
        f"worker {s['worker']}: {s['n_written']:,} samples in {s['out']} (share "
        f"{s['share']:,}), {state}; the rounds all workers have done give "
        f"{s['prefix_unique']:,}/{s['n_requested']:,} unique samples; {then}"
    )


def merged_text(s: dict[str, Any]) -> str:
    """``sample merge``: :func:`sample_text` and what the workers added up to."""
    return (
        sample_text(s) + f"\n{s['workers']} workers; {s['n_cross_worker_duplicates']:,} "
        f"duplicates across workers; rounds 0-{s['rounds'] - 1} of "
        f"{s['rounds_sampled']:,} sampled"
    )


__all__ = [
    "combine_text",
    "fields_text",
    "filter_text",
    "generator_text",
    "inspect_text",
    "merged_text",
    "method_text",
    "sample_text",
    "sampled_cells_text",
    "shortcut_split_text",
    "stages_text",
    "stats_text",
    "train_text",
    "worker_text",
    "z_filter_text",
]
