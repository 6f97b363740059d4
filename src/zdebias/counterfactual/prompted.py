"""Prompted counterfactuals: an instruction model makes the minimal edit (an alternative to
AutoCAD's trained infiller, docs/design.md §10).

For each example and target label (:func:`~zdebias.counterfactual.select.target_labels`, as
AutoCAD), the model is shown the example, its label, the words that decide it (its rationale
spans, or random spans for the baseline) and asked to rewrite the editable field(s) with a
minimal edit so that the target label holds. Each answer is parsed strictly; the edited example
then goes through AutoCAD's post-selection (:func:`~zdebias.counterfactual.select.post_select`:
the classifier must predict the target label), and its records have the shape of ``zdebias
counterfactual generate``'s, so ``zdebias counterfactual metrics`` (flip rate, distinct-n,
perplexity) reads them. ``meta.fillers`` holds the words the edit brought in and
``meta.edit_distance`` the word-level Levenshtein distance to the original.

Rejected outputs carry ``meta.rejected_by``: ``request_failed``, ``bad_response``,
``over_length``, ``empty``, ``malformed``, ``label_echo`` (as for prompted sampling),
``unchanged``, ``duplicate`` and ``classifier``.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zdebias.counterfactual.rationales import record_spans
from zdebias.counterfactual.select import counterfactual_record, screen, target_labels
from zdebias.counterfactual.settings import PromptCounterfactualSettings
from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.generation.prompted import LABEL_ASKS, PROMPT_BACKENDS, parse_answer, request_seed
from zdebias.generation.rounds import round_seed
from zdebias.generation.settings import ClientSettings, SampleSettings

SYSTEM = (
    "You edit examples of a natural language inference dataset. Make the smallest change "
    "that gives the example the relation asked for, keep everything else as it is, and "
    "answer in the format asked for, with nothing else."
)
_WORD = re.compile(r"\w+(?:'\w+)?|[^\w\s]")


def _ask(label: str) -> str:
    return LABEL_ASKS.get(label, f"labelled {label!r}")


@dataclass
class EditRequest:
    """One request: an example, the fields to edit, its decisive words, a target label."""

    record: Record
    fields: list[str]
    words: list[str]
    target: str
    seed: int

    @property
    def stop(self) -> list[str]:
        return ["\n\n"] if len(self.fields) > 1 else ["\n"]

    def _body(self) -> str:
        r = self.record
        lines = (
            [f"Premise: {r.premise}", f"Hypothesis: {r.hypothesis}"]
            if r.is_pair
            else [f"Text: {r.text}"]
        )
        now = f"The hypothesis is {_ask(r.label)}." if r.is_pair else f"The text is {r.label}."
        lines.append(now)
        if self.words:
            lines.append("The words that decide this: " + ", ".join(f'"{w}"' for w in self.words))
        if r.is_pair:
            which = " and the ".join(self.fields)
            lines.append(
                f"Rewrite the {which} with a minimal edit, changing mainly those words, so that "
                f"the hypothesis is {_ask(self.target)}."
            )
        else:
            lines.append(f"Rewrite the text with a minimal edit so that it is {self.target}.")
        if len(self.fields) > 1:
            lines.append("Answer in two lines: 'Premise: ...' then 'Hypothesis: ...'.")
        else:
            lines.append(f"Answer with the new {self.fields[0]} only.")
        return "\n".join(lines)

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": self._body()}]

    def text(self) -> str:
        head = f"{self._body()}\n\n"
        return head + ("Premise:" if len(self.fields) > 1 else f"New {self.fields[0]}:")


def word_edit_distance(a: str, b: str) -> int:
    """Levenshtein distance between the word (and punctuation) tokens of two texts."""
    x, y = _WORD.findall(a.lower()), _WORD.findall(b.lower())
    prev = list(range(len(y) + 1))
    for i, tx in enumerate(x, 1):
        cur = [i]
        for j, ty in enumerate(y, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (tx != ty)))
        prev = cur
    return prev[-1]


def inserted_words(a: str, b: str) -> list[str]:
    """The runs of words ``b`` brings in where it differs from ``a`` (the edit's "fillers")."""
    x, y = a.split(), b.split()
    out = []
    for op, _, _, j1, j2 in difflib.SequenceMatcher(a=x, b=y, autojunk=False).get_opcodes():
        if op in ("replace", "insert"):
            out.append(" ".join(y[j1:j2]))
    return out


def parse_edit(
    text: str | None, req: EditRequest, labels: Sequence[str], finish_reason: str | None
) -> tuple[dict[str, str] | None, str | None]:
    """The edited fields, or ``(None, reason)``: one line per field, strictly."""
    r = req.record
    if len(req.fields) == 1:
        name = req.fields[0]
        original = getattr(r, name) or ""
        prefix = re.compile(rf"^\s*(?:new\s+)?{name}\s*:\s*", re.I)
        parsed = parse_answer(
            prefix.sub("", text or "", count=1),
            "\x00",  # no premise-copy check: an edit is compared with its original below
            req.target,
            labels=labels,
            finish_reason=finish_reason,
        )
        if not parsed.ok:
            return None, parsed.error
        return {name: parsed.hypothesis or original}, None
    if finish_reason == "length":
        return None, "over_length"
    lines = [x.strip() for x in (text or "").strip().splitlines() if x.strip()]
    if not lines:
        return None, "empty"
    if not lines[0].lower().startswith("premise:"):
        lines[0] = "Premise: " + lines[0]  # the completions prompt ends with "Premise:"
    out: dict[str, str] = {}
    if len(lines) != 2:
        return None, "malformed"
    for name, line in zip(("premise", "hypothesis"), lines, strict=True):
        head, sep, rest = line.partition(":")
        if not sep or head.strip().lower() != name:
            return None, "malformed"
        parsed = parse_answer(rest, "\x00", req.target, labels=labels)
        if not parsed.ok:
            return None, parsed.error
        out[name] = parsed.hypothesis or ""
    return out, None


def _editable(record: Record, fields: str) -> list[str]:
    if not record.is_pair:
        return ["text"]
    return ["premise", "hypothesis"] if fields == "both" else [fields]


def prompt_counterfactuals(
    model: str,
    classifier: Any,
    records: Sequence[Record],
    settings: PromptCounterfactualSettings | None = None,
    *,
    progress: bool = False,
    client: ClientSettings | None = None,
    path: str | None = None,
    **overrides: Any,
) -> tuple[list[Record], list[Record], dict[str, Any]]:
    """Counterfactuals by prompting ``model``: ``(kept, rejected, summary)``.

    ``settings``: :class:`PromptCounterfactualSettings` (keywords override its fields);
    ``client``: :class:`~zdebias.generation.settings.ClientSettings` (base URL, key variable,
    endpoint, concurrency, retries, timeout, ``max_tokens``); its fields are keywords too.
    ``classifier``: a classifier folder or a loaded one.
    """
    from zdebias.classify.predict import load_classifier, predict_proba

    if isinstance(classifier, str):
        classifier = load_classifier(classifier)
    client_keys = {k: overrides.pop(k) for k in list(overrides) if k in ClientSettings.model_fields}
    cfg = PromptCounterfactualSettings.of(settings, **overrides)
    client = ClientSettings.of(client, **client_keys)
    labels = list(classifier.labels)
    stray = sorted({r.label for r in records} - set(labels))
    if stray:
        raise ConfigError(f"labels {stray} are not labels of the classifier ({labels})")
    all_spans = record_spans(
        records, cfg.spans, fields=cfg.fields, ratio=cfg.ratio, seed=cfg.seed, path=path
    )
    jobs: list[EditRequest] = []
    for record, spans in zip(records, all_spans, strict=True):
        fields = _editable(record, cfg.fields)
        text_of = {name: getattr(record, name) or "" for name in ("premise", "hypothesis", "text")}
        words = [text_of[f][a:b] for f, sp in spans.items() for a, b in sp]
        for target in target_labels(record, labels, cfg.targets, cfg.seed):
            for _ in range(cfg.n):
                seed = request_seed(cfg.seed, len(jobs), 0)
                jobs.append(EditRequest(record, fields, words, target, seed))
    sampling = SampleSettings(
        n=1,
        backend=cfg.backend,
        top_p=cfg.top_p,
        temperature=cfg.temperature,
        seed=cfg.seed,
        batch_size=cfg.batch_size,
    )
    engine = PROMPT_BACKENDS[cfg.backend](model, sampling, client) if jobs else None
    answers = []
    try:
        for start in range(0, len(jobs), cfg.batch_size):
            chunk = jobs[start : start + cfg.batch_size]
            assert engine is not None  # made when there are jobs
            answers.extend(engine.run(chunk, round_seed(cfg.seed, start // cfg.batch_size)))
    finally:
        if engine is not None:
            engine.close()

    rejected: list[Record] = []
    parsed: list[Record] = []
    sample_no: Counter[tuple[str, str]] = Counter()
    usage: Counter[str] = Counter()
    order: dict[str, int] = {}
    for i, (req, ans) in enumerate(zip(jobs, answers, strict=True)):
        r = req.record
        j = sample_no[(r.id, req.target)]
        sample_no[(r.id, req.target)] += 1
        usage["requests"] += 1
        usage["retries"] += max(0, ans.attempts - 1)
        usage["prompt_tokens"] += ans.prompt_tokens or 0
        usage["completion_tokens"] += ans.completion_tokens or 0
        meta = {
            "spans": cfg.spans,
            "rationale_words": req.words,
            "backend": cfg.backend,
            "generator": model,
        }
        base = counterfactual_record(r, req.target, j, meta)
        order[base.id] = i
        if ans.error is not None:
            usage["failed_requests"] += 1
            code = "bad_response" if ans.error.startswith("bad_response") else "request_failed"
            rejected.append(_unparsed(base, code, ans.error))
            continue
        edited, reason = parse_edit(ans.text, req, labels, ans.finish_reason)
        if edited is None:
            rejected.append(_unparsed(base, reason or "malformed", repr(ans.text)[:200]))
            continue
        new = base.replace(**edited)
        before = " ".join(getattr(r, f) or "" for f in req.fields)
        after = " ".join(getattr(new, f) or "" for f in req.fields)
        new.meta["fillers"] = inserted_words(before, after)
        new.meta["edit_distance"] = word_edit_distance(before, after)
        parsed.append(new)
    # every parsed edit is classified (as AutoCAD's outputs are), then selected
    probs = (
        predict_proba(classifier, parsed, progress=progress)
        if parsed
        else np.zeros((0, len(labels)))
    )

    def unchanged(new: Record) -> Record | None:
        if new.meta["edit_distance"] == 0:
            return _reject(new, "unchanged", "repeats the original")
        return None

    kept, rej = screen(
        parsed, probs, labels, flaw=unchanged, duplicate="an earlier answer", min_prob=cfg.min_prob
    )
    candidates = kept + [x for x in rej if x.meta["rejected_by"] == "classifier"]
    rejected.extend(rej)
    rejected.sort(key=lambda x: order[x.id])
    distances = [x.meta["edit_distance"] for x in candidates]
    flips = sum(x.meta["classifier_label"] == x.label for x in candidates)
    summary = {
        "generator": model,
        "backend": cfg.backend,
        "n_records": len(records),
        "n_outputs": len(jobs),
        "n_candidates": len(candidates),
        "n_kept": len(kept),
        "n_rejected": len(rejected),
        "rejected_by": dict(
            Counter(x.meta.get("parse_error", x.meta["rejected_by"]) for x in rejected)
        ),
        "flip_rate": round(flips / len(candidates), 6) if candidates else None,
        "mean_edit_distance": round(float(np.mean(distances)), 4) if distances else None,
        "usage": {
            k: usage[k]
            for k in (
                "requests",
                "failed_requests",
                "retries",
                "prompt_tokens",
                "completion_tokens",
            )
        },
    }
    return kept, rejected, summary


def _reject(record: Record, code: str, reason: str) -> Record:
    return record.replace(meta={**record.meta, "rejected_by": code, "reason": reason})


def _unparsed(record: Record, error: str, reason: str) -> Record:
    """An answer that gave no edit: ``rejected_by = "malformed"`` (what the metrics leave out,
    as for AutoCAD's outputs), ``parse_error`` says why."""
    return record.replace(
        meta={**record.meta, "rejected_by": "malformed", "parse_error": error, "reason": reason}
    )


__all__ = [
    "EditRequest",
    "inserted_words",
    "parse_edit",
    "prompt_counterfactuals",
    "word_edit_distance",
]
