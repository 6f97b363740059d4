"""Sampling a trained generator folder (docs/design.md §6): backends ``hf`` and ``vllm``.

A backend turns a round's seed into ``batch_size`` token-id rows sampled from the start token
(:class:`HFBackend`: transformers, any device, several rounds decoded as one batch by
:class:`RoundBatches`; :class:`VllmBackend`: vLLM on a CUDA GPU). :func:`sample_trained` parses
the rows back into records (:func:`~zdebias.generation.format.parse_output`) and runs the shared
round loop (:func:`~zdebias.generation.rounds.run_rounds`) in one folder: a whole run, or one
worker's rounds (:mod:`zdebias.generation.workers`). The backends' names live in
:mod:`zdebias.generation.backends`; classes set in :data:`BACKENDS` (tests, plugins) are used
by name.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from zdebias.data.schema import Record
from zdebias.data.writers import write_json
from zdebias.errors import ConfigError
from zdebias.generation.backends import Backends
from zdebias.generation.conditioned import (
    ConditionedRounds,
    fitting_premises,
    premise_counts,
    premises_digest,
)
from zdebias.generation.format import GENERATOR_INFO, GeneratorFormat, ParsedSample, parse_output
from zdebias.generation.premises import PremisePlan, parse_per_premise
from zdebias.generation.rounds import Candidate, Goal, RoundOutput, round_seed, run_rounds
from zdebias.generation.settings import SampleSettings, fast_bf16
from zdebias.generation.store import SUMMARY, open_run, read_samples
from zdebias.models.compute import model_device

if TYPE_CHECKING:
    from zdebias.stats.cells import Cell

log = logging.getLogger("zdebias")


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
    """Batched sampling with a transformers causal LM (any device torch has): a decoding loop
    of :mod:`zdebias.generation.decode` (``settings.decode_loop``: *carry*, KV cache and
    finished rows dropped, the default off CUDA; *refill*, fixed slots on a static KV cache,
    a finished row replaced by the next, the default on CUDA; both find the nucleus on a short
    list), several rounds per batch (:class:`RoundBatches`); :meth:`generate_hf` is one
    round through ``model.generate``. ``settings.threads``: CPU threads while decoding."""

    def __init__(
        self,
        generator: Path,
        fmt: GeneratorFormat,
        settings: SampleSettings,
        *,
        device: str | None = None,
        dtype: str | None = None,
        slots: int | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, GenerationConfig

        from zdebias.models.compute import compute_record

        self.torch = torch
        self.device = model_device(device)
        dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
        if dtype is None:
            dtype = "bfloat16" if self.device.startswith("cuda") else "float32"
        if dtype not in dtypes:
            raise ConfigError(f"unknown dtype {dtype!r}; expected one of {', '.join(dtypes)}")
        self.model = AutoModelForCausalLM.from_pretrained(generator, dtype=dtypes[dtype])
        self.model.to(self.device).eval()  # type: ignore[arg-type]  # transformers: .to typed unbound (functools.wraps)
        #: what it samples on, for the summary (:func:`~zdebias.models.compute.compute_record`)
        self.compute = compute_record(self.device, dtype, setting=settings.dtype)
        self.fmt = fmt
        self.threads = settings.threads
        #: decoding steps and rows x steps the model ran, over all rounds (:func:`decode`)
        self.stats: dict[str, int] = {}
        self.loop = decode_loop(self.model, self.device, settings.decode_loop)
        if settings.compile and self.loop != "refill":  # it would compile nothing
            raise ConfigError(
                "--compile compiles the refill loop's step, and this run decodes with the carry "
                f"loop (on {self.device}); add --decode-loop refill or leave --compile out"
            )
        #: rows decoded at once: carry's batch (whole rounds), refill's slots (None: auto)
        self.decode_batch = settings.decode_batch
        #: the refill slots when ``decode_batch`` is unset (None: auto_slots); a resumed run
        #: passes the slots it began with (:func:`resumed_decoding`); jobs stay planned as auto
        self.auto_slots = slots
        self.use_compile = settings.compile
        self._slots: Any = None  # the refill loop's SlotDecoder, made on first use
        self.compute["decode"] = {"loop": self.loop, "compile": self.use_compile}
        if self.loop == "refill":
            self.compute["decode"]["slots"] = self.slot_decoder().slots
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

    def rounds_per_batch(self, batch_size: int) -> int:
        """How many rounds :class:`RoundBatches` decodes together
        (:func:`planned_rounds_per_batch` of this backend's loop, device and slots)."""
        cuda = self.device.startswith("cuda")
        return planned_rounds_per_batch(batch_size, self.loop, cuda, self.decode_batch)

    def slot_decoder(self) -> Any:
        """The refill loop's :class:`~zdebias.generation.decode.SlotDecoder` (made once: it
        keeps its static cache and compiled step from job to job)."""
        if self._slots is None:
            from zdebias.generation.decode import SlotDecoder

            steps = self.fmt.max_length - 1
            self._slots = SlotDecoder(
                self.model, steps, self.decode_batch or self.auto_slots, compile=self.use_compile
            )
        return self._slots

    def generate_rounds(self, batch_size: int, seeds: Sequence[int]) -> list[list[list[int]]]:
        """:meth:`generate` for each seed, decoded as one batch; each row draws with its own
        seeded numbers, so a round's rows are the ones it gets alone (up to float rounding in
        a batch of another size)."""
        from zdebias.generation.decode import uniforms

        steps = self.fmt.max_length - 1
        u = self.torch.cat([uniforms(steps, batch_size, s, self.device) for s in seeds], dim=1)
        rows = self._decode(u)
        return [self._trim(rows[k * batch_size : (k + 1) * batch_size]) for k in range(len(seeds))]

    def complete(
        self, prompts: Sequence[Sequence[int]], seed: int, *, choices: Sequence[int] | None = None
    ) -> list[list[int]]:
        """One row per prompt (the ids after the start token), decoded on from it with the
        uniforms of ``seed``; ``choices``: the tokens allowed right after each prompt (the
        label tokens). The rows hold their prompt, as :meth:`generate`'s rows hold all."""
        return self.complete_groups([(prompts, seed)], choices=choices)[0]

    def complete_groups(
        self,
        groups: Sequence[tuple[Sequence[Sequence[int]], int]],
        *,
        choices: Sequence[int] | None = None,
    ) -> list[list[list[int]]]:
        """:meth:`complete` for each ``(prompts, seed)`` group (the rows of several rounds),
        decoded as one batch, the prompts read in one forward pass
        (:func:`~zdebias.generation.decode.decode`); each group's rows draw with its seed's
        uniforms, as alone."""
        from zdebias.generation.decode import uniforms

        steps = self.fmt.max_length - 1
        prompts = [p for group, _ in groups for p in group]
        if not prompts:
            return [[] for _ in groups]
        u = self.torch.cat(
            [uniforms(steps, len(group), seed, self.device) for group, seed in groups if group],
            dim=1,
        )
        rows = self._decode(u, prompts=prompts, choices=choices)
        out, first = [], 0
        for group, _ in groups:
            out.append(self._trim(rows[first : first + len(group)]) if group else [])
            first += len(group)
        return out

    def _decode(self, u: Any, **options: Any) -> list[list[int]]:
        """The decoding loop (:func:`~zdebias.generation.decode.decode` or the refill
        loop's :class:`~zdebias.generation.decode.SlotDecoder`) with the sampling settings,
        on ``threads`` CPU threads."""
        from zdebias.generation.decode import decode

        fmt, cfg, torch = self.fmt, self.config, self.torch
        threads = torch.get_num_threads()
        if self.threads:
            torch.set_num_threads(self.threads)
        ends = (fmt.bos_token_id, fmt.eos_token_id, fmt.pad_token_id)
        kw = {"top_p": cfg.top_p, "top_k": cfg.top_k, "temperature": cfg.temperature}
        try:
            if self.loop == "refill":
                return self.slot_decoder()(*ends, u, stats=self.stats, **kw, **options)
            start, eos, pad = ends
            return decode(
                self.model,
                start,
                eos,
                pad,
                fmt.max_length - 1,
                u,
                stats=self.stats,
                **kw,
                **options,
            )
        finally:
            torch.set_num_threads(threads)

    def _trim(self, chunk: list[list[int]]) -> list[list[int]]:
        """``chunk``'s rows padded to its longest (as a round decoded alone)."""
        eos = self.fmt.eos_token_id
        width = max(r.index(eos) + 1 if eos in r else len(r) for r in chunk)
        return [r[:width] for r in chunk]

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
#: with the refill loop, a job (rounds decoded together) holds this many times the slots
REFILL_JOB = 8


def planned_loop(asked: str, cuda: bool) -> str:
    """The decoding loop ``asked`` names before a model is seen: carry or refill, and for
    ``auto`` refill on CUDA and carry elsewhere."""
    return "carry" if asked == "carry" or (asked == "auto" and not cuda) else "refill"


def decode_loop(model: Any, device: str, asked: str) -> str:
    """The HF backend's decoding loop (:func:`planned_loop`); refill for a model it cannot
    decode (:func:`~zdebias.generation.decode.refill_supported`) is refused, or under
    ``auto`` falls back to carry with a log line."""
    from zdebias.generation.decode import refill_supported

    if planned_loop(asked, device.startswith("cuda")) == "carry":
        return "carry"
    why = refill_supported(model)
    if why is None:
        return "refill"
    if asked == "refill":
        raise ConfigError(f"--decode-loop refill: not for this model ({why}); use carry")
    log.info("hf backend: the carry decoding loop (refill: %s)", why)
    return "carry"


def resumed_decoding(cfg: SampleSettings, state: dict[str, Any]) -> tuple[SampleSettings, Any]:
    """``(settings, slots)`` for the hf backend of a run that resumes: the decoding loop and
    refill slots its earlier calls recorded (``state["compute"]["decode"]``; a run that
    recorded no loop decoded with carry) wherever ``cfg`` leaves them to ``auto``, when it
    resumes on the same kind of device. The automatic slot count follows the free GPU memory
    and a row's ids depend on the slots up to float rounding, so without this a resumed GPU
    run would decode its next rounds otherwise than an unbroken one. ``slots`` is None when
    nothing is kept."""
    recorded = state.get("compute")
    if cfg.backend != "hf" or not state["shards"] or not recorded:
        return cfg, None
    if _device_type(recorded.get("device")) != _device_type(model_device(cfg.device)):
        return cfg, None  # another device: other numbers whatever the loop (logged later)
    decode = recorded.get("decode") or {"loop": "carry"}
    if cfg.decode_loop == "auto":
        cfg = cfg.model_copy(update={"decode_loop": decode["loop"]})
    slots = None
    if cfg.decode_loop == decode["loop"] == "refill" and cfg.decode_batch is None:
        slots = decode.get("slots")
    return cfg, slots


def say_decoding_change(out: Path, before: dict[str, Any], now: dict[str, Any]) -> None:
    """A warning when a resumed run samples on another kind of device, dtype, loop or slot
    count than its earlier calls recorded: its next rows follow the same distribution, not
    the bytes an unbroken run would write."""
    if _decoding(before) == _decoding(now):
        return

    def said(c: dict[str, Any]) -> str:
        device, dtype, loop, slots = _decoding(c)
        return f"{device} {dtype} ({loop}{f', {slots} slots' if slots else ''})"

    log.warning(
        "%s: began sampling on %s and goes on on %s: the next rows are drawn from the same "
        "distribution, not the bytes an unbroken run writes",
        out,
        said(before),
        said(now),
    )


def _decoding(compute: dict[str, Any]) -> tuple[str, Any, str, Any]:
    """``(device type, dtype, loop, slots)`` of a recorded ``compute`` (no loop: carry)."""
    decode = compute.get("decode") or {}
    loop = decode.get("loop", "carry")
    return _device_type(compute.get("device")), compute.get("dtype"), loop, decode.get("slots")


def _device_type(device: Any) -> str:
    """``cuda`` of ``cuda:1``; ``cpu`` of ``cpu``."""
    return str(device).split(":", 1)[0]


def planned_rounds_per_batch(
    batch_size: int, loop: str, cuda: bool, decode_batch: int | None
) -> int:
    """How many rounds the HF backend decodes together: a decoding step reads all the weights
    whatever its rows, so on a CPU a row costs about half as much at 64 rows as at 32
    (docs/scaling.md, "Sampling speed"). Carry: ``decode_batch`` (default
    :data:`ROWS_PER_BATCH`) rows; refill: :data:`REFILL_JOB` times the slots (pinned or the
    most :func:`~zdebias.generation.decode.auto_slots` gives, never the free memory: a resumed
    run groups its rounds as before), so the slots stay full most of a job."""
    if loop == "refill":
        from zdebias.generation.decode import MAX_AUTO_SLOTS

        slots = decode_batch or (MAX_AUTO_SLOTS if cuda else ROWS_PER_BATCH)
        return max(1, REFILL_JOB * slots // batch_size)
    return max(1, (decode_batch or ROWS_PER_BATCH) // batch_size)


def rounds_per_group(
    engine: Any, batch_size: int, settings: SampleSettings | None = None, cuda: bool = False
) -> int:
    """How many rounds a backend decodes as one batch: an instance's ``rounds_per_batch``
    where it has ``generate_rounds`` (HF), else 1. For a backend class (a Ray run's driver,
    which loads no model) the plan from ``settings`` (its ``decode_loop`` as
    :func:`planned_loop` reads it, and ``decode_batch``); each actor decodes in its own
    backend's groups whatever rounds it is asked for, so this only sets how many rounds an
    actor is handed."""
    if not hasattr(engine, "generate_rounds"):
        return 1
    if not isinstance(engine, type):
        return engine.rounds_per_batch(batch_size)
    loop = planned_loop(settings.decode_loop if settings is not None else "carry", cuda)
    decode_batch = settings.decode_batch if settings is not None else None
    return planned_rounds_per_batch(batch_size, loop, cuda, decode_batch)


class RoundBatches:
    """The id rows of round r from a backend. One with ``generate_rounds`` (HF) decodes
    ``rounds_per_batch`` of the run's rounds at once (r0, r0 + stride, ...: a worker's rounds
    when ``stride`` is the number of workers), in groups aligned to the run's first round, so
    a resumed run decodes every round in the same batch as one that never stopped. Rounds
    decoded but never asked for (past the run's end) are only lost time."""

    def __init__(self, engine: Any, batch_size: int, seed: int, stride: int = 1) -> None:
        self.engine, self.batch_size, self.seed, self.stride = engine, batch_size, seed, stride
        self.group = rounds_per_group(engine, batch_size) if engine is not None else 1
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
        return [self._ids(completion) for completion in request.outputs]

    def _ids(self, completion: Any) -> list[int]:
        """A completion's token ids, ending with EOS where it stopped there."""
        ids = list(completion.token_ids)
        if completion.finish_reason == "stop" and self.fmt.eos_token_id not in ids:
            ids.append(self.fmt.eos_token_id)
        return ids

    def complete(
        self, prompts: Sequence[Sequence[int]], seed: int, *, choices: Sequence[int] | None = None
    ) -> list[list[int]]:
        """As :meth:`HFBackend.complete`: with ``choices``, a first request per row draws one
        of them (the label), then the row goes on from its prompt and that token."""
        rows = [list(p) for p in prompts]
        if choices is not None:
            picked = self._run(vllm_requests(self.fmt, self.settings, rows, seed, choices=choices))
            rows = [[*p, *ids[:1]] for p, ids in zip(rows, picked, strict=True)]
        more = self._run(vllm_requests(self.fmt, self.settings, rows, seed))
        return [[*p, *ids] for p, ids in zip(rows, more, strict=True)]

    def _run(self, requests: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[list[int]]:
        from vllm import SamplingParams

        prompts = [prompt for prompt, _ in requests]
        params = [SamplingParams(**kw) for _, kw in requests]
        answers = self.llm.generate(prompts, params, use_tqdm=False)
        return [self._ids(request.outputs[0]) for request in answers]


def vllm_requests(
    fmt: GeneratorFormat,
    settings: SampleSettings,
    prompts: Sequence[Sequence[int]],
    seed: int,
    *,
    choices: Sequence[int] | None = None,
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The vLLM requests that go on from ``prompts`` (ids after the start token): per row the
    prompt ``{"prompt_token_ids": [start, *prompt]}`` and its ``SamplingParams`` keywords
    (a seed per row; the tokens left to ``fmt.max_length``). With ``choices``: one token,
    only from ``choices`` (the label step)."""
    s = settings
    out = []
    for i, prompt in enumerate(prompts):
        params: dict[str, Any] = {
            "n": 1,
            "top_p": s.top_p,
            "top_k": s.top_k if s.top_k > 0 else -1,
            "temperature": s.temperature,
            "skip_special_tokens": False,
            "detokenize": False,
        }
        if choices is not None:
            params.update(seed=round_seed(seed, -1 - i), max_tokens=1)
            params["allowed_token_ids"] = list(choices)
        else:
            params.update(seed=round_seed(seed, i), max_tokens=fmt.max_length - 1 - len(prompt))
            params["stop_token_ids"] = [fmt.eos_token_id]
        out.append(({"prompt_token_ids": [fmt.bos_token_id, *prompt]}, params))
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


#: the trained backends by name (:mod:`zdebias.generation.backends`' catalogue, loaded when
#: first named; an entry set here, by a test or a plugin, is used instead)
BACKENDS = Backends(prompted=False)


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
        if cfg.backend == "vllm" and not cfg.on_ray:  # on Ray the actors hold the GPUs
            check_vllm()
        return cls(path, fmt, dtype)


def _record(
    sample: ParsedSample,
    index: int,
    fmt: GeneratorFormat,
    seed: int,
    round_index: int,
    generator: str,
    extra: dict[str, Any] | None = None,
) -> Record:
    meta = {"type": "generated", "generator": generator, "round": round_index, **(extra or {})}
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
    premises: Sequence[Record] | None = None,
    cells: Sequence[Cell] | None = None,
    progress: bool,
    rounds: Callable[[int], list[list[int]]] | None = None,
) -> dict[str, Any]:
    """Sample ``gen`` into ``out``: the whole run, or with ``goal`` the rounds of worker
    ``goal.index`` of ``goal.workers`` (round I, I + N, ...; whole rounds, ids numbered per
    worker until the merge). With ``premises``, each row is conditioned on a premise (and,
    with ``cfg.per_premise``, a forced label): :mod:`zdebias.generation.conditioned`; with
    ``cells`` too, the rows fill those shortcut-breaking cells, ``n`` at most
    (:mod:`zdebias.generation.targeted`). ``rounds``: where round r's id rows come from when
    not from a backend in this process (Ray actors, :mod:`zdebias.generation.on_ray`; not
    with ``premises``). Returns the summary."""
    from transformers import AutoTokenizer

    worker = (goal.index, goal.workers) if goal is not None else None
    fmt = gen.fmt
    tokenizer = AutoTokenizer.from_pretrained(gen.path)
    special = frozenset(int(i) for i in tokenizer.all_special_ids)
    out.mkdir(parents=True, exist_ok=True)
    run = cfg.run_settings()
    if worker is not None:
        run["worker"] = f"{worker[0]}/{worker[1]}"
    conditioned = targeted = None
    if premises is not None:
        conditioned, info = _conditioned(premises, tokenizer, fmt, cfg, special, cells)
        run.update(premises=premises_digest(premises), attempts=cfg.attempts)
        if cells is not None:
            from zdebias.generation.targeted import TargetedRounds

            assert isinstance(conditioned, TargetedRounds)
            targeted = conditioned.plan
            cfg = cfg.model_copy(update={"n": targeted.total})  # the cells' rows, <= --n
            run["cells"] = targeted.digest()
        else:
            run["per_premise"] = info["per_premise"]
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
    if conditioned is not None:
        state["premises"] = info

    engine = None
    if rounds is None:
        done = goal.finished(state) if goal is not None else state["n_written"] >= cfg.n
        if not (done or state.get("exhausted")):  # exhausted: a targeted run's cells are done
            engine_cfg, slots = resumed_decoding(cfg, state)
            extra = {"slots": slots} if slots else {}
            engine = BACKENDS[cfg.backend](
                gen.path, fmt, engine_cfg, device=cfg.device, dtype=gen.dtype, **extra
            )
            if hasattr(engine, "compute"):  # the latest call's device and dtype, in the summary
                if state["shards"] and state.get("compute"):
                    say_decoding_change(out, state["compute"], engine.compute)
                state["compute"] = engine.compute
            if conditioned is not None:
                conditioned.group = rounds_per_group(engine, cfg.batch_size)
        rounds = RoundBatches(engine, cfg.batch_size, cfg.seed, worker[1] if worker else 1)
    gen_name = gen.path.name

    def produce(round_index: int, _: dict[str, int] | None) -> RoundOutput:
        if conditioned is not None:
            assert engine is not None
            return conditioned(engine, round_index)
        assert rounds is not None
        candidates = []
        for ids in rounds(round_index):
            parsed = parse_output(ids, tokenizer, fmt, special_ids=special)
            # one sequence decodes to one string (transformers types it str | list[str])
            raw = cast("str", tokenizer.decode(ids)) if not parsed.ok else ""
            candidates.append(Candidate(parsed, raw))
        remote = getattr(rounds, "compute", None)  # Ray actors: what they sample on
        if engine is None and remote is not None:
            state["compute"] = remote
        return RoundOutput(candidates)

    def make_record(c: Candidate, index: int, round_index: int) -> Record:
        record = _record(c.parsed, index, fmt, cfg.seed, round_index, gen_name, c.meta)
        if worker is not None:  # the merge numbers the samples of all workers
            return record.replace(id=f"gen-s{cfg.seed}-w{worker[0]}of{worker[1]}:{index}")
        return record

    quota = None
    if conditioned is not None and targeted is None and conditioned.plan.forced:
        per_draw = cfg.n // conditioned.plan.per_premise
        quota = {lab: per_draw * k for lab, k in info["per_premise"].items()}
    summary = run_rounds(
        folder,
        cfg,
        produce,
        make_record,
        progress=progress,
        quota=quota,
        hint="is it trained?",
        goal=goal,
        tally=(lambda c: c.meta.get("cell")) if targeted is not None else None,
    )
    if targeted is not None and summary["complete"]:
        from zdebias.generation.targeted import cells_summary

        summary["premises"] = info
        summary["cells"] = cells_summary(targeted, summary.get("tally", {}))
        write_json(summary, out / SUMMARY)
    elif conditioned is not None and summary["complete"]:
        counts = premise_counts(read_samples(out), conditioned.plan, cfg.batch_size)
        summary["premises"] = {**info, **counts}
        if counts["n_short"]:
            n_short, rows = counts["n_short"], conditioned.plan.per_premise
            log.warning(
                "%d %s fewer than %s %d %s (every decode of a row malformed, or a repeat of an "
                "earlier sample of the same premise); see summary.json",
                n_short,
                "premise got" if n_short == 1 else "premises got",
                "its" if n_short == 1 else "their",
                rows,
                "row" if rows == 1 else "rows",
            )
        write_json(summary, out / SUMMARY)
    return summary


def _conditioned(
    premises: Sequence[Record],
    tokenizer: Any,
    fmt: GeneratorFormat,
    cfg: SampleSettings,
    special: frozenset[int],
    cells: Sequence[Cell] | None = None,
) -> tuple[ConditionedRounds, dict[str, Any]]:
    """The producer of premise-conditioned rounds (targeted at ``cells`` when given) and
    what the summary says about them; refuses a generator without premises, and ``n`` that
    is not whole premises' quotas."""
    if not fmt.pair:
        raise ConfigError(f"--premises: the generator's task {fmt.task!r} has no premise")
    quotas = parse_per_premise(cfg.per_premise, fmt.labels) if cfg.per_premise else None
    fitting, too_long = fitting_premises(premises, tokenizer, fmt)
    if too_long:
        log.warning(
            "--premises: %d premises leave no room for a hypothesis within the generator's "
            "max length %d; skipped",
            too_long,
            fmt.max_length,
        )
    if not fitting:
        raise ConfigError(
            f"--premises: none of the {len(premises)} premises fits the generator's max "
            f"length {fmt.max_length} with a hypothesis"
        )
    info = {
        "n_premises": len(premises),
        "n_unique": len(fitting) + too_long,
        "n_too_long": too_long,
        "attempts": cfg.attempts,
    }
    if cells is not None:
        from zdebias.generation.targeted import targeted_rounds

        producer = targeted_rounds(cells, fitting, tokenizer, fmt, cfg, special)
        return producer, {"labels": "forced", **info}
    plan = PremisePlan.of(fitting, seed=cfg.seed, per_premise=quotas)
    if cfg.n % plan.per_premise:
        raise ConfigError(
            f"--n {cfg.n}: not a multiple of {plan.per_premise}, the rows --per-premise asks "
            "for each premise"
        )
    rounds = ConditionedRounds(
        plan, tokenizer, fmt, cfg.batch_size, cfg.seed, cfg.attempts, special
    )
    return rounds, {"per_premise": quotas, "labels": "forced" if quotas else "sampled", **info}


__all__ = [
    "BACKENDS",
    "ROWS_PER_BATCH",
    "HFBackend",
    "RoundBatches",
    "TrainedGenerator",
    "VllmBackend",
    "check_vllm",
    "generator_fingerprint",
    "rounds_per_group",
    "sample_trained",
    "vllm_engine_args",
    "vllm_requests",
]
