"""Sampling a trained generator folder (SPEC §6): backends ``hf`` and ``vllm``.

A backend turns a round's seed into ``batch_size`` token-id rows sampled from the start token
(:class:`HFBackend`: transformers, any device, several rounds decoded as one batch by
:class:`RoundBatches`; :class:`VllmBackend`: vLLM on a CUDA GPU). :func:`sample_trained` parses
the rows back into records (:func:`~zdebias.generation.format.parse_output`) and runs the shared
round loop (:func:`~zdebias.generation.rounds.run_rounds`) in one folder: a whole run, or one
worker's rounds (:mod:`zdebias.generation.workers`). Backends added to :data:`BACKENDS` (tests,
plugins) are used by name.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.generation.format import GENERATOR_INFO, GeneratorFormat, ParsedSample, parse_output
from zdebias.generation.rounds import Candidate, Goal, RoundOutput, round_seed, run_rounds
from zdebias.generation.settings import SampleSettings, fast_bf16
from zdebias.generation.store import open_run


def generator_fingerprint(generator: str | Path) -> str:
    """A cheap identity of a generator folder: its format file and weight files' sizes/times."""
    folder = Path(generator)
    h = hashlib.blake2b(digest_size=12)
    h.update((folder / GENERATOR_INFO).read_bytes())
    for path in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")):
        stat = path.stat()
        h.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return h.hexdigest()


# --------------------------------------------------------------------------- backends


class HFBackend:
    """Batched sampling with a transformers causal LM (any device torch has): the decoding loop
    of :mod:`zdebias.generation.decode` (KV cache, finished rows dropped, nucleus found on a
    short list), several rounds per batch (:class:`RoundBatches`); :meth:`generate_hf` is one
    round through ``model.generate``. ``settings.threads``: CPU threads while decoding."""

    def __init__(
        self,
        generator: Path,
        fmt: GeneratorFormat,
        settings: SampleSettings,
        *,
        device: str | None = None,
        dtype: str | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, GenerationConfig

        from zdebias.models.compute import compute_record

        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
        if dtype is None:
            dtype = "bfloat16" if self.device.startswith("cuda") else "float32"
        if dtype not in dtypes:
            raise ConfigError(f"unknown dtype {dtype!r}; expected one of {', '.join(dtypes)}")
        self.model = AutoModelForCausalLM.from_pretrained(generator, dtype=dtypes[dtype])
        self.model.to(self.device).eval()
        #: what it samples on, for the summary (:func:`~zdebias.models.compute.compute_record`)
        self.compute = compute_record(self.device, dtype, setting=settings.dtype)
        self.fmt = fmt
        self.threads = settings.threads
        #: decoding steps and rows x steps the model ran, over all rounds (:func:`decode`)
        self.stats: dict[str, int] = {}
        self.config = GenerationConfig(
            do_sample=True,
            top_p=settings.top_p,
            top_k=settings.top_k,
            temperature=settings.temperature,
            max_new_tokens=fmt.max_length - 1,
            bos_token_id=fmt.bos_token_id,
            eos_token_id=fmt.eos_token_id,
            pad_token_id=fmt.pad_token_id,
        )

    def generate(self, batch_size: int, seed: int) -> list[list[int]]:
        """``batch_size`` sampled id sequences (after the start token), padded to the longest."""
        return self.generate_rounds(batch_size, [seed])[0]

    @staticmethod
    def rounds_per_batch(batch_size: int) -> int:
        """How many rounds :class:`RoundBatches` decodes together: a decoding step reads all
        the weights whatever its rows, so on a CPU a row costs about half as much at 64 rows
        as at 32 (docs/scaling.md, "Sampling speed")."""
        return max(1, ROWS_PER_BATCH // batch_size)

    def generate_rounds(self, batch_size: int, seeds: Sequence[int]) -> list[list[list[int]]]:
        """:meth:`generate` for each seed, decoded as one batch; each row draws with its own
        seeded numbers, so a round's rows are the ones it gets alone (up to float rounding in
        a batch of another size)."""
        from zdebias.generation.decode import decode, uniforms

        fmt, cfg, torch = self.fmt, self.config, self.torch
        steps = fmt.max_length - 1
        u = torch.cat([uniforms(steps, batch_size, seed, self.device) for seed in seeds], dim=1)
        threads = torch.get_num_threads()
        if self.threads:
            torch.set_num_threads(self.threads)
        try:
            rows = decode(
                self.model,
                fmt.bos_token_id,
                fmt.eos_token_id,
                fmt.pad_token_id,
                steps,
                u,
                top_p=cfg.top_p,
                top_k=cfg.top_k,
                temperature=cfg.temperature,
                stats=self.stats,
            )
        finally:
            torch.set_num_threads(threads)
        out = []
        for k in range(len(seeds)):
            chunk = rows[k * batch_size : (k + 1) * batch_size]
            width = max(
                r.index(fmt.eos_token_id) + 1 if fmt.eos_token_id in r else len(r) for r in chunk
            )
            out.append([r[:width] for r in chunk])  # padded to the round's longest, as alone
        return out

    def generate_hf(self, batch_size: int, seed: int) -> list[list[int]]:
        """As :meth:`generate`, through ``model.generate`` (the sampler's path before the
        decoding loop; other random draws, the same distribution)."""
        torch = self.torch
        torch.manual_seed(seed)
        start = torch.full((batch_size, 1), self.fmt.bos_token_id, device=self.device)
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=start,
                attention_mask=torch.ones_like(start),
                generation_config=self.config,
            )
        return [row[1:].tolist() for row in out.cpu()]


#: :class:`HFBackend` decodes whole rounds together up to this many rows per batch
ROWS_PER_BATCH = 128


class RoundBatches:
    """The id rows of round r from a backend. One with ``generate_rounds`` (HF) decodes
    ``rounds_per_batch`` of the run's rounds at once (r0, r0 + stride, ...: a worker's rounds
    when ``stride`` is the number of workers), in groups aligned to the run's first round, so
    a resumed run decodes every round in the same batch as one that never stopped. Rounds
    decoded but never asked for (past the run's end) are only lost time."""

    def __init__(self, engine: Any, batch_size: int, seed: int, stride: int = 1) -> None:
        self.engine, self.batch_size, self.seed, self.stride = engine, batch_size, seed, stride
        grouped = engine is not None and hasattr(engine, "generate_rounds")
        self.group = engine.rounds_per_batch(batch_size) if grouped else 1
        self.pending: dict[int, list[list[int]]] = {}

    def __call__(self, round_index: int) -> list[list[int]]:
        if round_index in self.pending:
            return self.pending.pop(round_index)
        if self.group == 1:
            return self.engine.generate(self.batch_size, round_seed(self.seed, round_index))
        first, j = round_index % self.stride, round_index // self.stride
        start = j - j % self.group
        indices = [first + (start + k) * self.stride for k in range(self.group)]
        seeds = [round_seed(self.seed, r) for r in indices]
        rows = self.engine.generate_rounds(self.batch_size, seeds)
        self.pending = dict(zip(indices, rows, strict=True))
        return self.pending.pop(round_index)


class VllmBackend:
    """Sampling with vLLM (``pip install zdebias[vllm]``; needs a CUDA GPU)."""

    def __init__(
        self, generator: Path, fmt: GeneratorFormat, settings: SampleSettings, **_: Any
    ) -> None:
        check_vllm()
        from vllm import LLM

        self.fmt = fmt
        self.settings = settings
        self.llm = LLM(**vllm_engine_args(generator, settings))

    def generate(self, batch_size: int, seed: int) -> list[list[int]]:
        from vllm import SamplingParams

        s = self.settings
        params = SamplingParams(
            n=batch_size,
            seed=seed,
            top_p=s.top_p,
            top_k=s.top_k if s.top_k > 0 else -1,
            temperature=s.temperature,
            max_tokens=self.fmt.max_length - 1,
            stop_token_ids=[self.fmt.eos_token_id],
            skip_special_tokens=False,
            detokenize=False,
        )
        (request,) = self.llm.generate(
            [{"prompt_token_ids": [self.fmt.bos_token_id]}], params, use_tqdm=False
        )
        out = []
        for completion in request.outputs:
            ids = list(completion.token_ids)
            if completion.finish_reason == "stop" and self.fmt.eos_token_id not in ids:
                ids.append(self.fmt.eos_token_id)
            out.append(ids)
        return out


def vllm_engine_args(generator: str | Path, settings: SampleSettings) -> dict[str, Any]:
    """The keywords of ``vllm.LLM`` for a sampling run. Data parallelism is ``--workers``
    (one engine per worker process, each on its own GPUs); one engine spans
    ``tensor_parallel_size`` GPUs."""
    args: dict[str, Any] = {"model": str(generator), "seed": settings.seed}
    if settings.tensor_parallel_size > 1:
        args["tensor_parallel_size"] = settings.tensor_parallel_size
    if settings.dtype not in (None, "auto"):
        args["dtype"] = settings.dtype
    return args


def check_vllm() -> None:
    """Fail clearly unless vLLM is installed and a CUDA GPU is present."""
    if importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            "--backend vllm needs vLLM: pip install 'zdebias[vllm]' (or use --backend hf)"
        )
    import torch

    if not torch.cuda.is_available():
        raise ConfigError("--backend vllm needs a CUDA GPU and none is visible; use --backend hf")


BACKENDS = {"hf": HFBackend, "vllm": VllmBackend}


# --------------------------------------------------------------------------- sampling


@dataclass(frozen=True)
class TrainedGenerator:
    """A trained generator folder to sample: its path (a packaged name or hub id resolved),
    its format and the dtype to load it in."""

    path: Path
    fmt: GeneratorFormat
    dtype: str | None

    @classmethod
    def load(cls, generator: str | Path, cfg: SampleSettings) -> TrainedGenerator:
        """``generator`` resolved and its format read; ``dtype`` auto made concrete; with
        ``backend="vllm"``, refused unless vLLM and a CUDA GPU are there."""
        from zdebias.models.resolve import resolve_model

        dtype = cfg.dtype
        if dtype == "auto":
            dtype = "bfloat16" if fast_bf16() else "float32"
        path = Path(resolve_model(generator))
        fmt = GeneratorFormat.load(path)
        if cfg.backend == "vllm":
            check_vllm()
        return cls(path, fmt, dtype)


def _record(
    sample: ParsedSample,
    index: int,
    fmt: GeneratorFormat,
    seed: int,
    round_index: int,
    generator: str,
) -> Record:
    meta = {"type": "generated", "generator": generator, "round": round_index}
    rid = f"gen-s{seed}:{index}"
    if fmt.pair:
        return Record(
            id=rid,
            label=sample.label or "",
            premise=sample.premise,
            hypothesis=sample.hypothesis,
            meta=meta,
        )
    return Record(id=rid, label=sample.label or "", text=sample.hypothesis, meta=meta)


def sample_trained(
    gen: TrainedGenerator,
    out: Path,
    cfg: SampleSettings,
    *,
    goal: Goal | None = None,
    progress: bool,
) -> dict[str, Any]:
    """Sample ``gen`` into ``out``: the whole run, or with ``goal`` the rounds of worker
    ``goal.index`` of ``goal.workers`` (round I, I + N, ...; whole rounds, ids numbered per
    worker until the merge). Returns the summary."""
    worker = (goal.index, goal.workers) if goal is not None else None
    out.mkdir(parents=True, exist_ok=True)
    run = cfg.run_settings()
    if worker is not None:
        run["worker"] = f"{worker[0]}/{worker[1]}"
    folder = open_run(
        out,
        cfg,
        generator_fingerprint(gen.path),
        str(gen.path),
        run=run,
        most=cfg.n if worker is None else None,
    )
    state = folder.state
    if worker is not None:
        if not state["shards"]:
            state["next_round"] = worker[0]  # its first round: I, then I + N, ...
        state["worker"] = {"index": worker[0], "workers": worker[1], "n": cfg.n}

    from transformers import AutoTokenizer

    fmt = gen.fmt
    tokenizer = AutoTokenizer.from_pretrained(gen.path)
    special = frozenset(int(i) for i in tokenizer.all_special_ids)
    engine = None
    if (goal is None and state["n_written"] < cfg.n) or (goal and not goal.finished(state)):
        engine = BACKENDS[cfg.backend](gen.path, fmt, cfg, device=cfg.device, dtype=gen.dtype)
        if hasattr(engine, "compute"):  # the latest call's device and dtype, in the summary
            state["compute"] = engine.compute
    gen_name = gen.path.name

    rounds = RoundBatches(engine, cfg.batch_size, cfg.seed, worker[1] if worker else 1)

    def produce(round_index: int, _: dict[str, int] | None) -> RoundOutput:
        assert engine is not None
        candidates = []
        for ids in rounds(round_index):
            parsed = parse_output(ids, tokenizer, fmt, special_ids=special)
            candidates.append(Candidate(parsed, tokenizer.decode(ids) if not parsed.ok else ""))
        return RoundOutput(candidates)

    def make_record(c: Candidate, index: int, round_index: int) -> Record:
        record = _record(c.parsed, index, fmt, cfg.seed, round_index, gen_name)
        if worker is not None:  # the merge numbers the samples of all workers
            return record.replace(id=f"gen-s{cfg.seed}-w{worker[0]}of{worker[1]}:{index}")
        return record

    return run_rounds(
        folder, cfg, produce, make_record, progress=progress, hint="is it trained?", goal=goal
    )


__all__ = [
    "BACKENDS",
    "ROWS_PER_BATCH",
    "HFBackend",
    "RoundBatches",
    "TrainedGenerator",
    "VllmBackend",
    "check_vllm",
    "generator_fingerprint",
    "sample_trained",
    "vllm_engine_args",
]
