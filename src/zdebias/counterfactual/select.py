"""Generate counterfactuals and post-select them with the classifier (AutoCAD §3.3,
docs/design.md §10.3-4).

For each example and a target label other than its own (``targets="one"``, the default and
AutoCAD's: one seeded random other label, :func:`target_labels`; ``"all"``: every other label),
the infiller samples fillers for the example's spans (rationales, or random spans for the
baseline) with nucleus sampling (p = 0.9, temperature 0.7, ``n`` samples); the example is
rebuilt with the fillers and kept only if the classifier predicts the target label.

Every output is accounted for. Rejected outputs carry ``meta.rejected_by``:

- ``truncated``: a span lies beyond the infiller's ``max_source_length`` (nothing generated);
- ``malformed``: the generated text does not parse into one filler per span;
- ``empty``: a rebuilt field is empty (the record keeps the source's texts, so it reads back);
- ``unchanged``: the rebuilt example equals the original;
- ``duplicate``: the same rebuilt example was already produced for this source and target;
- ``classifier``: the classifier does not predict the target label (or below ``min_prob``).

Decoding is constrained by default (:class:`SentinelConstraint`): the output must start with
``<extra_id_0>``, sentinels come in order, each filler has at most ``max_filler_tokens``
tokens and EOS comes after the last filler, so every sample parses. ``constrained=False`` leaves
the model free (malformed outputs are then counted). Label words are banned inside fillers, as in
the AutoCAD code.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from zdebias.counterfactual.format import (
    encode_source,
    eos_id,
    mask_record,
    rebuild,
    sentinel_ids,
    source_text,
    special_ids,
)
from zdebias.counterfactual.model import LoadedInfiller, load_infiller
from zdebias.counterfactual.rationales import record_spans
from zdebias.counterfactual.settings import SelectSettings
from zdebias.data.schema import Record
from zdebias.errors import ConfigError

_PLACEHOLDER = re.compile(r"^\[unused\d+\]$")
REJECT_REASONS = ("truncated", "malformed", "empty", "unchanged", "duplicate", "classifier")


class SentinelConstraint:
    """A logits processor that forces the ``<extra_id_0> f0 <extra_id_1> f1 ... EOS`` shape.

    ``n_spans[r]`` is the number of spans of row ``r`` (rows as ``generate`` expands them);
    tokens before ``prompt_len`` (decoder start, or a causal prompt) are not counted.
    """

    def __init__(
        self,
        *,
        sentinels: Sequence[int],
        n_spans: Sequence[int],
        eos: int,
        banned: Sequence[int],
        prompt_len: int,
        max_filler_tokens: int,
    ) -> None:
        import torch

        self.sentinels = list(sentinels)
        self.sent_t = torch.tensor(self.sentinels, dtype=torch.long)
        self.n_spans = list(n_spans)
        self.eos = eos
        self.banned = torch.tensor(sorted(set(banned) | set(sentinels) | {eos}), dtype=torch.long)
        self.prompt_len = prompt_len
        self.max_filler = max_filler_tokens

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        gen = input_ids[:, self.prompt_len :]
        is_sent = torch.isin(gen, self.sent_t.to(gen.device))
        counts = is_sent.sum(dim=1).tolist()
        length = gen.shape[1]
        if length:
            pos = torch.arange(length, device=gen.device).expand_as(gen)
            last = torch.where(is_sent, pos, torch.full_like(pos, -1)).max(dim=1).values.tolist()
        else:
            last = [-1] * gen.shape[0]
        out = scores.clone()
        out[:, self.banned.to(out.device)] = -float("inf")
        for r in range(scores.shape[0]):
            c, k = counts[r], self.n_spans[r]
            filler_len = length - 1 - last[r]
            if c == 0:
                forced = self.sentinels[0]
            elif filler_len >= self.max_filler:
                forced = self.sentinels[c] if c < k else self.eos
            else:
                allow = self.sentinels[c] if c < k else self.eos
                out[r, allow] = scores[r, allow]
                if bool(torch.isinf(out[r]).all()):
                    forced = allow
                else:
                    continue
            out[r] = -float("inf")
            out[r, forced] = 0.0
        return out


def parse_fillers(
    ids: Sequence[int],
    *,
    tokenizer: Any,
    n_spans: int,
    sentinels: Sequence[int],
    eos: int,
) -> list[str] | str:
    """Fillers from generated ids (after any prompt / decoder start), or why they don't parse.

    Expects ``<extra_id_0> f0 <extra_id_1> f1 ... [<extra_id_k>] EOS``; text after EOS and
    pad tokens is ignored.
    """
    sent_index = {tid: i for i, tid in enumerate(sentinels)}
    pad = tokenizer.pad_token_id
    seq: list[int] = []
    for t in ids:
        if t == eos:
            break
        if t == pad and not seq:
            continue  # decoder start or left padding
        seq.append(int(t))
    segments: list[list[int]] = []
    expected = 0
    for t in seq:
        if t in sent_index:
            i = sent_index[t]
            if i == n_spans and expected == n_spans:
                break  # T5 habit: a closing sentinel
            if i != expected:
                return f"sentinel {i} where {expected} was expected"
            segments.append([])
            expected += 1
        elif not segments:
            return "text before the first sentinel"
        else:
            segments[-1].append(t)
    if len(segments) != n_spans:
        return f"{len(segments)} fillers for {n_spans} spans"
    return [tokenizer.decode(seg, skip_special_tokens=True).strip() for seg in segments]


def _placeholder_ids(tokenizer: Any) -> set[int]:
    """Vocabulary slots that are no text (BERT's ``[unused17]``), never worth sampling."""
    return {i for t, i in tokenizer.get_vocab().items() if _PLACEHOLDER.match(t)}


def _bad_words(tokenizer: Any, words: Sequence[str]) -> list[list[int]]:
    specials = special_ids(tokenizer)
    out: list[list[int]] = []
    for word in words:
        for variant in (word, " " + word, word.capitalize(), " " + word.capitalize()):
            ids = tokenizer(variant, add_special_tokens=False)["input_ids"]
            ids = [i for i in ids if i not in specials]
            if ids and ids not in out:
                out.append(ids)
    return out


def sample_fillers(
    infiller: LoadedInfiller,
    sources: Sequence[Sequence[int]],
    n_spans: Sequence[int],
    *,
    n: int = 1,
    top_p: float = 0.9,
    temperature: float = 0.7,
    max_filler_tokens: int = 8,
    constrained: bool = True,
    ban_words: Sequence[str] = (),
    batch_size: int = 16,
    seed: int = 0,
    progress: bool = False,
) -> list[list[list[str] | str]]:
    """For each encoded source (see ``encode_source``), ``n`` sampled filler lists.

    A sample that does not parse is given as the reason string instead.
    """
    import torch
    from transformers import LogitsProcessorList

    tok, model = infiller.tokenizer, infiller.model
    sentinels = sentinel_ids(tok)
    eos = eos_id(tok)
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos
    banned = sorted((special_ids(tok) | _placeholder_ids(tok)) - {eos} - set(sentinels))
    bad_words = _bad_words(tok, ban_words) or None
    causal = infiller.arch == "causal"
    torch.manual_seed(seed)
    results: list[list[list[str] | str]] = []
    starts: Any = range(0, len(sources), batch_size)
    if progress:
        from zdebias.data.progress import track

        starts = track(starts, description="generating", total=len(starts))
    for start in starts:
        batch = [list(ids) for ids in sources[start : start + batch_size]]
        spans = list(n_spans[start : start + batch_size])
        width = max(len(ids) for ids in batch)
        if causal:  # left padding: every prompt ends where generation starts
            input_ids = [[pad] * (width - len(ids)) + ids for ids in batch]
            mask = [[0] * (width - len(ids)) + [1] * len(ids) for ids in batch]
            prompt_len = width
        else:
            input_ids = [ids + [pad] * (width - len(ids)) for ids in batch]
            mask = [[1] * len(ids) + [0] * (width - len(ids)) for ids in batch]
            prompt_len = 1
        enc = {
            "input_ids": torch.tensor(input_ids, device=infiller.device),
            "attention_mask": torch.tensor(mask, device=infiller.device),
        }
        max_new = (
            max(spans) * (max_filler_tokens + 1) + 1
            if constrained
            else int(infiller.info.get("max_target_length", 64))
        )
        processors = LogitsProcessorList()
        if constrained:
            processors.append(
                SentinelConstraint(
                    sentinels=sentinels,
                    n_spans=[k for k in spans for _ in range(n)],
                    eos=eos,
                    banned=banned,
                    prompt_len=prompt_len,
                    max_filler_tokens=max_filler_tokens,
                )
            )
        with torch.inference_mode():
            gen = model.generate(
                **enc,
                do_sample=True,
                top_p=top_p,
                temperature=temperature,
                top_k=0,
                num_return_sequences=n,
                max_new_tokens=max_new,
                logits_processor=processors,
                bad_words_ids=bad_words,
                pad_token_id=pad,
                eos_token_id=eos,
            )
        gen = gen[:, prompt_len:].tolist()
        for i, k in enumerate(spans):
            results.append(
                [
                    parse_fillers(
                        gen[i * n + j], tokenizer=tok, n_spans=k, sentinels=sentinels, eos=eos
                    )
                    for j in range(n)
                ]
            )
    return results


def post_select(
    candidates: Sequence[Record],
    probs: np.ndarray,
    labels: Sequence[str],
    *,
    min_prob: float = 0.0,
) -> tuple[list[Record], list[Record]]:
    """Keep candidates whose classifier argmax is their (target) label with ``p >= min_prob``.

    ``probs[i]`` is the classifier distribution for ``candidates[i]`` in ``labels`` order. Every
    candidate gets ``meta.classifier_label`` and ``meta.classifier_probs``; rejected ones get
    ``meta.rejected_by = "classifier"`` and a ``meta.reason``.
    """
    kept: list[Record] = []
    rejected: list[Record] = []
    for record, p in zip(candidates, probs, strict=True):
        pred = int(np.argmax(p))
        target = labels.index(record.label)
        meta = {**record.meta, **classifier_info(p, labels)}
        if pred != target:
            meta["rejected_by"] = "classifier"
            meta["reason"] = (
                f"classifier predicts {labels[pred]} (p={p[pred]:.3f}), not {record.label} "
                f"(p={p[target]:.3f})"
            )
            rejected.append(record.replace(meta=meta))
        elif p[target] < min_prob:
            meta["rejected_by"] = "classifier"
            meta["reason"] = f"p({record.label})={p[target]:.3f} < {min_prob}"
            rejected.append(record.replace(meta=meta))
        else:
            kept.append(record.replace(meta=meta))
    return kept, rejected


def classifier_info(probs: np.ndarray, labels: Sequence[str]) -> dict[str, Any]:
    """``meta.classifier_label`` and ``meta.classifier_probs`` of a record the classifier gave
    the distribution ``probs`` (in ``labels`` order)."""
    return {
        "classifier_label": labels[int(np.argmax(probs))],
        "classifier_probs": {lab: round(float(v), 6) for lab, v in zip(labels, probs, strict=True)},
    }


def screen(
    records: Sequence[Record],
    probs: np.ndarray,
    labels: Sequence[str],
    *,
    flaw: Callable[[Record], Record | None],
    duplicate: str,
    min_prob: float = 0.0,
) -> tuple[list[Record], list[Record]]:
    """Post-selection of parsed counterfactuals (``probs[i]``: the classifier's distribution
    for ``records[i]``, in ``labels`` order): ``(kept, rejected)``.

    Each record, its meta given the classifier's label and probabilities, is rejected if
    ``flaw`` returns it rejected, or (reason ``duplicate``) if it repeats an earlier one of
    the same source and target; the others go through :func:`post_select`.
    """
    candidates: list[Record] = []
    candidate_probs: list[np.ndarray] = []
    rejected: list[Record] = []
    seen: set[tuple[Any, ...]] = set()
    for record, p in zip(records, probs, strict=True):
        judged = record.replace(meta={**record.meta, **classifier_info(p, labels)})
        key = (record.meta["source_id"], record.label, *_key(record))
        flawed = flaw(judged)
        if flawed is not None:
            rejected.append(flawed)
        elif key in seen:
            rejected.append(_reject(judged, "duplicate", duplicate))
        else:
            seen.add(key)
            candidates.append(record)
            candidate_probs.append(p)
    array = np.array(candidate_probs).reshape(-1, len(labels))
    kept, not_target = post_select(candidates, array, labels, min_prob=min_prob)
    return kept, rejected + not_target


def counterfactual_record(source: Record, target: str, sample: int, meta: dict[str, Any]) -> Record:
    """Counterfactual ``sample`` of ``source`` for the ``target`` label, its texts still the
    source's (to be edited): id ``SOURCE:cf:TARGET:SAMPLE``; ``meta`` between what it is
    (type, source id, original and target label) and the sample number."""
    head = {"type": "counterfactual", "source_id": source.id, "original_label": source.label}
    return Record(
        id=f"{source.id}:cf:{target}:{sample}",
        label=target,
        premise=source.premise,
        hypothesis=source.hypothesis,
        text=source.text,
        meta={**head, "target_label": target, **meta, "sample": sample},
    )


def _reject(record: Record, code: str, reason: str) -> Record:
    return record.replace(meta={**record.meta, "rejected_by": code, "reason": reason})


def target_labels(record: Record, labels: Sequence[str], targets: str, seed: int) -> list[str]:
    """The labels to rewrite ``record`` into: every other label (``all``, in label order), or
    one of them (``one``): ``others[crc32(f"{seed}:{record.id}") % len(others)]``, a seeded
    choice that depends only on the record's id (not on its position or batch)."""
    import zlib

    others = [lab for lab in labels if lab != record.label]
    if targets == "all" or not others:
        return others
    if targets != "one":
        raise ConfigError(f"targets must be 'one' or 'all', not {targets!r}")
    return [others[zlib.crc32(f"{seed}:{record.id}".encode()) % len(others)]]


def _key(record: Record) -> tuple[str | None, ...]:
    return (record.premise, record.hypothesis, record.text)


def generate_counterfactuals(
    infiller: LoadedInfiller | str | Path,
    classifier: Any,
    records: Sequence[Record],
    settings: SelectSettings | None = None,
    *,
    max_source_length: int | None = None,
    path: str | None = None,
    progress: bool = False,
    **overrides: Any,
) -> tuple[list[Record], list[Record], dict[str, Any]]:
    """Counterfactuals for each record and its target labels: ``(kept, rejected, summary)``.

    ``settings`` (:class:`SelectSettings`; keywords override its fields, e.g. ``n=3``).
    ``max_source_length``: default, the infiller's own (from its training). ``infiller`` and
    ``classifier`` may be given as folders (loaded here).
    """
    from zdebias.classify.predict import load_classifier, predict_proba

    if isinstance(infiller, str | Path):
        infiller = load_infiller(infiller)
    if isinstance(classifier, str | Path):
        classifier = load_classifier(classifier)

    labels = list(infiller.labels or classifier.labels)
    missing = [lab for lab in labels if lab not in classifier.labels]
    if missing:
        raise ConfigError(
            f"infiller labels {missing} are not labels of the classifier ({classifier.labels})"
        )
    cfg = SelectSettings.of(settings, **overrides)
    spans, n, seed = cfg.spans, cfg.n, cfg.seed
    if max_source_length is None:
        max_source_length = int(infiller.info.get("max_source_length", 256))
    all_spans = record_spans(
        records,
        spans,
        fields=cfg.fields,
        ratio=cfg.ratio,
        mean_span=cfg.mean_span,
        seed=seed,
        path=path,
    )
    jobs: list[
        tuple[Record, dict[str, list[tuple[int, int]]], str, list[int] | None, list[str]]
    ] = []
    n_without_spans = 0
    for record, sp in zip(records, all_spans, strict=True):
        masked, fillers = mask_record(record, sp)
        if not fillers:
            n_without_spans += 1
            continue
        for target in target_labels(record, labels, cfg.targets, seed):
            ids = encode_source(
                infiller.tokenizer,
                infiller.arch,
                source_text(target, masked),
                len(fillers),
                max_length=max_source_length,
            )
            jobs.append((record, sp, target, ids, fillers))
    todo = [j for j in jobs if j[3] is not None]
    samples = iter(
        sample_fillers(
            infiller,
            [j[3] for j in todo if j[3] is not None],  # all of them
            [len(j[4]) for j in todo],
            n=n,
            top_p=cfg.top_p,
            temperature=cfg.temperature,
            max_filler_tokens=cfg.max_filler_tokens,
            constrained=cfg.constrained,
            ban_words=labels if cfg.ban_label_words else (),
            batch_size=cfg.batch_size,
            seed=seed,
            progress=progress,
        )
    )
    parsed: list[Record] = []
    rejected: list[Record] = []
    for record, sp, target, ids, orig_fillers in jobs:
        outs: list[list[str] | str] = (
            next(samples)
            if ids is not None
            else ["truncated: a span lies beyond max_source_length"] * n
        )
        for j, out in enumerate(outs):
            offsets = {k: [list(s) for s in v] for k, v in sp.items()}
            meta = {"spans": spans, "span_offsets": offsets, "original_fillers": orig_fillers}
            base = counterfactual_record(record, target, j, meta)
            if isinstance(out, str):
                code = "truncated" if ids is None else "malformed"
                rejected.append(_reject(base, code, out))
                continue
            base.meta["fillers"] = out
            parsed.append(rebuild(base, sp, out))
    probs = (
        predict_proba(classifier, parsed, progress=progress)
        if parsed
        else np.zeros((0, len(classifier.labels)))
    )
    originals = {r.id: _key(r) for r in records}
    sources = {r.id: r for r in records}

    def flaw(record: Record) -> Record | None:
        source_id = record.meta["source_id"]
        if any(not v.strip() for v in _key(record) if v is not None):
            # an empty field is no record: keep the source's texts, as for truncated and
            # malformed outputs (the fillers are in meta), so the file reads back
            src = sources[source_id]
            restored = record.replace(premise=src.premise, hypothesis=src.hypothesis, text=src.text)
            return _reject(restored, "empty", "a rebuilt field is empty")
        if _key(record) == originals[source_id]:
            return _reject(record, "unchanged", "the fillers reproduce the original text")
        return None

    duplicate = "same counterfactual as an earlier sample"
    kept, rej = screen(
        parsed, probs, classifier.labels, flaw=flaw, duplicate=duplicate, min_prob=cfg.min_prob
    )
    rejected.extend(rej)
    order = {f"{r.id}:cf:{t}:{j}": i for i, (r, _, t, _, _) in enumerate(jobs) for j in range(n)}
    rejected.sort(key=lambda r: order[r.id])
    reasons = Counter(r.meta["rejected_by"] for r in rejected)
    flips = sum(
        int(classifier.labels[int(np.argmax(p))] == r.label)
        for r, p in zip(parsed, probs, strict=True)
    )
    summary = {
        "n_records": len(records),
        "n_records_without_spans": n_without_spans,
        "n_targets": len(jobs),
        "n_outputs": len(jobs) * n,
        "n_parsed": len(parsed),
        "n_kept": len(kept),
        "n_rejected": len(rejected),
        "rejected_by": {r: reasons.get(r, 0) for r in REJECT_REASONS},
        "flip_rate": round(flips / len(parsed), 6) if parsed else None,
        "keep_rate": round(len(kept) / (len(jobs) * n), 6) if jobs else None,
        "spans": spans,
        "targets": cfg.targets,
        "n": n,
        "top_p": cfg.top_p,
        "temperature": cfg.temperature,
        "constrained": cfg.constrained,
        "seed": seed,
    }
    return kept, rejected, summary
