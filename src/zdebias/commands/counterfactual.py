"""``zdebias counterfactual``: AutoCAD rationales, infiller training, generation, metrics."""

from __future__ import annotations

import contextlib
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
    echo_json,
    open_input,
    report_skips,
)
from zdebias.errors import ConfigError

cf_app = typer.Typer(
    name="counterfactual",
    help="AutoCAD counterfactuals: rationales → label-controlled infiller → generate + "
    "post-select → metrics.",
    no_args_is_help=True,
)

LimitOpt = Annotated[
    int | None, typer.Option("--limit", help="Use only the first N records.", min=1)
]
FieldsOpt = Annotated[
    str,
    typer.Option(
        "--fields",
        help="Pair tasks: rationale words from both fields (AutoCAD), "
        "premise only, or hypothesis only.",
    ),
]
BatchOpt = Annotated[int, typer.Option("--batch-size", min=1, help="Batch size.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed.")]


def _read(path: str, limit: int | None, **options: Any) -> tuple[list[Any], Any]:
    ds = open_input(path, **options)
    records = []
    for record in ds:
        records.append(record)
        if limit is not None and len(records) >= limit:
            break
    report_skips(ds)
    return records, ds


def _check_fields(fields: str) -> str:
    if fields not in ("both", "premise", "hypothesis"):
        raise ConfigError(f"--fields must be both, premise or hypothesis, not {fields!r}")
    return fields


def _check_spans(spans: str) -> str:
    if spans not in ("rationale", "random"):
        raise ConfigError(f"--spans must be rationale or random, not {spans!r}")
    return spans


@cf_app.command("rationales")
def rationales(
    classifier: Annotated[str, typer.Option("--classifier", help="Classifier folder.")],
    data: Annotated[str, typer.Option("--data", help="Labelled dataset (any format).")],
    out: Annotated[Path, typer.Option("--out", help="Rationale records (JSONL).")],
    ratio: Annotated[float, typer.Option("--ratio", help="Share π of words to pick.")] = 0.3,
    min_score: Annotated[
        float, typer.Option("--min-score", help="Drop picked words below this saliency.")
    ] = 0.3,
    min_confidence: Annotated[
        float, typer.Option("--min-confidence", help="Keep examples with p(gold) above this.")
    ] = 0.8,
    require_correct: Annotated[
        bool,
        typer.Option(
            "--correct-only/--any-prediction",
            help="Keep only examples the classifier predicts correctly.",
        ),
    ] = True,
    method: Annotated[
        str, typer.Option("--method", help="Saliency: gradient-norm or gradient-x-input.")
    ] = "gradient-norm",
    fields: FieldsOpt = "both",
    normalize: Annotated[
        str,
        typer.Option(
            "--normalize",
            help="Divide scores by the max over the text's tokens "
            "(text) or over all input tokens incl. [CLS]/[SEP] (all).",
        ),
    ] = "text",
    dropped: Annotated[
        Path | None, typer.Option("--dropped", help="Also write the dropped records here.")
    ] = None,
    limit: LimitOpt = None,
    batch_size: BatchOpt = 16,
    format: FormatOpt = None,
    task: TaskOpt = None,
    columns: ColumnsOpt = None,
    label_map: LabelMapOpt = None,
    split: SplitOpt = None,
    on_error: OnErrorOpt = "raise",
) -> None:
    """Pick rationale spans by gradient saliency for correctly, confidently predicted examples."""
    from zdebias.classify.predict import load_classifier
    from zdebias.counterfactual.rationales import extract_rationales
    from zdebias.data.writers import write_records

    records, ds = _read(
        data,
        limit,
        format=format,
        task=task,
        columns=columns,
        label_map=label_map,
        split=split,
        on_error=on_error,
    )
    clf = load_classifier(classifier)
    with contextlib.redirect_stdout(sys.stderr):
        kept, drop = extract_rationales(
            clf,
            records,
            method=method,
            ratio=ratio,
            min_score=min_score,
            min_confidence=min_confidence,
            require_correct=require_correct,
            fields=_check_fields(fields),  # type: ignore[arg-type]
            normalize=normalize,
            batch_size=batch_size,
            progress=True,
        )
    write_records(kept, out)
    if dropped is not None:
        write_records(drop, dropped)
    reasons = {
        code: sum(r.meta["dropped_by"] == code for r in drop)
        for code in ("mispredicted", "low-confidence", "no-rationale")
    }
    n_spans = sum(len(v) for r in kept for v in r.meta["rationales"].values())
    n_words = sum(
        len(s.split()) for r in kept for v in r.meta["rationale_text"].values() for s in v
    )
    echo_json(
        {
            "data": data,
            "out": str(out),
            "n_input": len(records),
            "n_skipped_unlabelled": ds.report.n_unlabelled,
            "n_skipped_errors": ds.report.n_errors,
            "n_kept": len(kept),
            "n_dropped": len(drop),
            "dropped_by": reasons,
            "mean_spans": round(n_spans / len(kept), 3) if kept else 0.0,
            "mean_rationale_words": round(n_words / len(kept), 3) if kept else 0.0,
            "method": method,
            "ratio": ratio,
            "min_score": min_score,
            "min_confidence": min_confidence,
            "fields": fields,
            "normalize": normalize,
        }
    )


def _spans_for(
    records: list[Any], spans: str, fields: str, density: float, seed: int, path: str
) -> list[dict[str, list[tuple[int, int]]]]:
    import numpy as np

    from zdebias.counterfactual.rationales import random_rationales, read_spans

    rng = np.random.default_rng(seed)
    if spans == "rationale":
        return [read_spans(r, path=path) for r in records]
    return [
        random_rationales(r, fields=fields, density=density, rng=rng)  # type: ignore[arg-type]
        for r in records
    ]


@cf_app.command("train")
def train(
    rationales_file: Annotated[
        str, typer.Option("--rationales", help="Rationale records from `rationales`.")
    ],
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="Base model: T5 family, a BERT encoder (bert2bert, "
            "e.g. minilm) or a causal LM (e.g. smollm2); alias, folder or hub name.",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Output folder for the infiller.")],
    alpha: Annotated[
        float | None,
        typer.Option(
            "--alpha",
            help="Unlikelihood weight α (default 1.0 for pair tasks, 0.3 for single text).",
        ),
    ] = None,
    arch: Annotated[
        str, typer.Option("--arch", help="auto, seq2seq, bert2bert or causal.")
    ] = "auto",
    spans: Annotated[
        str, typer.Option("--spans", help="Mask rationale spans, or random spans (ablation).")
    ] = "rationale",
    ratio: Annotated[float, typer.Option("--ratio", help="Random spans: share of words.")] = 0.3,
    fields: FieldsOpt = "both",
    dev: Annotated[
        str | None,
        typer.Option(
            "--dev", help="Dev rationale records: best epoch by dev loss, early stopping."
        ),
    ] = None,
    epochs: Annotated[float, typer.Option("--epochs", help="Training epochs.")] = 10,
    batch_size: BatchOpt = 8,
    lr: Annotated[float, typer.Option("--lr", help="Learning rate (AdamW).")] = 1e-5,
    patience: Annotated[int, typer.Option("--patience", help="Early-stop patience.")] = 3,
    max_source_length: Annotated[int, typer.Option("--max-source-length")] = 256,
    max_target_length: Annotated[int, typer.Option("--max-target-length")] = 64,
    seed: SeedOpt = 0,
    limit: LimitOpt = None,
    task: TaskOpt = None,
) -> None:
    """Fine-tune a label-controlled infiller: MLE + α·unlikelihood on rationale tokens."""
    from zdebias.counterfactual.trainer import train_infiller
    from zdebias.data.labels import get_task

    _check_spans(spans)
    _check_fields(fields)
    records, ds = _read(rationales_file, limit, task=task)
    labels = list(get_task(task or ds.report.task).labels)
    sp = _spans_for(records, spans, fields, ratio, seed, rationales_file)
    dev_pair = None
    if dev is not None:
        dev_records, _ = _read(dev, None, task=task)
        dev_pair = (dev_records, _spans_for(dev_records, spans, fields, ratio, seed + 1, dev))
    with contextlib.redirect_stdout(sys.stderr):
        summary = train_infiller(
            records,
            model,
            out,
            labels=labels,
            spans=sp,
            alpha=alpha,
            arch=arch,
            dev=dev_pair,
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            patience=patience,
            seed=seed,
            max_source_length=max_source_length,
            max_target_length=max_target_length,
            extra_info={"spans": spans, "fields": fields},
        )
    summary.pop("history", None)
    echo_json(summary)


@cf_app.command("generate")
def generate(
    infiller: Annotated[
        str,
        typer.Option(
            "--infiller", help="Trained infiller folder (or a base model: the untrained baseline)."
        ),
    ],
    classifier: Annotated[str, typer.Option("--classifier", help="Classifier for selection.")],
    data: Annotated[
        str, typer.Option("--data", help="Rationale records (or any dataset with --spans random).")
    ],
    out: Annotated[
        Path, typer.Option("--out", help="Output folder: kept.jsonl, rejected.jsonl, summary.json.")
    ],
    n: Annotated[int, typer.Option("--n", min=1, help="Samples per example and target.")] = 1,
    top_p: Annotated[float, typer.Option("--top-p", help="Nucleus sampling p.")] = 0.9,
    temperature: Annotated[float, typer.Option("--temperature")] = 0.7,
    spans: Annotated[
        str, typer.Option("--spans", help="rationale (from the data) or random (baseline).")
    ] = "rationale",
    ratio: Annotated[float, typer.Option("--ratio", help="Random spans: share of words.")] = 0.3,
    fields: FieldsOpt = "both",
    max_filler_tokens: Annotated[
        int, typer.Option("--max-filler-tokens", min=1, help="Longest filler (tokens).")
    ] = 8,
    constrained: Annotated[
        bool,
        typer.Option(
            "--constrained/--free",
            help="Force the sentinel structure while "
            "decoding (every sample parses), or leave the model free.",
        ),
    ] = True,
    min_prob: Annotated[
        float, typer.Option("--min-prob", help="Also require p(target) >= this.")
    ] = 0.0,
    seed: SeedOpt = 0,
    batch_size: BatchOpt = 16,
    limit: LimitOpt = None,
    format: FormatOpt = None,
    task: TaskOpt = None,
    columns: ColumnsOpt = None,
    label_map: LabelMapOpt = None,
    split: SplitOpt = None,
    on_error: OnErrorOpt = "raise",
) -> None:
    """Fill spans for every other label, rebuild, and keep what the classifier agrees with."""
    from zdebias.classify.predict import load_classifier
    from zdebias.counterfactual.model import load_infiller
    from zdebias.counterfactual.select import generate_counterfactuals
    from zdebias.data.writers import write_json, write_records

    _check_spans(spans)
    records, _ = _read(
        data,
        limit,
        format=format,
        task=task,
        columns=columns,
        label_map=label_map,
        split=split,
        on_error=on_error,
    )
    inf = load_infiller(infiller)
    clf = load_classifier(classifier)
    with contextlib.redirect_stdout(sys.stderr):
        kept, rejected, summary = generate_counterfactuals(
            inf,
            clf,
            records,
            spans=spans,  # type: ignore[arg-type]
            n=n,
            top_p=top_p,
            temperature=temperature,
            seed=seed,
            density=ratio,
            fields=_check_fields(fields),  # type: ignore[arg-type]
            max_filler_tokens=max_filler_tokens,
            constrained=constrained,
            min_prob=min_prob,
            batch_size=batch_size,
            path=data,
            progress=True,
        )
    out.mkdir(parents=True, exist_ok=True)
    write_records(kept, out / "kept.jsonl")
    write_records(rejected, out / "rejected.jsonl")
    summary = {"data": data, "infiller": infiller, "classifier": classifier, **summary}
    write_json(summary, out / "summary.json")
    echo_json(summary)


@cf_app.command("metrics")
def metrics(
    data: Annotated[
        str | None,
        typer.Option(
            "--data",
            help="Generated counterfactuals: a `generate` "
            "folder (all parsed outputs) or a JSONL file.",
        ),
    ] = None,
    classifier: Annotated[
        str | None,
        typer.Option(
            "--classifier",
            help="Classifier for the flip rate (default: the predictions stored at generation).",
        ),
    ] = None,
    lm: Annotated[
        str | None, typer.Option("--lm", help="Causal LM for perplexity (smollm2, folder, hub).")
    ] = None,
    rationales_file: Annotated[
        str | None, typer.Option("--rationales", help="Rationale records to score against --human.")
    ] = None,
    human: Annotated[
        str | None, typer.Option("--human", help="Human highlights: e-SNLI CSV or JSONL.")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Also write the JSON here.")] = None,
    batch_size: BatchOpt = 16,
) -> None:
    """Flip rate, distinct-1/2/3, perplexity, and rationale macro-F1 against human highlights."""
    from zdebias.counterfactual.metrics import (
        counterfactual_metrics,
        rationale_agreement,
        read_human_rationales,
    )
    from zdebias.data.writers import write_json

    if data is None and rationales_file is None:
        raise ConfigError("give --data (counterfactuals) and/or --rationales with --human")
    if (rationales_file is None) != (human is None):
        raise ConfigError("--rationales and --human go together")
    result: dict[str, Any] = {}
    if data is not None:
        path = Path(data)
        files = [path / "kept.jsonl", path / "rejected.jsonl"] if path.is_dir() else [path]
        records: list[Any] = []
        for f in files:
            if f.exists():
                records.extend(_read(str(f), None)[0])
        if path.is_dir() and not (path / "kept.jsonl").exists():
            raise ConfigError(f"{path}: not a `generate` output folder (no kept.jsonl)")
        clf = None
        if classifier is not None:
            from zdebias.classify.predict import load_classifier

            clf = load_classifier(classifier)
        with contextlib.redirect_stdout(sys.stderr):
            result.update(
                counterfactual_metrics(
                    records, classifier=clf, lm=lm, batch_size=batch_size, progress=True
                )
            )
        result["n_kept"] = sum(1 for r in records if "rejected_by" not in r.meta)
        result["data"] = data
    if rationales_file is not None and human is not None:
        recs, _ = _read(rationales_file, None)
        result.update(rationale_agreement(recs, read_human_rationales(human)))
    if out is not None:
        write_json(result, out)
    echo_json(result)


def register(app: typer.Typer) -> None:
    """Add the ``counterfactual`` command group."""
    app.add_typer(cf_app, name="counterfactual")
