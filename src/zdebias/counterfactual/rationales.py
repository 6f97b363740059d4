"""Rationales: the salient words a counterfactual should rewrite (AutoCAD §3.1,
docs/design.md §10.1).

For each example the classifier predicts correctly with ``p(gold) > min_confidence`` the top
``ratio`` of words (by word saliency, pooled over the chosen fields) are picked, words scoring
below ``min_score`` are dropped, and adjacent picked words of one field form one span.

Rationales travel in ``meta`` of ordinary records, so every later stage reads them with the
normal readers::

    meta.rationales      {"premise": [[start, end], ...], "hypothesis": [...]}  (char offsets)
    meta.rationale_text  {"premise": ["a man", ...], ...}                       (for reading)
    meta.saliency        {"premise": [["man", 0.93], ...], ...}                 (word scores)
    meta.classifier_prob p(gold) under the classifier

Which fields: the released AutoCAD code ranks premise and hypothesis words together and masks
both (``fields="both"``, the default); ``premise`` or ``hypothesis`` restrict the candidates to
one side. Single-text tasks always use ``text``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from zdebias.counterfactual.settings import Fields, RationaleSettings, SpansMode
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, DataError
from zdebias.features.tokenize import word_spans

Span = tuple[int, int]


def select_rationale_words(
    scores: Sequence[float], *, ratio: float = 0.3, min_score: float = 0.3
) -> list[int]:
    """Indices (ascending) of the top ``ratio`` share of words, keeping those ``>= min_score``.

    ``k = max(1, round_half_up(ratio * n))``; ties are broken by position (earlier first).

    >>> select_rationale_words([0.1, 0.9, 0.5, 0.2, 1.0, 0.35, 0.31], ratio=0.5, min_score=0.3)
    [1, 2, 4, 5]
    """
    n = len(scores)
    if n == 0 or ratio <= 0:
        return []
    k = min(n, max(1, math.floor(ratio * n + 0.5)))
    order = sorted(range(n), key=lambda i: (-scores[i], i))[:k]
    return sorted(i for i in order if scores[i] >= min_score)


def merge_adjacent(indices: Sequence[int]) -> list[Span]:
    """Consecutive word indices → ``[start, end)`` index spans.

    >>> merge_adjacent([0, 1, 3, 5, 6, 7])
    [(0, 2), (3, 4), (5, 8)]
    """
    spans: list[Span] = []
    for i in sorted(set(indices)):
        if spans and spans[-1][1] == i:
            spans[-1] = (spans[-1][0], i + 1)
        else:
            spans.append((i, i + 1))
    return spans


def word_to_char_spans(words: Sequence[tuple[int, int]], spans: Sequence[Span]) -> list[Span]:
    """Word-index spans → character spans (first word's start to last word's end)."""
    return [(words[a][0], words[b - 1][1]) for a, b in spans]


def candidate_fields(record: Record, fields: Fields) -> list[str]:
    """The fields whose words may become rationales."""
    if not record.is_pair:
        return ["text"]
    if fields == "both":
        return ["premise", "hypothesis"]
    if fields in ("premise", "hypothesis"):
        return [fields]
    raise ConfigError(f"unknown fields {fields!r}; expected both, premise or hypothesis")


def pick_rationales(
    words: Mapping[str, Sequence[tuple[int, int, float]]],
    *,
    ratio: float = 0.3,
    min_score: float = 0.3,
) -> dict[str, list[Span]]:
    """Character spans per field from ``(start, end, score)`` words, ranked over all fields."""
    flat = [(name, i) for name, ws in words.items() for i in range(len(ws))]
    scores = [words[name][i][2] for name, i in flat]
    picked = select_rationale_words(scores, ratio=ratio, min_score=min_score)
    out: dict[str, list[Span]] = {}
    for name, ws in words.items():
        idx = [flat[j][1] for j in picked if flat[j][0] == name]
        out[name] = word_to_char_spans([(s, e) for s, e, _ in ws], merge_adjacent(idx))
    return out


def random_spans(
    n_words: int, *, density: float = 0.3, mean_span: float = 2.0, rng: np.random.Generator
) -> list[Span]:
    """T5-style random noise spans over ``n_words`` words (word-index ``[start, end)``).

    ``round(density * n)`` words (at least 1, at most ``n - 1`` when ``n > 1``) are split into
    ``round(noise / mean_span)`` spans placed at random between non-noise segments, as the
    random-mask baseline of the AutoCAD code does.
    """
    if n_words <= 0:
        return []
    if n_words == 1:
        return [(0, 1)]
    n_noise = min(max(round(n_words * density), 1), n_words - 1)
    n_spans = max(round(n_noise / mean_span), 1)
    n_spans = min(n_spans, n_noise, n_words - n_noise + 1)

    def segment(total: int, parts: int) -> list[int]:
        cuts = (
            sorted(rng.choice(np.arange(1, total), size=parts - 1, replace=False).tolist())
            if parts > 1
            else []
        )
        bounds = [0, *cuts, total]
        return [bounds[i + 1] - bounds[i] for i in range(parts)]

    noise = segment(n_noise, n_spans)
    n_clean = n_words - n_noise
    # clean gaps: n_spans - 1 inner gaps of >= 1 word, plus two outer gaps of >= 0 words
    inner_min = n_spans - 1
    extra = n_clean - inner_min
    slots = n_spans + 1
    cuts = sorted(rng.integers(0, extra + 1, size=slots - 1).tolist())
    bounds = [0, *cuts, extra]
    gaps = [bounds[i + 1] - bounds[i] for i in range(slots)]
    for i in range(1, n_spans):
        gaps[i] += 1
    spans: list[Span] = []
    pos = gaps[0]
    for i, length in enumerate(noise):
        spans.append((pos, pos + length))
        pos += length + gaps[i + 1]
    return spans


def random_rationales(
    record: Record,
    *,
    fields: Fields = "both",
    density: float = 0.3,
    mean_span: float = 2.0,
    rng: np.random.Generator,
) -> dict[str, list[Span]]:
    """Random character spans per field (the random-span baseline)."""
    out: dict[str, list[Span]] = {}
    for name in candidate_fields(record, fields):
        words = [(s, e) for _, s, e in word_spans(getattr(record, name) or "")]
        spans = random_spans(len(words), density=density, mean_span=mean_span, rng=rng)
        out[name] = word_to_char_spans(words, spans)
    return out


def read_spans(record: Record, *, path: str | None = None) -> dict[str, list[Span]]:
    """The ``meta.rationales`` of a record, validated (sorted, disjoint, inside the text)."""
    raw = record.meta.get("rationales")
    if not isinstance(raw, dict):
        raise DataError(
            f"record {record.id!r} has no rationales; make them with "
            "`zdebias counterfactual rationales` or use --spans random",
            path=path,
            field="meta.rationales",
        )
    allowed = ("premise", "hypothesis") if record.is_pair else ("text",)
    out: dict[str, list[Span]] = {}
    for name, spans in raw.items():
        if name not in allowed:
            raise DataError(
                f"record {record.id!r}: rationale field {name!r} is not one of "
                f"{', '.join(allowed)}",
                path=path,
                field="meta.rationales",
            )
        text = getattr(record, name) or ""
        clean: list[Span] = []
        last = 0
        for span in spans:
            ok = (
                isinstance(span, list | tuple)
                and len(span) == 2
                and all(isinstance(v, int) for v in span)
            )
            if not ok or not (last <= span[0] < span[1] <= len(text)):
                raise DataError(
                    f"record {record.id!r}: bad span {span!r} in {name!r} (spans must be "
                    f"sorted, disjoint [start, end] character offsets inside a "
                    f"{len(text)}-character text)",
                    path=path,
                    field="meta.rationales",
                )
            clean.append((span[0], span[1]))
            last = span[1]
        out[name] = clean
    return out


def record_spans(
    records: Sequence[Record],
    spans: SpansMode = "rationale",
    *,
    fields: Fields = "both",
    ratio: float = 0.3,
    mean_span: float = 2.0,
    seed: int = 0,
    path: str | None = None,
) -> list[dict[str, list[Span]]]:
    """The spans to mask in each record: its rationales, or seeded random spans (baseline)."""
    if spans == "rationale":
        return [read_spans(r, path=path) for r in records]
    if spans != "random":
        raise ConfigError(f"unknown spans {spans!r}; expected rationale or random")
    rng = np.random.default_rng(seed)
    return [
        random_rationales(r, fields=fields, density=ratio, mean_span=mean_span, rng=rng)
        for r in records
    ]


def extract_rationales(
    clf: Any,
    records: Sequence[Record],
    settings: RationaleSettings | None = None,
    *,
    progress: bool = False,
    **overrides: Any,
) -> tuple[list[Record], list[Record]]:
    """Rationale records (kept) and dropped records (``meta.dropped_by`` and ``dropped_reason``).

    ``settings`` (:class:`RationaleSettings`; keywords override its fields). A record is
    dropped when the classifier mispredicts it (``mispredicted``, with ``require_correct``),
    when ``p(gold) <= min_confidence`` (``low-confidence``), or when no word passes
    ``min_score`` (``no-rationale``). ``clf`` may be given as a classifier folder (loaded here).
    """
    from zdebias.counterfactual.saliency import compute_saliency, input_fields

    if isinstance(clf, str | Path):
        from zdebias.classify.predict import load_classifier

        clf = load_classifier(clf)

    cfg = RationaleSettings.of(settings, **overrides)
    method, ratio, min_score = cfg.method, cfg.ratio, cfg.min_score
    min_confidence, fields = cfg.min_confidence, cfg.fields
    seen = set(input_fields(records[0], clf.input)) if records else set()
    for r in records[:1]:
        missing = [f for f in candidate_fields(r, fields) if f not in seen]
        if missing:
            raise ConfigError(
                f"the classifier (input={clf.input}) does not see {', '.join(missing)}; "
                f"choose --fields among {', '.join(sorted(seen))}"
            )
    sal = compute_saliency(
        clf,
        records,
        method=method,
        target=cfg.target,
        normalize=cfg.normalize,
        batch_size=cfg.batch_size,
        progress=progress,
    )
    kept: list[Record] = []
    dropped: list[Record] = []
    for record, ex in zip(records, sal, strict=True):
        meta: dict[str, Any] = {
            "classifier_prob": round(ex.gold_prob, 6),
            "classifier_label": clf.labels[ex.pred],
        }
        code = reason = None
        if cfg.require_correct and ex.pred != ex.gold:
            code = "mispredicted"
            reason = f"mispredicted as {clf.labels[ex.pred]} (p={ex.probs[ex.pred]:.3f})"
        elif ex.gold_prob <= min_confidence:
            code = "low-confidence"
            reason = f"p({record.label})={ex.gold_prob:.3f} <= {min_confidence}"
        names = candidate_fields(record, fields)
        words = {n: [(w.start, w.end, w.score) for w in ex.words[n]] for n in names}
        spans = pick_rationales(words, ratio=ratio, min_score=min_score)
        if reason is None and not any(spans.values()):
            code, reason = "no-rationale", f"no word with saliency >= {min_score}"
        meta["saliency"] = {n: [[w.text, round(w.score, 4)] for w in ex.words[n]] for n in names}
        if reason is not None:
            meta["dropped_by"] = code
            meta["dropped_reason"] = reason
            dropped.append(record.replace(meta={**record.meta, **meta}))
            continue
        meta["rationales"] = {n: [list(s) for s in spans[n]] for n in names}
        meta["rationale_text"] = {n: [getattr(record, n)[s:e] for s, e in spans[n]] for n in names}
        meta["saliency_method"] = method
        kept.append(record.replace(meta={**record.meta, **meta}))
    return kept, dropped


#: why ``extract_rationales`` drops a record (``meta.dropped_by``)
DROP_CODES = ("mispredicted", "low-confidence", "no-rationale")


def rationale_summary(
    kept: Sequence[Record],
    dropped: Sequence[Record],
    settings: RationaleSettings,
    *,
    n_input: int,
    read: Any = None,
) -> dict[str, Any]:
    """The summary of an :func:`extract_rationales` run over ``n_input`` records: skipped rows
    (``read``: the reader's report), kept, dropped by reason, mean spans and rationale words
    per kept record, and the settings that matter."""
    n_spans = sum(len(v) for r in kept for v in r.meta["rationales"].values())
    n_words = sum(
        len(s.split()) for r in kept for v in r.meta["rationale_text"].values() for s in v
    )
    return {
        "n_input": n_input,
        "n_skipped_unlabelled": read.n_unlabelled if read is not None else 0,
        "n_skipped_errors": read.n_errors if read is not None else 0,
        "n_kept": len(kept),
        "n_dropped": len(dropped),
        "dropped_by": {c: sum(r.meta["dropped_by"] == c for r in dropped) for c in DROP_CODES},
        "mean_spans": round(n_spans / len(kept), 3) if kept else 0.0,
        "mean_rationale_words": round(n_words / len(kept), 3) if kept else 0.0,
        **settings.model_dump(exclude={"batch_size", "require_correct"}),
    }
