"""Counterfactual quality metrics (AutoCAD §4.4, docs/design.md §10.5).

- **flip rate**: share of generated outputs the classifier assigns their target label;
- **distinct-n** (n = 1, 2, 3): distinct n-grams / all n-grams over the outputs (lower-cased
  ``tokenize`` words; n-grams never cross a field boundary). ``distinct`` counts the rebuilt
  texts, ``distinct_fillers`` only the generated fillers (the edits);
- **perplexity** of the rebuilt texts under a reference causal LM (``smollm2``, a folder, or a
  hub name): ``exp(total NLL / total tokens)``;
- **rationale agreement**: token macro-F1 between model rationales and human highlights
  (e-SNLI style whitespace-token indices): F1 per example, averaged over the examples that have
  at least one human highlight.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from zdebias.counterfactual.settings import MetricsSettings
from zdebias.data.options import read_logged
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError
from zdebias.features.tokenize import tokenize
from zdebias.models.compute import model_device

_WS = re.compile(r"\S+")


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """All n-grams of a token list, in order."""
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def distinct_n(segments: Iterable[Sequence[str]], n: int) -> float:
    """Distinct n-grams / total n-grams over token segments (0.0 when there are none).

    >>> distinct_n([["a", "b", "a"], ["a", "b"]], 1), distinct_n([["a", "b", "a"], ["a", "b"]], 2)
    (0.4, 0.6666666666666666)
    """
    total = 0
    seen: set[tuple[str, ...]] = set()
    for seg in segments:
        grams = ngrams(seg, n)
        total += len(grams)
        seen.update(grams)
    return len(seen) / total if total else 0.0


def flip_rate(predicted: Sequence[str], targets: Sequence[str]) -> float:
    """Share of outputs whose predicted label equals the target label."""
    if len(predicted) != len(targets):
        raise ValueError(f"{len(predicted)} predictions for {len(targets)} targets")
    if not targets:
        return 0.0
    return sum(p == t for p, t in zip(predicted, targets, strict=True)) / len(targets)


def text_fields(record: Record) -> list[str]:
    """The texts of a record: premise and hypothesis, or text."""
    if record.is_pair:
        return [record.premise or "", record.hypothesis or ""]
    return [record.text or ""]


def perplexity(
    lm: str | Path,
    texts: Sequence[str],
    *,
    batch_size: int = 8,
    max_length: int = 256,
    progress: bool = False,
) -> dict[str, float]:
    """Corpus perplexity of ``texts`` under causal LM ``lm`` (each text starts after BOS/EOS).

    Returns ``perplexity`` (exp of mean token NLL over all tokens), ``mean_text_perplexity``
    and ``n_tokens``.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from zdebias.models.resolve import resolve_model

    path = resolve_model(lm)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    device = model_device()
    model.to(device).eval()  # type: ignore[arg-type]  # transformers: .to typed unbound (functools.wraps)
    start = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    pad = tok.pad_token_id if tok.pad_token_id is not None else (start or 0)
    total_nll = 0.0
    total_tokens = 0
    per_text: list[float] = []
    starts: Any = range(0, len(texts), batch_size)
    if progress:
        from zdebias.data.progress import track

        starts = track(starts, description="perplexity", total=len(starts))
    for b in starts:
        seqs = []
        for text in texts[b : b + batch_size]:
            ids = tok(text, add_special_tokens=False)["input_ids"][: max_length - 1]
            seqs.append(([start] if start is not None else []) + ids)
        width = max(len(s) for s in seqs)
        input_ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs], device=device)
        mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs], device=device)
        with torch.inference_mode():
            logits = model(input_ids=input_ids, attention_mask=mask).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        nll = -logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1) * mask[:, 1:]
        for row, m in zip(nll.sum(1).tolist(), mask[:, 1:].sum(1).tolist(), strict=True):
            if m:
                total_nll += row
                total_tokens += int(m)
                per_text.append(math.exp(row / m))
    return {
        "perplexity": math.exp(total_nll / total_tokens) if total_tokens else float("nan"),
        "mean_text_perplexity": sum(per_text) / len(per_text) if per_text else float("nan"),
        "n_tokens": total_tokens,
    }


# --------------------------------------------------------------------------- rationales


def whitespace_tokens(text: str) -> list[tuple[int, int]]:
    """Character spans of the whitespace-separated tokens (the e-SNLI highlight unit)."""
    return [(m.start(), m.end()) for m in _WS.finditer(text)]


def highlighted_tokens(text: str, spans: Sequence[Sequence[int]]) -> set[int]:
    """Indices of whitespace tokens that overlap any character span."""
    out = set()
    for i, (s, e) in enumerate(whitespace_tokens(text)):
        if any(a < e and s < b for a, b in spans):
            out.add(i)
    return out


def token_f1(pred: set[Any], gold: set[Any]) -> float:
    """F1 between two token sets (1.0 when both are empty)."""
    if not pred and not gold:
        return 1.0
    return 2 * len(pred & gold) / (len(pred) + len(gold))


def _parse_indices(value: Any) -> set[int]:
    if value is None:
        return set()
    if isinstance(value, list):
        return {int(v) for v in value}
    text = str(value).strip()
    if text in ("", "{}"):
        return set()
    return {int(v) for v in text.split(",") if v.strip()}


def read_human_rationales(path: str | Path) -> dict[Any, dict[str, set[int]]]:
    """Human highlights keyed by example id and by its text tuple.

    Formats: the e-SNLI CSV (``pairID``, ``Sentence1``, ``Sentence2``,
    ``Sentence1_Highlighted_1``, ``Sentence2_Highlighted_1``; comma-separated whitespace-token
    indices, ``{}`` for none), or JSONL rows ``{"id", "premise"/"hypothesis" or "text",
    "highlights": {"premise": [i, ...], ...}}``.
    """
    path = Path(path)
    out: dict[Any, dict[str, set[int]]] = {}
    if not path.exists():
        raise DataError("no such file", path=str(path))
    if path.suffix in (".csv", ".tsv"):
        with path.open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh, delimiter="\t" if path.suffix == ".tsv" else ",")
            need = ("Sentence1", "Sentence2", "Sentence1_Highlighted_1", "Sentence2_Highlighted_1")
            missing = [c for c in need if c not in (reader.fieldnames or [])]
            if missing:
                raise DataError(f"missing e-SNLI columns {missing}", path=str(path), line=1)
            for line, row in enumerate(reader, start=2):
                try:
                    hl = {
                        "premise": _parse_indices(row["Sentence1_Highlighted_1"]),
                        "hypothesis": _parse_indices(row["Sentence2_Highlighted_1"]),
                    }
                except ValueError:
                    raise DataError(
                        "highlight indices must be integers", path=str(path), line=line
                    ) from None
                if row.get("pairID"):
                    out[row["pairID"]] = hl
                out[(row["Sentence1"].strip(), row["Sentence2"].strip(), None)] = hl
        return out
    with path.open(encoding="utf-8") as fh:
        for line, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
                hl = {k: _parse_indices(v) for k, v in row["highlights"].items()}
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
                raise DataError(
                    f"expected {{'id', 'highlights': {{field: [indices]}}}}: {err}",
                    path=str(path),
                    line=line,
                ) from None
            if row.get("id") is not None:
                out[str(row["id"])] = hl
            key = (row.get("premise"), row.get("hypothesis"), row.get("text"))
            if any(v is not None for v in key):
                out[tuple(v.strip() if isinstance(v, str) else v for v in key)] = hl
    return out


def rationale_agreement(
    records: Sequence[Record], human: dict[Any, dict[str, set[int]]]
) -> dict[str, Any]:
    """Token macro-F1 of ``meta.rationales`` against human highlights."""
    scores: list[float] = []
    unmatched = no_human = 0
    for record in records:
        hl = human.get(record.id) or human.get((record.premise, record.hypothesis, record.text))
        if hl is None:
            unmatched += 1
            continue
        gold = {(f, i) for f, idx in hl.items() for i in idx}
        if not gold:
            no_human += 1
            continue
        spans = record.meta.get("rationales") or {}
        pred = {
            (f, i)
            for f, sp in spans.items()
            for i in highlighted_tokens(getattr(record, f) or "", sp)
        }
        scores.append(token_f1(pred, gold))
    return {
        "rationale_macro_f1": round(sum(scores) / len(scores), 6) if scores else None,
        "n_scored": len(scores),
        "n_unmatched": unmatched,
        "n_without_human_highlight": no_human,
    }


# --------------------------------------------------------------------------- all together


def counterfactual_metrics(
    records: Sequence[Record],
    settings: MetricsSettings | None = None,
    *,
    classifier: Any | None = None,
    progress: bool = False,
    **overrides: Any,
) -> dict[str, Any]:
    """Flip rate, distinct-1/2/3 (texts and fillers) and, with ``settings.lm``, perplexity.

    ``settings`` (:class:`MetricsSettings`; keywords override its fields, e.g. ``lm=``).
    Without ``classifier`` the flip rate uses the predictions stored at generation time
    (``meta.classifier_label``).
    """
    cfg = MetricsSettings.of(settings, **overrides)
    lm, batch_size = cfg.lm, cfg.batch_size
    # malformed outputs and empty rebuilt fields are no text to measure (the latter keep the
    # source's texts in the file so it reads back)
    outputs = [r for r in records if r.meta.get("rejected_by") not in ("malformed", "empty")]
    targets = [r.label for r in outputs]
    if classifier is not None:
        from zdebias.classify.predict import predict_proba

        probs = predict_proba(classifier, outputs, batch_size=batch_size, progress=progress)
        predicted = [classifier.labels[int(i)] for i in probs.argmax(axis=1)] if outputs else []
    else:
        predicted = [r.meta.get("classifier_label") for r in outputs]
        if any(p is None for p in predicted):
            raise DataError(
                "records carry no classifier_label; pass --classifier",
                field="meta.classifier_label",
            )
    segments = [tokenize(t) for r in outputs for t in text_fields(r)]
    filler_segments = [tokenize(f) for r in outputs for f in r.meta.get("fillers", [])]
    result: dict[str, Any] = {
        "n_outputs": len(outputs),
        "n_excluded_malformed": sum(r.meta.get("rejected_by") == "malformed" for r in records),
        "n_excluded_empty": sum(r.meta.get("rejected_by") == "empty" for r in records),
        "flip_rate": round(flip_rate(predicted, targets), 6) if outputs else None,
    }
    for n in (1, 2, 3):
        result[f"distinct_{n}"] = round(distinct_n(segments, n), 6)
    for n in (1, 2, 3):
        result[f"distinct_fillers_{n}"] = round(distinct_n(filler_segments, n), 6)
    if lm is not None:
        texts = [t for r in outputs for t in text_fields(r)]
        ppl = perplexity(lm, texts, progress=progress)
        result.update({k: round(v, 4) if isinstance(v, float) else v for k, v in ppl.items()})
        result["lm"] = str(lm)
    return result


def read_counterfactuals(path: str | Path) -> list[Record]:
    """The records to score: a ``generate`` output folder's kept.jsonl and rejected.jsonl
    (when present), or one file. Skipped rows are logged as warnings."""
    path = Path(path)
    if path.is_dir() and not (path / "kept.jsonl").exists():
        raise ConfigError(f"{path}: not a `generate` output folder (no kept.jsonl)")
    files = [path / "kept.jsonl", path / "rejected.jsonl"] if path.is_dir() else [path]
    return [r for f in files if f.exists() for r in read_logged(str(f))[0]]


def metrics_report(
    counterfactuals: str | Path | None,
    settings: MetricsSettings | None = None,
    classifier: str | Path | None = None,
    rationales: str | Path | None = None,
    human: str | Path | None = None,
    *,
    out: str | Path | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """``zdebias counterfactual metrics``: :func:`counterfactual_metrics` of
    ``counterfactuals`` (a ``generate`` folder or a file; the flip rate by ``classifier``, a
    classifier folder, when given) plus ``n_kept``, and/or the :func:`rationale_agreement` of
    ``rationales`` with the ``human`` highlights; also written to ``out`` when given."""
    if counterfactuals is None and rationales is None:
        raise ConfigError("give INPUT (counterfactuals) and/or --rationales with --human")
    if (rationales is None) != (human is None):
        raise ConfigError("--rationales and --human go together")
    result: dict[str, Any] = {}
    if counterfactuals is not None:
        records = read_counterfactuals(counterfactuals)
        clf = None
        if classifier:
            from zdebias.classify.predict import load_classifier

            clf = load_classifier(classifier)
        result.update(counterfactual_metrics(records, settings, classifier=clf, progress=progress))
        result["n_kept"] = sum(1 for r in records if "rejected_by" not in r.meta)
        result["input"] = counterfactuals
    if rationales is not None and human is not None:
        predicted = read_logged(str(rationales))[0]
        result.update(rationale_agreement(predicted, read_human_rationales(human)))
    if out is not None:
        from zdebias.data.writers import write_json

        write_json(result, out)
    return result
