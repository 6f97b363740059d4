"""The sampling loop every backend shares (docs/design.md §6): rounds → candidates → unique
records → shards and ``state.json`` (:mod:`zdebias.generation.store`).

Sampling runs in *rounds*: round r draws ``batch_size`` outputs with the random seed derived
from (``seed``, r) (:func:`round_seed`). A backend turns a round into candidates, each parsed
back into (premise, label, hypothesis) (:func:`zdebias.generation.format.parse_output`);
malformed ones are dropped and counted by reason, duplicates (same label and case/space-
normalised texts, across the whole run) too. Accepted samples fill a buffer; once it holds
``shard_size`` samples (whole rounds), it is written as ``shard-NNNNN.jsonl`` and then
``state.json`` records the shard, the next round and the counts. The last shard is cut so the
run ends with exactly ``n`` unique samples (the cut-off ones are counted as ``n_surplus``, so
``n_generated`` = written + malformed + duplicates + surplus).

A killed run restarts from ``state.json``: the samples of the shards it lists are the
de-duplication set, sampling continues at the recorded round, and a shard file written after
the last state update is simply written again, with the same content (rounds are seeded). So a
resumed run ends with the same ``n`` samples, ids and counts as an uninterrupted one where
generation is deterministic (CPU; most GPU kernels); where it is not, a redone round may
differ, but no sample is ever lost or duplicated and the run still ends with exactly ``n``.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from zdebias.data.schema import Record
from zdebias.data.writers import write_json
from zdebias.errors import ZdebiasError
from zdebias.generation.format import ParsedSample, sample_key
from zdebias.generation.settings import SampleSettings
from zdebias.generation.store import STATE, SUMMARY, RunFolder, key_hash, write_merged, write_shard


def round_seed(seed: int, round_index: int) -> int:
    """The seed of one sampling round (independent of batch history and of restarts)."""
    digest = hashlib.blake2b(f"{seed}:{round_index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & (2**63 - 1)


@dataclass
class Candidate:
    """One output of a sampling round: parsed (``parsed.error`` names why it is dropped), the
    raw text for ``dropped-*.jsonl``, and extra ``meta`` for its record."""

    parsed: ParsedSample
    text: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class RoundOutput:
    """What a backend gives for one round: candidates and, for the prompted backends, one log
    row per request (token usage, attempts, seconds, error). ``last``: the producer has no
    round after this one (a fixed plan of rows, e.g. targeted cells): the run ends with what
    it has, complete even below ``n``."""

    candidates: list[Candidate]
    requests: list[dict[str, Any]] = field(default_factory=list)
    last: bool = False


#: one round: ``(round_index, labels still needed or None) -> RoundOutput``
Producer = Callable[[int, "dict[str, int] | None"], RoundOutput]

#: the per-request counters ``state.json`` and the summary add up
USAGE_KEYS = ("requests", "failed_requests", "retries", "prompt_tokens", "completion_tokens")


class Goal(Protocol):
    """When worker ``index`` of ``workers`` stops
    (:class:`~zdebias.generation.workers.WorkerGoal`): the worker runs every ``workers``-th
    round and keeps whole rounds."""

    index: int
    workers: int

    def finished(self, state: dict[str, Any]) -> bool:
        """Whether the worker is done (checked each round)."""
        ...

    def may_stop(self, state: dict[str, Any], buffered: int, next_round: int) -> bool:
        """Whether to write the buffer now and check :meth:`finished` again."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the worker's summary adds."""
        ...


def label_quota(n: int, labels: Sequence[str]) -> dict[str, int]:
    """Balanced label counts for ``n`` samples: ``n // L`` each, the first ``n % L`` one more."""
    k, extra = divmod(n, len(labels))
    return {lab: k + (1 if i < extra else 0) for i, lab in enumerate(labels)}


def run_rounds(
    run: RunFolder,
    cfg: SampleSettings,
    produce: Producer,
    make_record: Callable[[Candidate, int, int], Record],
    *,
    progress: bool,
    quota: dict[str, int] | None = None,
    hint: str = "",
    goal: Goal | None = None,
    tally: Callable[[Candidate], str | None] | None = None,
) -> dict[str, Any]:
    """The sampling loop (see the module doc) on the opened ``run``; returns the summary.
    ``quota``: the number of samples wanted per label (labels balanced); a sample of a label
    whose quota is met is surplus. ``goal``: one worker of several
    (:mod:`zdebias.generation.workers`): it runs every N-th round, keeps whole rounds and
    stops when the goal says. ``tally``: the group a candidate counts in (e.g. its cell):
    ``state.json``'s ``tally`` (and the summary's) holds per group the candidates
    ``generated`` and their fates (``written``, ``duplicate``, ``surplus`` or the malformed
    reason)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    out, state, seen = run.out, run.state, run.seen
    n = cfg.n
    buffer: list[Record] = []
    dropped: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []
    counts = {"n_generated": 0, "n_duplicates": 0, "n_surplus": 0}
    usage = dict.fromkeys(USAGE_KEYS, 0)
    malformed: dict[str, int] = {}
    tallied: dict[str, Counter[str]] = {}
    round_index = state["next_round"]
    step = goal.workers if goal is not None else 1
    shards_written = 0
    idle_rounds = 0
    started = time.perf_counter()
    call_generated = call_accepted = 0

    def flush() -> None:
        nonlocal buffer, dropped, requests, shards_written, started
        entry = write_shard(out, len(state["shards"]), buffer, dropped, requests, round_index)
        now = time.perf_counter()
        state["shards"].append(entry)
        state["next_round"] = round_index
        state["n_written"] += len(buffer)
        for key in ("n_generated", "n_duplicates", "n_surplus"):
            state[key] = state.get(key, 0) + counts[key]
        for reason, k in malformed.items():
            state["malformed"][reason] = state["malformed"].get(reason, 0) + k
        if tally is not None:
            total_tally = state.setdefault("tally", {})
            for group, fates in tallied.items():
                total_tally[group] = dict(Counter(total_tally.get(group, {})) + fates)
        if quota is not None:
            per_label = state.setdefault("per_label", {})
            for record in buffer:
                per_label[record.label] = per_label.get(record.label, 0) + 1
        if any(usage.values()):
            total = state.setdefault("usage", dict.fromkeys(USAGE_KEYS, 0))
            for key, v in usage.items():
                total[key] = total.get(key, 0) + v
        state["seconds"] = round(state["seconds"] + now - started, 3)
        write_json(state, out / STATE)
        started = now
        buffer, dropped, requests = [], [], []
        counts.update(n_generated=0, n_duplicates=0, n_surplus=0)
        usage.update(dict.fromkeys(USAGE_KEYS, 0))
        malformed.clear()
        tallied.clear()
        shards_written += 1

    def remaining() -> dict[str, int] | None:
        if quota is None:
            return None
        have = Counter(state.get("per_label", {}))
        have.update(r.label for r in buffer)
        return {lab: q - have[lab] for lab, q in quota.items()}

    columns = (
        TextColumn("[bold]sampling"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(
        *columns, disable=not progress, transient=False, console=Console(stderr=True)
    ) as bar:
        task_id = bar.add_task("sample", total=n, completed=state["n_written"], info="")
        max_shards = cfg.max_shards

        def unfinished() -> bool:
            if state.get("exhausted"):
                return False
            return not goal.finished(state) if goal is not None else state["n_written"] < n

        def count(cand: Candidate, fate: str) -> None:
            group = tally(cand) if tally is not None else None
            if group is not None:
                tallied.setdefault(group, Counter()).update(("generated", fate))

        while unfinished() and (max_shards is None or shards_written < max_shards):
            need = remaining()
            result = produce(round_index, need)
            requests.extend(result.requests)
            for row in result.requests:
                usage["requests"] += 1
                usage["failed_requests"] += int(bool(row.get("error")))
                usage["retries"] += max(0, int(row.get("attempts", 1)) - 1)
                usage["prompt_tokens"] += int(row.get("prompt_tokens") or 0)
                usage["completion_tokens"] += int(row.get("completion_tokens") or 0)
            accepted = 0
            for cand in result.candidates:
                counts["n_generated"] += 1
                parsed = cand.parsed
                if not parsed.ok:
                    reason = parsed.error or "?"
                    malformed[reason] = malformed.get(reason, 0) + 1
                    count(cand, reason)
                    if cfg.keep_dropped:
                        dropped.append({"round": round_index, "reason": reason, "text": cand.text})
                    continue
                key = key_hash(sample_key(parsed))
                if key in seen:
                    counts["n_duplicates"] += 1
                    count(cand, "duplicate")
                    if cfg.keep_dropped:
                        dropped.append(
                            {
                                "round": round_index,
                                "reason": "duplicate",
                                "premise": parsed.premise,
                                "label": parsed.label,
                                "hypothesis": parsed.hypothesis,
                            }
                        )
                    continue
                if need is not None:
                    if need.get(parsed.label or "", 0) <= 0:
                        counts["n_surplus"] += 1  # its label already has its share
                        count(cand, "surplus")
                        continue
                    need[parsed.label or ""] -= 1
                seen.add(key)
                index = state["n_written"] + len(buffer)
                buffer.append(make_record(cand, index, round_index))
                count(cand, "written")
                accepted += 1
            round_index += step
            call_generated += len(result.candidates)
            call_accepted += accepted
            idle_rounds = 0 if accepted else idle_rounds + 1
            if idle_rounds >= (patience := cfg.patience_rounds):
                so_far = dict(Counter(state["malformed"]) + Counter(malformed))
                raise ZdebiasError(
                    f"the generator gave no new well-formed sample in {patience} "
                    f"round{'' if patience == 1 else 's'} "
                    f"(malformed so far: {_nonzero(so_far)}); {hint}".rstrip("; ")
                )
            if goal is not None:  # whole rounds: the merge cuts at n
                if len(buffer) >= cfg.shard_size or goal.may_stop(state, len(buffer), round_index):
                    flush()
            elif state["n_written"] + len(buffer) >= n:
                counts["n_surplus"] += len(buffer[n - state["n_written"] :])
                del buffer[n - state["n_written"] :]
                flush()
            elif result.last:  # the producer's plan is done: the run ends below n
                state["exhausted"] = True
                flush()
            elif len(buffer) >= cfg.shard_size:
                flush()
            done = state["n_written"] + len(buffer)
            bar.update(
                task_id,
                completed=min(done, n),
                info=(
                    f"ok {call_accepted}/{call_generated}  malformed "
                    f"{sum(malformed.values()) + sum(state['malformed'].values())}"
                ),
            )

    complete = (
        goal.finished(state)
        if goal is not None
        else state["n_written"] == n or bool(state.get("exhausted"))
    )
    if complete and cfg.merge and goal is None:
        write_merged(out, state)
    summary = _summary(state, n, complete, out)
    if goal is not None:
        summary.update(goal.describe())
    summary["this_call"] = {
        "generated": call_generated,
        "accepted": call_accepted,
        "shards": shards_written,
    }
    if complete:
        write_json(summary, out / SUMMARY)
    return summary


def _nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


def _summary(state: dict[str, Any], n: int, complete: bool, out: Path) -> dict[str, Any]:
    """A run's summary from its state: counts, shares, speed, token usage, settings."""
    generated = state["n_generated"]
    n_malformed = sum(state["malformed"].values())
    seconds = state["seconds"]
    summary = {
        "out": str(out),
        "generator": state["generator"],
        "n_requested": n,
        "n_written": state["n_written"],
        "complete": complete,
        "n_shards": len(state["shards"]),
        "n_generated": generated,
        "n_malformed": n_malformed,
        "malformed": _nonzero(state["malformed"]),
        "n_duplicates": state["n_duplicates"],
        "n_surplus": state.get("n_surplus", 0),
        "parseable_share": round((generated - n_malformed) / generated, 4) if generated else None,
        "seconds": seconds,
        "generated_per_s": round(generated / seconds, 2) if seconds else None,
        "samples_per_s": round(state["n_written"] / seconds, 2) if seconds else None,
        "settings": state["settings"],
    }
    if "per_label" in state:
        summary["per_label"] = dict(state["per_label"])
    if "tally" in state:
        summary["tally"] = {group: dict(fates) for group, fates in state["tally"].items()}
    if "usage" in state:
        usage = dict(state["usage"])
        answered = usage["requests"] - usage["failed_requests"]
        for key in ("prompt_tokens", "completion_tokens"):
            usage[f"mean_{key}"] = round(usage[key] / answered, 2) if answered else None
        usage["completion_tokens_per_s"] = (
            round(usage["completion_tokens"] / seconds, 2) if seconds else None
        )
        summary["usage"] = usage
    for key in ("backend", "model", "prompting", "premises", "compute"):
        if key in state:
            summary[key] = state[key]
    return summary


__all__ = [
    "USAGE_KEYS",
    "Candidate",
    "Goal",
    "Producer",
    "RoundOutput",
    "label_quota",
    "round_seed",
    "run_rounds",
]
