"""Sampling on Ray actors (``--ray``): the rounds of one run decoded by a pool of actors.

Each actor (:class:`RoundSampler`: ``ray_num_gpus`` GPUs or ``ray_num_cpus`` CPUs) loads the
generator once and decodes *groups* of rounds: the rounds the ``hf`` backend decodes as one
batch in one process (:func:`~zdebias.generation.trained.rounds_per_group`, aligned to round 0;
one round for vLLM). The driver hands the groups out in round order, a few ahead of the round
loop, to the actor with the fewest pending, and runs the loop itself
(:func:`~zdebias.generation.trained.sample_trained`: parsing, de-duplication, shards,
``state.json``, progress). So the folder is the one a one-process run writes, byte for byte
where decoding is deterministic: the same rounds, decoded in the same batches, taken in the
same order.

Resume is the one-process run's: a killed driver resumes from ``state.json`` (rounds after its
last shard are sampled again; any executor may continue a run). A killed actor's pending groups
go to the other actors; when none is left the call fails and the next call resumes.
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from pathlib import Path
from typing import Any

from zdebias.errors import ZdebiasError
from zdebias.executor import ray_session
from zdebias.generation.settings import SampleSettings
from zdebias.generation.trained import (
    BACKENDS,
    RoundBatches,
    TrainedGenerator,
    rounds_per_group,
    sample_trained,
)

log = logging.getLogger("zdebias")

#: groups handed out ahead of the round loop, per actor
AHEAD = 2
#: the prefix of the actors' names (``ray list actors``; tests find them by it)
ACTOR_PREFIX = "zdebias-sampler"


class RoundSampler:
    """One actor's generator: the id rows of a group of rounds, decoded as one batch."""

    def __init__(self, gen: TrainedGenerator, cfg: SampleSettings, backend: type) -> None:
        engine = backend(gen.path, gen.fmt, cfg, device=cfg.device, dtype=gen.dtype)
        self.rounds = RoundBatches(engine, cfg.batch_size, cfg.seed)
        self.compute = getattr(engine, "compute", None)

    def compute_record(self) -> dict[str, Any] | None:
        """The device and dtype this actor samples on (the summary's ``compute``)."""
        return self.compute

    def sample(self, indices: list[int]) -> list[list[list[int]]]:
        """The id rows of each round of ``indices`` (one group)."""
        return [self.rounds(r) for r in indices]


class ActorRounds:
    """Round r's id rows from a pool of :class:`RoundSampler` actors, started on the first
    call (a finished run starts none). ``counts``: groups decoded, rounds received and actors
    lost, for the summary."""

    def __init__(self, ray: Any, gen: TrainedGenerator, cfg: SampleSettings) -> None:
        self.ray, self.gen, self.cfg = ray, gen, cfg
        self.backend = BACKENDS[cfg.backend]
        cuda = cfg.ray_num_gpus > 0 or str(cfg.device or "").startswith("cuda")
        self.group = rounds_per_group(self.backend, cfg.batch_size, cfg, cuda)
        self.actors: list[Any] = []
        self.pending: dict[int, tuple[Any, Any]] = {}  # group → (result ref, actor)
        self.load: dict[Any, int] = {}
        self.order: deque[int] = deque()
        self.next_group = 0
        self.ready: dict[int, list[list[int]]] = {}
        self.counts = {"actors": 0, "groups": 0, "rounds": 0, "actors_lost": 0}
        self.last_error = ""
        #: the first actor's device and dtype, once the actors run
        self.compute: dict[str, Any] | None = None

    def _start(self, first_group: int) -> None:
        ray, cfg = self.ray, self.cfg
        n = cfg.actor_count(ray.cluster_resources())
        remote = ray.remote(RoundSampler)
        options = cfg.actor_options()
        tag = uuid.uuid4().hex[:8]
        self.actors = [
            remote.options(name=f"{ACTOR_PREFIX}-{tag}-{i}", **options).remote(
                self.gen, cfg, self.backend
            )
            for i in range(n)
        ]
        self.load = dict.fromkeys(self.actors, 0)
        self.counts["actors"] = n
        self.compute = ray.get(self.actors[0].compute_record.remote())
        self.next_group = first_group
        log.info("sampling on %d Ray actors (%s each)", n, cfg.actor_options())

    def _rounds(self, group: int) -> list[int]:
        return list(range(group * self.group, (group + 1) * self.group))

    def _submit(self, group: int) -> None:
        if not self.load:
            raise ZdebiasError(
                f"all {self.counts['actors']} Ray sampling actors died (last: {self.last_error}); "
                "the shards written so far are kept: run the same command again to resume"
            )
        actor = min(self.load, key=self.load.__getitem__)
        self.load[actor] += 1
        self.pending[group] = (actor.sample.remote(self._rounds(group)), actor)

    def _fill(self) -> None:
        while len(self.pending) < AHEAD * max(1, len(self.load)):
            self._submit(self.next_group)
            self.next_group += 1

    def _lost(self, actor: Any, err: Exception) -> None:
        """``actor`` died: its groups go to the others."""
        if actor not in self.load:
            return
        del self.load[actor]
        self.counts["actors_lost"] += 1
        self.last_error = " ".join(str(err).split())[-300:]
        log.warning("a Ray sampling actor died (%s); %d left", type(err).__name__, len(self.load))
        for group, (_, owner) in sorted(self.pending.items()):
            if owner is actor:
                self._submit(group)

    def __call__(self, round_index: int) -> list[list[int]]:
        if round_index in self.ready:
            return self.ready.pop(round_index)
        group = round_index // self.group
        if not self.actors:
            self._start(group)
        if group not in self.pending:  # the loop is past the groups handed out: go on there
            self.next_group = max(self.next_group, group)
        self._fill()
        from ray.exceptions import ActorDiedError, ActorUnavailableError

        while True:
            ref, actor = self.pending[group]
            try:
                rows = self.ray.get(ref)
                break
            except (ActorDiedError, ActorUnavailableError) as err:
                self._lost(actor, err)
                self._fill()
        del self.pending[group]
        if actor in self.load:
            self.load[actor] -= 1
        self.counts["groups"] += 1
        self.ready = {r: rows[k] for k, r in enumerate(self._rounds(group)) if r > round_index}
        self.counts["rounds"] += 1 + len(self.ready)
        self._fill()
        return rows[round_index - group * self.group]

    def close(self) -> None:
        """End the actors (their pending groups are dropped)."""
        for actor in self.actors:
            self.ray.kill(actor)
        self.actors, self.load, self.pending = [], {}, {}


def sample_on_ray(
    gen: TrainedGenerator, out: Path, cfg: SampleSettings, *, progress: bool
) -> dict[str, Any]:
    """Sample ``gen`` into ``out`` as one process would, the rounds decoded on Ray actors
    (see the module doc); the summary adds ``ray``: actors, groups decoded, actors lost."""
    with ray_session(cfg) as ray:
        pool = ActorRounds(ray, gen, cfg)
        try:
            summary = sample_trained(gen, out, cfg, progress=progress, rounds=pool)
        finally:
            pool.close()
    summary["ray"] = dict(pool.counts)
    return summary


__all__ = ["ActorRounds", "RoundSampler", "sample_on_ray"]
