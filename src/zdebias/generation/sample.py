"""Sample a generator into shards, resumably (SPEC §6; ``zdebias sample``).

Sampling runs in *rounds*: round r draws ``batch_size`` sequences from the start token with the
random seed derived from (``seed``, r). Every output is parsed back into (premise, label,
hypothesis) (:func:`zdebias.generation.format.parse_output`); malformed ones are dropped and
counted by reason, duplicates (same label and case/space-normalised texts, across the whole run)
too. Accepted samples fill a buffer; once it holds ``shard_size`` samples (whole rounds), it is
written as ``shard-NNNNN.jsonl`` and then ``state.json`` (both atomically) records the shard,
the next round and the counts. The last shard is cut so the run ends with exactly ``n``
unique samples (the cut-off ones are counted as ``n_surplus``, so ``n_generated`` = written +
malformed + duplicates + surplus).

A killed run restarts from ``state.json``: the samples of the shards it lists are the
de-duplication set, sampling continues at the recorded round, and a shard file written after the
last state update is simply written again, with the same content (rounds are seeded). So a
resumed run ends with the same ``n`` samples, ids and counts as an uninterrupted one where
generation is deterministic (CPU; most GPU kernels); where it is not, a redone round may differ,
but no sample is ever lost or duplicated and the run still ends with exactly ``n``. Changing
a sampling setting in a folder that holds a run is refused; raising ``n`` extends the run.

Output folder: ``shard-*.jsonl`` (records with ``meta.type = "generated"``), ``dropped-*.jsonl``
(each dropped output with its reason), ``state.json``, and when complete ``samples.jsonl``
(all shards in order, unless ``merge=False``) and ``summary.json``.

Backends ``hf`` and ``vllm`` sample a trained generator folder; ``openai`` and ``local`` prompt
an instruction model (:mod:`zdebias.generation.prompted`, which adds ``requests-*.jsonl``:
each request's tokens, attempts and time). All share the loop :func:`run_rounds`. With
``worker`` / ``workers`` N processes share the rounds (:mod:`zdebias.generation.workers`).

>>> summary = sample_generator("runs/gen", "runs/samples", n=1000, batch_size=64)  # doctest: +SKIP
>>> records = read_samples("runs/samples")                                          # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zdebias.data.schema import Record
from zdebias.data.writers import atomic_open, write_json
from zdebias.errors import ConfigError, DataError, ZdebiasError
from zdebias.generation.format import (
    GENERATOR_INFO,
    MALFORMED_REASONS,
    GeneratorFormat,
    ParsedSample,
    parse_output,
    sample_key,
)
from zdebias.generation.settings import PromptSettings, SampleSettings, fast_bf16

if TYPE_CHECKING:
    from zdebias.generation.workers import WorkerGoal

STATE = "state.json"
#: the backends that prompt an instruction model (:mod:`zdebias.generation.prompted`)
PROMPTED_BACKENDS = ("openai", "local")
SUMMARY = "summary.json"
MERGED = "samples.jsonl"


def round_seed(seed: int, round_index: int) -> int:
    """The seed of one sampling round (independent of batch history and of restarts)."""
    digest = hashlib.blake2b(f"{seed}:{round_index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & (2**63 - 1)


def _key_hash(key: tuple[str, str, str]) -> int:
    digest = hashlib.blake2b("\x1f".join(key).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


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

        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
        if dtype is None:
            dtype = "bfloat16" if self.device.startswith("cuda") else "float32"
        if dtype not in dtypes:
            raise ConfigError(f"unknown dtype {dtype!r}; expected one of {', '.join(dtypes)}")
        self.model = AutoModelForCausalLM.from_pretrained(generator, dtype=dtypes[dtype])
        self.model.to(self.device).eval()
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


# --------------------------------------------------------------------------- state


def _shard_name(i: int) -> str:
    return f"shard-{i:05d}.jsonl"


def _new_state(
    run: dict[str, Any], fingerprint: str, generator: str, reasons: Sequence[str]
) -> dict[str, Any]:
    return {
        "version": 1,
        "generator": generator,
        "generator_fingerprint": fingerprint,
        "settings": run,
        "next_round": 0,
        "shards": [],
        "n_written": 0,
        "n_generated": 0,
        "n_duplicates": 0,
        "n_surplus": 0,
        "malformed": dict.fromkeys(reasons, 0),
        "seconds": 0.0,
    }


def load_state(
    out: Path,
    settings: SampleSettings,
    fingerprint: str,
    generator: str,
    *,
    run: dict[str, Any] | None = None,
    reasons: Sequence[str] = MALFORMED_REASONS,
) -> dict[str, Any]:
    """The run in ``out`` (a new one if none), refused if its settings or generator differ.

    ``run``: the settings that decide the samples (default ``settings.run_settings()``);
    ``reasons``: the drop reasons counted from zero in a new run."""
    run = settings.run_settings() if run is None else run
    path = out / STATE
    if not path.exists():
        return _new_state(run, fingerprint, generator, reasons)
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(f"invalid JSON ({err.msg})", path=str(path), line=err.lineno) from err
    diff = {
        k: (v, state["settings"].get(k)) for k, v in run.items() if state["settings"].get(k) != v
    }
    if diff:
        shown = ", ".join(f"{k}={new!r} (run has {old!r})" for k, (new, old) in diff.items())
        raise ConfigError(
            f"{out}: holds a sampling run with other settings: {shown}; "
            "use another --out or the same settings to resume"
        )
    if state["generator_fingerprint"] != fingerprint:
        raise ConfigError(
            f"{out}: was sampled from another (or a changed) generator "
            f"({state['generator']}); use another --out"
        )
    return state


def _read_shard(path: Path) -> Iterator[Record]:
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"invalid JSON ({err.msg})", path=str(path), line=line_no) from err
            yield Record(
                id=row["id"],
                label=row["label"],
                premise=row.get("premise"),
                hypothesis=row.get("hypothesis"),
                text=row.get("text"),
                meta=row.get("meta", {}),
            )


def read_samples(out_dir: str | Path) -> list[Record]:
    """All samples of a sampling folder, in order (the shards listed in its state file)."""
    out = Path(out_dir)
    path = out / STATE
    if not path.exists() and (out / MERGED).exists() and any(out.glob("worker-*-of-*")):
        return list(_read_shard(out / MERGED))  # a merged run of --worker I/N
    if not path.exists():
        raise ConfigError(f"{out}: not a sampling folder (no {STATE})")
    state = json.loads(path.read_text(encoding="utf-8"))
    return [r for shard in state["shards"] for r in _read_shard(out / shard["file"])]


def seen_from_shards(out: Path, state: dict[str, Any]) -> set[int]:
    seen: set[int] = set()
    for shard in state["shards"]:
        path = out / shard["file"]
        if not path.exists():
            raise DataError(
                f"shard listed in {STATE} is missing; remove the folder to start over",
                path=str(path),
            )
        n = 0
        for record in _read_shard(path):
            seen.add(_key_hash(sample_key(record)))
            n += 1
        if n != shard["n"]:
            raise DataError(f"shard has {n} samples, {STATE} says {shard['n']}", path=str(path))
    return seen


def clean_leftovers(out: Path, state: dict[str, Any]) -> None:
    """Remove temp files and shards a killed run wrote after its last state update."""
    for tmp in out.glob(".*.tmp"):
        tmp.unlink(missing_ok=True)
    listed = {s[k] for s in state["shards"] for k in ("file", "dropped", "requests") if k in s}
    for pattern in ("shard-*.jsonl", "dropped-*.jsonl", "requests-*.jsonl"):
        for path in out.glob(pattern):
            if path.name not in listed:
                path.unlink()


# --------------------------------------------------------------------------- main loop


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
    row per request (token usage, attempts, seconds, error)."""

    candidates: list[Candidate]
    requests: list[dict[str, Any]] = field(default_factory=list)


#: one round: ``(round_index, labels still needed or None) -> RoundOutput``
Producer = Callable[[int, "dict[str, int] | None"], RoundOutput]

#: the per-request counters ``state.json`` and the summary add up
USAGE_KEYS = ("requests", "failed_requests", "retries", "prompt_tokens", "completion_tokens")


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


def start_over(out_dir: str | Path) -> None:
    """Remove ``out_dir`` (a folder or a file), so that sampling there starts afresh instead of
    resuming the run it holds."""
    import shutil

    path = Path(out_dir)
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def label_quota(n: int, labels: Sequence[str]) -> dict[str, int]:
    """Balanced label counts for ``n`` samples: ``n // L`` each, the first ``n % L`` one more."""
    k, extra = divmod(n, len(labels))
    return {lab: k + (1 if i < extra else 0) for i, lab in enumerate(labels)}


def sample_generator(
    generator: str | Path,
    out_dir: str | Path,
    settings: SampleSettings | int | None = None,
    *,
    prompt: PromptSettings | None = None,
    premises: Sequence[Record] | None = None,
    examples: Sequence[Record] | None = None,
    progress: bool = True,
    **overrides: Any,
) -> dict[str, Any]:
    """Sample ``n`` unique well-formed records from a generator into ``out_dir``.

    ``settings``: a :class:`~zdebias.generation.settings.SampleSettings` (an int: ``n``);
    ``overrides``: its fields (and :class:`PromptSettings`' fields) as keywords (``n=1000,
    batch_size=48``). Resumes a run already in ``out_dir`` (same settings). ``max_shards``
    stops after writing that many shards in this call (the run stays resumable);
    ``patience_rounds`` fails when that many rounds in a row yield nothing new. Returns the
    summary (``complete`` says whether ``n`` samples are there). ``dtype`` defaults to bfloat16
    on CUDA, float32 elsewhere.

    With ``backend="openai"`` or ``"local"``, ``generator`` is an instruction model (the
    served model name, or a local model reference such as ``smollm2``) prompted for one
    hypothesis per premise of ``premises`` and target label, labels balanced, with few-shot
    examples from ``examples`` (default: ``premises``); see :mod:`zdebias.generation.prompted`.
    """
    if isinstance(settings, int):
        settings, overrides = None, {"n": settings, **overrides}
    prompt_keys = {k: overrides.pop(k) for k in list(overrides) if k in PromptSettings.model_fields}
    cfg = SampleSettings.of(settings, **overrides)
    if cfg.backend in PROMPTED_BACKENDS and (cfg.worker is not None or cfg.workers > 1):
        raise ConfigError(
            f"--worker/--workers: backend {cfg.backend!r} balances labels over one process; "
            "use backend hf or vllm, or --concurrency for more requests in flight"
        )
    if cfg.workers > 1:
        from zdebias.generation.workers import run_workers

        if prompt_keys or premises is not None:
            raise ConfigError("premises and prompt settings: only for backend openai or local")
        return run_workers(generator, out_dir, cfg, progress=progress)
    if cfg.backend in PROMPTED_BACKENDS:
        from zdebias.generation.prompted import sample_prompted

        return sample_prompted(
            str(generator),
            out_dir,
            cfg,
            PromptSettings.of(prompt, **prompt_keys),
            premises=premises,
            examples=examples,
            progress=progress,
        )
    if prompt_keys or premises is not None:
        given = ", ".join([*prompt_keys, *(["premises"] if premises is not None else [])])
        raise ConfigError(
            f"{given}: only prompted sampling (backend openai or local) takes these; "
            f"backend is {cfg.backend!r}"
        )
    return _sample_trained(generator, out_dir, cfg, progress=progress)


def _sample_trained(
    generator: str | Path, out_dir: str | Path, cfg: SampleSettings, *, progress: bool
) -> dict[str, Any]:
    """Sampling a trained generator folder (backends hf and vllm)."""
    from zdebias.models.resolve import resolve_model

    dtype = cfg.dtype
    if dtype == "auto":
        dtype = "bfloat16" if fast_bf16() else "float32"
    gen_path = Path(resolve_model(generator))
    fmt = GeneratorFormat.load(gen_path)
    if cfg.backend == "vllm":
        check_vllm()
    out = Path(out_dir)
    if (worker := cfg.worker_index()) is not None:
        from zdebias.generation.workers import find_workers, worker_folder, worker_lock

        if (out / STATE).exists():
            raise ConfigError(f"{out}: holds a one-process sampling run; use another --out")
        if (found := find_workers(out)) and found != worker[1]:
            raise ConfigError(
                f"{out}: holds the workers of a run on {found}, not {worker[1]}; use another --out"
            )
        folder = worker_folder(out, *worker)
        with worker_lock(folder):
            return _sample_trained_in(gen_path, fmt, folder, cfg, dtype, worker, progress=progress)
    return _sample_trained_in(gen_path, fmt, out, cfg, dtype, None, progress=progress)


def _sample_trained_in(
    gen_path: Path,
    fmt: GeneratorFormat,
    out: Path,
    cfg: SampleSettings,
    dtype: str | None,
    worker: tuple[int, int] | None,
    *,
    progress: bool,
) -> dict[str, Any]:
    """Sampling into ``out``: the whole run, or worker ``worker = (I, N)``'s rounds."""
    from zdebias.generation.workers import WorkerGoal, find_workers

    if worker is None and find_workers(out):
        raise ConfigError(
            f"{out}: holds --worker runs; merge them with `zdebias sample merge {out}` "
            "or use another --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    run = cfg.run_settings()
    if worker is not None:
        run["worker"] = cfg.worker
    state = load_state(out, cfg, generator_fingerprint(gen_path), str(gen_path), run=run)
    goal = None
    if worker is not None:
        if not state["shards"]:
            state["next_round"] = worker[0]  # its first round: I, then I + N, ...
        state["worker"] = {"index": worker[0], "workers": worker[1], "n": cfg.n}
        goal = WorkerGoal(out.parent, worker[0], worker[1], cfg.n)
    elif state["n_written"] > cfg.n:
        raise ConfigError(
            f"{out}: already holds {state['n_written']} samples, more than "
            f"--n {cfg.n}; use another --out"
        )
    clean_leftovers(out, state)
    seen = seen_from_shards(out, state)

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gen_path)
    special = frozenset(int(i) for i in tokenizer.all_special_ids)
    engine = None
    if (goal is None and state["n_written"] < cfg.n) or (goal and not goal.finished(state)):
        engine = BACKENDS[cfg.backend](gen_path, fmt, cfg, device=cfg.device, dtype=dtype)
    gen_name = gen_path.name

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
        out,
        state,
        seen,
        cfg,
        produce,
        make_record,
        progress=progress,
        hint="is it trained?",
        goal=goal,
    )


def run_rounds(
    out: Path,
    state: dict[str, Any],
    seen: set[int],
    cfg: SampleSettings,
    produce: Producer,
    make_record: Callable[[Candidate, int, int], Record],
    *,
    progress: bool,
    quota: dict[str, int] | None = None,
    hint: str = "",
    goal: WorkerGoal | None = None,
) -> dict[str, Any]:
    """The sampling loop every backend shares: rounds → parsed candidates → de-duplicated
    records → shards + ``state.json`` (see the module doc). ``quota``: the number of samples
    wanted per label (labels balanced); a sample of a label whose quota is met is surplus.
    ``goal``: one worker of several (:mod:`zdebias.generation.workers`): it runs every N-th
    round, keeps whole rounds and stops when the goal says."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    n = cfg.n
    buffer: list[Record] = []
    dropped: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []
    counts = {"n_generated": 0, "n_duplicates": 0, "n_surplus": 0}
    usage = dict.fromkeys(USAGE_KEYS, 0)
    malformed: dict[str, int] = {}
    round_index = state["next_round"]
    step = goal.workers if goal is not None else 1
    shards_written = 0
    idle_rounds = 0
    started = time.perf_counter()
    call_generated = call_accepted = 0

    def flush() -> None:
        nonlocal buffer, dropped, requests, shards_written, started
        index = len(state["shards"])
        name, dropped_name = _shard_name(index), f"dropped-{index:05d}.jsonl"
        with atomic_open(out / name) as fh:
            for record in buffer:
                fh.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
        with atomic_open(out / dropped_name) as fh:
            for row in dropped:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        entry = {"file": name, "dropped": dropped_name, "n": len(buffer), "next_round": round_index}
        if requests:
            entry["requests"] = f"requests-{index:05d}.jsonl"
            with atomic_open(out / entry["requests"]) as fh:
                for row in requests:
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        now = time.perf_counter()
        state["shards"].append(entry)
        state["next_round"] = round_index
        state["n_written"] += len(buffer)
        for key in ("n_generated", "n_duplicates", "n_surplus"):
            state[key] = state.get(key, 0) + counts[key]
        for reason, k in malformed.items():
            state["malformed"][reason] = state["malformed"].get(reason, 0) + k
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
            return not goal.finished(state) if goal is not None else state["n_written"] < n

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
                    if cfg.keep_dropped:
                        dropped.append({"round": round_index, "reason": reason, "text": cand.text})
                    continue
                key = _key_hash(sample_key(parsed))
                if key in seen:
                    counts["n_duplicates"] += 1
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
                        continue
                    need[parsed.label or ""] -= 1
                seen.add(key)
                index = state["n_written"] + len(buffer)
                buffer.append(make_record(cand, index, round_index))
                accepted += 1
            round_index += step
            call_generated += len(result.candidates)
            call_accepted += accepted
            idle_rounds = 0 if accepted else idle_rounds + 1
            if idle_rounds >= (patience := cfg.patience_rounds):
                so_far = dict(Counter(state["malformed"]) + Counter(malformed))
                raise ZdebiasError(
                    f"the generator gave no new well-formed sample in {patience} rounds "
                    f"(malformed so far: {_nonzero(so_far)}); {hint}".rstrip("; ")
                )
            if goal is not None:  # whole rounds: the merge cuts at n
                if len(buffer) >= cfg.shard_size or goal.may_stop(state, len(buffer), round_index):
                    flush()
            elif state["n_written"] + len(buffer) >= n:
                counts["n_surplus"] += len(buffer[n - state["n_written"] :])
                del buffer[n - state["n_written"] :]
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

    complete = goal.finished(state) if goal is not None else state["n_written"] == n
    if complete and cfg.merge and goal is None:
        with atomic_open(out / MERGED) as fh:
            for shard in state["shards"]:
                with open(out / shard["file"], encoding="utf-8") as src:
                    for line in src:
                        fh.write(line)
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
    if "usage" in state:
        usage = dict(state["usage"])
        answered = usage["requests"] - usage["failed_requests"]
        for key in ("prompt_tokens", "completion_tokens"):
            usage[f"mean_{key}"] = round(usage[key] / answered, 2) if answered else None
        usage["completion_tokens_per_s"] = (
            round(usage["completion_tokens"] / seconds, 2) if seconds else None
        )
        summary["usage"] = usage
    for key in ("backend", "model", "prompting"):
        if key in state:
            summary[key] = state[key]
    return summary
