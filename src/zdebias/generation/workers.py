"""Sampling on many workers: ``zdebias sample --worker I/N``, ``--workers N``, ``sample merge``.

Worker I of N samples the rounds r with r % N == I of a one-process run (the same round
seeds, :func:`~zdebias.generation.rounds.round_seed`) into its own folder
``OUT/worker-I-of-N/``, with its own ``state.json``, shards and resume; workers never write the
same file, and a lock file stops two processes from running the same worker. A worker drops
malformed outputs and repeats of its *own* earlier samples, and keeps whole rounds (no cut at n).

**Merge.** The *prefix* is the rounds below the lowest next round of any worker: every one
of them is done. The merge reads the workers' shards in round order over the prefix, drops a
sample seen in an earlier round of any worker, and keeps the first n, numbered
``gen-s{seed}:{index}``. A repeat inside one worker is a repeat in round order too, so this is
what one process sampling rounds 0, 1, 2, ... writes: the same records, ids and order, byte for
byte where generation is deterministic. The merge is refused, naming the workers still to
run, until the prefix holds n unique samples.

**When a worker stops.** After each shard it reads the other workers' ``state.json`` and new
shards (read-only) and stops when the prefix holds n unique samples, or when it has written
its share ``ceil(n / N)`` and reached the estimated last round
``E = P + ceil(1.1 · (n − u) · P / u) + N`` (P: prefix rounds, u: unique samples in them; a
worker alone has only its own rounds to estimate from). Workers started together usually end
with the merge ready; after a kill or a late start the merge names the workers to run again
(each resumes). Under ``--workers N`` (:func:`run_workers`) a worker that is done waits for
the others instead, going on when the estimate moves, so all end with the merge ready.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, cast

from zdebias.data.process import end_with_parent
from zdebias.data.schema import Record
from zdebias.data.writers import atomic_open, claim, write_json
from zdebias.errors import ConfigError, DataError, ZdebiasError
from zdebias.generation.format import sample_key
from zdebias.generation.settings import SampleSettings
from zdebias.generation.store import MERGED, STATE, SUMMARY, key_hash, read_state
from zdebias.generation.trained import (
    BACKENDS,
    TrainedGenerator,
    sample_trained,
)

log = logging.getLogger("zdebias")

LOCK = ".worker.lock"
_FOLDER = re.compile(r"^worker-(\d+)-of-(\d+)$")
#: the estimated last round is this much past the prefix's yield, so workers overshoot a bit
#: instead of stopping just short (each stop short of n costs a rerun)
MARGIN = 1.1


def worker_folder(out: Path, index: int, workers: int) -> Path:
    """The folder of worker ``index`` of ``workers`` in sampling folder ``out``."""
    return out / f"worker-{index}-of-{workers}"


def is_worker_folder(path: Path) -> bool:
    """Whether ``path`` is a ``worker-I-of-N`` folder."""
    return path.is_dir() and _FOLDER.match(path.name) is not None


def find_workers(out: Path) -> int:
    """N of the ``worker-I-of-N`` folders in ``out`` (one N only), or 0 when there are none."""
    totals = {int(m[2]) for p in out.glob("worker-*-of-*") if (m := _FOLDER.match(p.name))}
    if len(totals) > 1:
        raise ConfigError(
            f"{out}: holds workers of runs with different N ({sorted(totals)}); "
            "keep one set of worker-I-of-N folders"
        )
    return totals.pop() if totals else 0


def worker_share(n: int, workers: int) -> int:
    """Samples each worker writes at least before it may stop: ``ceil(n / workers)``."""
    return -(-n // workers)


class _Stream:
    """One worker's samples in round order: the rows of the shards its state lists, read
    lazily (listed shards are never rewritten), continuing as new shards are listed."""

    def __init__(self, folder: Path, index: int) -> None:
        self.folder, self.index = folder, index
        self.state: dict[str, Any] | None = None
        self._next_shard = 0
        self._fh: IO[str] | None = None
        self._path = folder
        self._line = 0
        self._head: tuple[int, dict[str, Any]] | None = None

    def reload(self) -> None:
        self.state = read_state(self.folder / STATE)

    @property
    def frontier(self) -> int:
        """The first round of this worker not done yet."""
        return int(self.state["next_round"]) if self.state else self.index

    def peek(self) -> tuple[int, dict[str, Any]] | None:
        """The next (round, row), or None until more shards are listed."""
        shards = self.state["shards"] if self.state else []
        while self._head is None:
            if self._fh is None:
                if self._next_shard >= len(shards):
                    return None
                self._path = self.folder / shards[self._next_shard]["file"]
                try:
                    self._fh = open(self._path, encoding="utf-8")
                except OSError as err:
                    raise DataError(
                        f"shard listed in {STATE} cannot be read ({err.strerror})",
                        path=str(self._path),
                    ) from None
                self._line = 0
                self._next_shard += 1
            line = self._fh.readline()
            if not line:
                self._fh.close()
                self._fh = None
                continue
            self._line += 1
            try:
                row = json.loads(line)
                self._head = (int(row["meta"]["round"]), row)
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
                raise DataError(
                    f"not a sample row ({err})", path=str(self._path), line=self._line
                ) from err
        return self._head

    def pop(self) -> None:
        self._head = None

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _key(row: dict[str, Any]) -> int:
    record = Record(
        id=row["id"],
        label=row["label"],
        premise=row.get("premise"),
        hypothesis=row.get("hypothesis"),
        text=row.get("text"),
    )
    return key_hash(sample_key(record))


class PrefixView:
    """The workers' samples over the prefix of rounds they have all done, in round order,
    de-duplicated, up to ``n``; :meth:`refresh` reads what the workers wrote since.

    ``on_sample(row, index)`` is called for each sample kept (index 0 .. n-1).
    """

    def __init__(
        self,
        out: Path,
        workers: int,
        n: int,
        on_sample: Callable[[dict[str, Any], int], None] | None = None,
    ) -> None:
        self.out, self.workers, self.n = out, workers, n
        self.streams = [_Stream(worker_folder(out, i, workers), i) for i in range(workers)]
        self.on_sample = on_sample
        self.seen: set[int] = set()
        self.unique = 0
        self.cross_duplicates = 0
        self.prefix = 0
        self.last_round = -1

    @property
    def ready(self) -> bool:
        """Whether the prefix holds ``n`` unique samples (the merge can run)."""
        return self.unique >= self.n

    def refresh(self) -> None:
        for stream in self.streams:
            stream.reload()
        self.prefix = min(s.frontier for s in self.streams)
        while not self.ready:
            best: _Stream | None = None
            best_round = self.prefix
            for stream in self.streams:
                head = stream.peek()
                if head is not None and head[0] < best_round:
                    best, best_round = stream, head[0]
            if best is None:
                break
            _, row = best.peek()  # type: ignore[misc]
            best.pop()
            key = _key(row)
            if key in self.seen:
                self.cross_duplicates += 1
                continue
            self.seen.add(key)
            if self.on_sample is not None:
                self.on_sample(row, self.unique)
            self.unique += 1
            self.last_round = best_round

    def close(self) -> None:
        for stream in self.streams:
            stream.close()

    def end_round(self) -> int:
        """The estimated first round past the n-th unique sample (see the module doc)."""
        if self.ready:
            return self.last_round + 1
        if self.unique == 0:
            return self.prefix + self.workers
        more = MARGIN * (self.n - self.unique) * self.prefix / self.unique
        return self.prefix + math.ceil(more) + self.workers

    def pending(self) -> list[int]:
        """The workers that have sampling left to do (none once :attr:`ready`)."""
        if self.ready:
            return []
        end, share = self.end_round(), worker_share(self.n, self.workers)
        out = []
        for s in self.streams:
            written = s.state["n_written"] if s.state else 0
            if written < share or s.frontier < end:
                out.append(s.index)
        return out

    def describe(self, index: int) -> str:
        """One worker's progress, for messages."""
        s = self.streams[index]
        if s.state is None:
            return f"{index}/{self.workers} (not started)"
        return f"{index}/{self.workers} ({s.state['n_written']} samples, next round {s.frontier})"


#: set in the worker processes of :func:`run_workers`: a worker that reaches its share and
#: the estimated end waits for the others (all alive, started together) instead of exiting
WAIT_FOR_PEERS = False
#: seconds between two looks at the other workers while waiting
POLL_SECONDS = 0.5


class WorkerGoal:
    """When worker ``index`` of ``workers`` stops (see the module doc); used by
    :func:`~zdebias.generation.rounds.run_rounds`, which checks :meth:`finished` each round
    (the view is re-read only after a new shard) and flushes when :meth:`may_stop`."""

    def __init__(self, out: Path, index: int, workers: int, n: int) -> None:
        self.index, self.workers, self.n = index, workers, n
        self.view = PrefixView(out, workers, n)
        self.share = worker_share(n, workers)
        self.wait = WAIT_FOR_PEERS
        self._end = 0
        self._shards = -1
        self._finished = False

    def finished(self, state: dict[str, Any]) -> bool:
        if len(state["shards"]) != self._shards:
            self._shards = len(state["shards"])
            self._finished = self._check(state)
            while self.wait and self._finished and not self.view.ready:
                time.sleep(POLL_SECONDS)  # the others' rounds may move the estimated end
                self._finished = self._check(state)
        return self._finished

    def _check(self, state: dict[str, Any]) -> bool:
        self.view.refresh()
        self._end = self.view.end_round()
        return self.view.ready or (
            state["n_written"] >= self.share and state["next_round"] >= self._end
        )

    def may_stop(self, state: dict[str, Any], buffered: int, next_round: int) -> bool:
        """Whether to write the buffer now and check :meth:`finished` again."""
        return state["n_written"] + buffered >= self.share and next_round >= self._end

    def describe(self) -> dict[str, Any]:
        """What the worker's summary adds: the prefix and whether the merge can run."""
        v = self.view
        return {
            "worker": f"{self.index}/{self.workers}",
            "share": self.share,
            "prefix_rounds": v.prefix,
            "prefix_unique": min(v.unique, self.n),
            "ready_to_merge": v.ready,
            "pending_workers": v.pending(),
        }


@contextlib.contextmanager
def worker_lock(folder: Path) -> Iterator[None]:
    """Hold ``folder``'s lock file while a worker samples; a second process is refused.

    The operating system drops the lock when the process ends, however it ends. The folder
    (a worker folder inside a sampling folder) is marked as zdebias's first."""
    claim(folder, "samples", adopt=True)
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    from zdebias.data.locks import open_lock_file

    with open(open_lock_file(folder / LOCK, "the worker's lock file"), "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(
                f"{folder}: this worker is running in another process; wait for it to end"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def check_workers_folder(out: Path) -> None:
    """Refuse the folder of a --worker / --workers run when it holds other files than worker
    folders and the merged files (each worker resumes its own folder)."""
    others = [
        p.name
        for p in out.iterdir()
        if not (is_worker_folder(p) or p.name in (MERGED, SUMMARY) or p.name.startswith("."))
    ]
    if others:
        raise ConfigError(
            f"{out}: holds other files than worker folders ({', '.join(sorted(others)[:3])}); "
            "choose another --out"
        )


def sample_worker(
    gen: TrainedGenerator, out_dir: str | Path, cfg: SampleSettings, *, progress: bool
) -> dict[str, Any]:
    """Be worker ``cfg.worker`` (I/N) of the run in ``out_dir``: sample its rounds into
    ``OUT/worker-I-of-N/`` while holding that folder's lock; returns the worker's summary
    (what the merge still needs in ``pending_workers``, ``ready_to_merge``)."""
    out = Path(out_dir)
    worker = cfg.worker_index()
    if worker is None:
        raise ConfigError("sample_worker needs worker I/N")
    if (out / STATE).exists():
        raise ConfigError(f"{out}: holds a one-process sampling run; use another --out")
    if (found := find_workers(out)) and found != worker[1]:
        raise ConfigError(
            f"{out}: holds the workers of a run on {found}, not {worker[1]}; use another --out"
        )
    folder = worker_folder(out, *worker)
    with worker_lock(folder):
        goal = WorkerGoal(out, worker[0], worker[1], cfg.n)
        return sample_trained(gen, folder, cfg, goal=goal, progress=progress)


# --------------------------------------------------------------------------- merge


def _worker_states(out: Path, workers: int) -> list[dict[str, Any] | None]:
    states = [read_state(worker_folder(out, i, workers) / STATE) for i in range(workers)]
    started = [(i, s) for i, s in enumerate(states) if s is not None]
    if not started:
        raise ConfigError(f"{out}: no worker has written a shard yet; nothing to merge")
    i0, first = started[0]
    for i, state in started[1:]:
        for key in ("settings", "generator_fingerprint"):
            mine, theirs = _shared(first[key]), _shared(state[key])
            if mine != theirs:
                raise ConfigError(
                    f"{out}: workers {i0}/{workers} and {i}/{workers} differ in {key} "
                    f"({mine!r} vs {theirs!r}); they are not one run"
                )
    return states


def _shared(value: Any) -> Any:
    """A state entry without the worker's own index (the same for every worker of a run)."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k != "worker"}
    return value


def _requested(out: Path, workers: int, states: list[dict[str, Any] | None]) -> int:
    wanted = {s["worker"]["n"] for s in states if s is not None}
    if len(wanted) > 1:
        raise ConfigError(
            f"{out}: the workers were run with different --n ({sorted(wanted)}); "
            "rerun them with one n"
        )
    return int(wanted.pop())


def merge_samples(out_dir: str | Path) -> dict[str, Any]:
    """Merge the workers of ``out_dir`` into ``samples.jsonl`` and ``summary.json`` (see the
    module doc); refused with one line naming the workers still to run."""
    out = Path(out_dir)
    if not out.is_dir():
        raise ConfigError(f"{out}: no such folder")
    workers = find_workers(out)
    if not workers:
        raise ConfigError(f"{out}: holds no worker-I-of-N folders (sample with --worker I/N)")
    states = _worker_states(out, workers)
    n = _requested(out, workers, states)
    check = PrefixView(out, workers, n)
    check.refresh()
    check.close()
    if not check.ready:
        names = ", ".join(check.describe(i) for i in check.pending())
        raise ConfigError(
            f"{out}: not ready to merge ({min(check.unique, n)} of {n} samples in the rounds "
            f"all workers have done); run again: worker {names}"
        )
    seed = states[next(i for i, s in enumerate(states) if s)]["settings"]["seed"]  # type: ignore[index]
    with atomic_open(out / MERGED) as fh:

        def write(row: dict[str, Any], index: int) -> None:
            row["id"] = f"gen-s{seed}:{index}"
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")

        view = PrefixView(out, workers, n, on_sample=write)
        view.refresh()
        view.close()
    summary = merged_summary(out, workers, n, states, view)
    write_json(summary, out / SUMMARY)
    return summary


def merged_summary(
    out: Path, workers: int, n: int, states: list[dict[str, Any] | None], view: PrefixView
) -> dict[str, Any]:
    """The merged run's summary: its counts add up over every round the workers sampled
    (a one-process run would have stopped after round ``rounds - 1``)."""
    done = [s for s in states if s is not None]
    total = {k: sum(s[k] for s in done) for k in ("n_generated", "n_written", "n_duplicates")}
    malformed: dict[str, int] = {}
    for s in done:
        for reason, k in s["malformed"].items():
            malformed[reason] = malformed.get(reason, 0) + k
    n_malformed = sum(malformed.values())
    generated = total["n_generated"]
    seconds = [s["seconds"] for s in done]
    per_worker = [
        {
            "worker": f"{i}/{workers}",
            "n_written": s["n_written"] if s else 0,
            "rounds": (s["next_round"] - i) // workers if s else 0,
            "shards": len(s["shards"]) if s else 0,
            "seconds": s["seconds"] if s else 0.0,
        }
        for i, s in enumerate(states)
    ]
    wall = max(seconds) if seconds else 0.0
    return {
        "out": str(out),
        "generator": done[0]["generator"],
        "n_requested": n,
        "n_written": n,
        "complete": True,
        "workers": workers,
        "n_shards": sum(w["shards"] for w in per_worker),
        "n_generated": generated,
        "n_malformed": n_malformed,
        "malformed": {k: v for k, v in malformed.items() if v},
        "n_duplicates": total["n_duplicates"] + view.cross_duplicates,
        "n_cross_worker_duplicates": view.cross_duplicates,
        "n_surplus": total["n_written"] - n - view.cross_duplicates,
        "rounds": view.last_round + 1,
        "rounds_sampled": sum(w["rounds"] for w in per_worker),
        "parseable_share": round((generated - n_malformed) / generated, 4) if generated else None,
        "seconds": round(sum(seconds), 3),
        "wall_seconds": wall,
        "generated_per_s": round(generated / wall, 2) if wall else None,
        "samples_per_s": round(n / wall, 2) if wall else None,
        "per_worker": per_worker,
        "settings": _shared(done[0]["settings"]),
    }


# --------------------------------------------------------------------------- N processes


def _gpu_sets(workers: int, per_worker: int) -> list[str | None]:
    """``CUDA_VISIBLE_DEVICES`` of each worker: its own ``per_worker`` GPUs, round robin over
    the visible ones; None each when fewer than 2 GPUs are visible."""
    import torch

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = (
        [x for x in visible.split(",") if x.strip()]
        if visible
        else [str(i) for i in range(torch.cuda.device_count())]
    )
    if len(ids) < 2:
        return [None] * workers
    out: list[str | None] = []
    for i in range(workers):
        start = (i * per_worker) % len(ids)
        out.append(",".join(ids[(start + k) % len(ids)] for k in range(per_worker)))
    return out


@contextlib.contextmanager
def _progress(out: Path, workers: int, n: int, enabled: bool) -> Iterator[Callable[[], None]]:
    """A progress bar of the unique samples in the rounds all workers have done (stderr);
    yields the function that updates it."""
    if not enabled:
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    view = PrefixView(out, workers, n)
    columns = (TextColumn(f"[bold]sampling on {workers} workers"), BarColumn())
    with Progress(*columns, MofNCompleteColumn(), console=Console(stderr=True)) as bar:
        task = bar.add_task("workers", total=n)

        def show() -> None:
            view.refresh()
            bar.update(task, completed=min(view.unique, n))

        try:
            yield show
        finally:
            view.close()


def _worker_main(
    generator: str,
    out: str,
    settings: SampleSettings,
    gpus: str | None,
    backends: dict[str, Any],
    parent: int,
) -> None:
    """One worker process of :func:`run_workers` (ends with process ``parent``)."""
    import sys

    global WAIT_FOR_PEERS
    end_with_parent(parent)
    WAIT_FOR_PEERS = True
    if gpus is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus
    BACKENDS.update(backends)
    try:
        sample_worker(TrainedGenerator.load(generator, settings), out, settings, progress=False)
    except ZdebiasError as err:
        sys.stderr.write(f"error: worker {settings.worker}: {err}\n")
        sys.exit(2)


def run_workers(
    generator: str | Path, out_dir: str | Path, cfg: SampleSettings, *, progress: bool = True
) -> dict[str, Any]:
    """Run ``cfg.workers`` workers as parallel processes until the merge is ready (a worker
    that is done waits for the others, as the estimated end may still move), then merge;
    returns the merge summary.

    With several GPUs visible and no ``device``, each worker gets its own
    (``tensor_parallel_size`` each with vLLM) through ``CUDA_VISIBLE_DEVICES``. Backends
    registered at run time (plugins) are handed to the workers."""
    import multiprocessing
    from multiprocessing.connection import wait as mp_wait

    out = Path(out_dir)
    workers = cfg.workers
    if (found := find_workers(out)) and found != workers:
        raise ConfigError(
            f"{out}: holds a run of {found} workers, not {workers}; use another --out"
        )
    if (out / STATE).exists():
        raise ConfigError(f"{out}: holds a one-process sampling run; use another --out")
    out.mkdir(parents=True, exist_ok=True)
    per = cfg.tensor_parallel_size if cfg.backend == "vllm" else 1
    gpus = _gpu_sets(workers, per) if cfg.device is None else [None] * workers
    builtin = BACKENDS.builtin()
    extra = {k: v for k, v in BACKENDS.items() if builtin.get(k) is not v}
    ctx = multiprocessing.get_context("spawn")
    last: list[int] | None = None
    while True:
        view = PrefixView(out, workers, cfg.n)
        view.refresh()
        view.close()
        if view.ready:
            break
        frontiers = [s.frontier for s in view.streams]
        if frontiers == last:
            raise ZdebiasError(f"{out}: the workers made no progress; run them by hand")
        last = frontiers
        log.info("sampling on %d workers (%s still to run)", workers, view.pending())
        # all of them, each waiting for the others once done: a finished worker may get
        # rounds to do again when the estimated end moves (it loads its model only then)
        procs = []
        failed: list[str] = []
        for i in range(workers):
            settings = SampleSettings.of(cfg, worker=f"{i}/{workers}", workers=1)
            proc = ctx.Process(
                target=_worker_main,
                args=(str(generator), str(out), settings, gpus[i], extra, os.getpid()),
                name=f"zdebias-worker-{i}",
            )
            proc.start()
            procs.append((i, proc))
        try:
            running = {proc.sentinel: (i, proc) for i, proc in procs}
            with _progress(out, workers, cfg.n, progress) as show:
                while running and not failed:  # a failed worker ends the others
                    for sentinel in mp_wait(list(running), timeout=2.0):
                        # wait gives back items of the list it was given: the sentinels
                        i, proc = running.pop(cast("int", sentinel))
                        proc.join()
                        if proc.exitcode:
                            failed.append(f"{i}/{workers} (exit code {proc.exitcode})")
                    show()
        finally:
            for _, proc in procs:
                if proc.is_alive():
                    proc.terminate()
                    proc.join()
        if failed:
            raise ZdebiasError(
                f"{out}: worker {', '.join(failed)} failed (its error is above); "
                "run the same command again to resume"
            )
    return merge_samples(out)


__all__ = [
    "PrefixView",
    "WorkerGoal",
    "check_workers_folder",
    "find_workers",
    "is_worker_folder",
    "merge_samples",
    "run_workers",
    "sample_worker",
    "worker_folder",
    "worker_lock",
    "worker_share",
]
