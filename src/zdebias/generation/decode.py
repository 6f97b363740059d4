"""The HF sampler's decoding loops: KV cache, nucleus sampling on a short list, per-row
seeded draws (docs/design.md §6; used by :class:`zdebias.generation.trained.HFBackend`).

``model.generate`` spent most of a CPU sampling round outside the model: every step it sorted
the whole vocabulary (49k for SmolLM2) for top-p and drew with ``torch.multinomial`` over it,
and every row ran until the longest row of the batch ended. Here, per step:

- the nucleus is found among the ``width`` most likely tokens (``topk``), widened only for
  rows whose top ``width`` tokens hold less than ``top_p`` of the mass, so the nucleus is
  exact, the same set ``TopPLogitsWarper`` keeps (after temperature and top-k, in that order);
- each row draws its token by inverse CDF with its own uniform number: the uniforms of a round
  are drawn up front, ``(max_new_tokens, batch)``, from a generator seeded with the round's
  seed; row i's token at place p is drawn with ``u[p, i]`` whatever rows share its batch.

Two loops use these draws:

- :func:`decode` (*carry*, the default off CUDA): every row of the job starts at once, with a
  ``DynamicCache``; rows that wrote the end token leave the batch (and the cache) once a
  quarter of the batch has finished; the loop ends when every row has ended or at
  ``max_new_tokens``.
- :class:`SlotDecoder` (*refill*, the default on CUDA): a fixed number of slots, each with its
  own rows of a static KV cache (``(slots, heads, max_new_tokens, head_dim)`` per layer) and
  its own position; a slot whose row ended takes the next row of the job at once (prompts are
  read for a few freed slots together in one pass), so the batch stays full until the job
  runs out of rows; then the live slots are packed to the front (eager only). The step's
  shapes never change, so it can be compiled (``compile``: ``torch.compile``, CUDA graphs
  on a GPU).

The output is what ``model.generate`` returns, minus the start token: one id list per row, the
rows padded with the pad id to the longest. The samples are not the ones ``model.generate``
draws with the same seed (another random stream), but they come from the same distribution and
are as reproducible: the same seed, model, device, dtype, loop and slots give the same ids
(byte-identical; on a GPU where its kernels are deterministic for fixed shapes, as cuBLAS and
SDPA are run to run). Across loops, slot counts or batch sizes a row's ids are the same up to
float rounding: equal on CPU in float32 for the tiny test models (tests/unit/generation/
test_decode.py), and on a GPU in bfloat16 the same distribution, a token now and then
different. Only temperature, top-k and top-p shape the distribution: other logits processors
a model's ``generation_config.json`` may ask for (``repetition_penalty``, ...) are not
applied.

>>> ids = decode(model, 1, 2, 2, 47, uniforms(47, 32, seed), top_p=0.9)  # doctest: +SKIP
>>> ids = SlotDecoder(model, 47, slots=1024)(1, 2, 2, uniforms(47, 4096, seed))  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from functools import cache, partial
from typing import Any, cast

import torch

#: candidates looked at first for the nucleus; widened by ``_WIDEN`` while too few
DEFAULT_WIDTH = 64
_WIDEN = 16
#: finished rows leave the batch once they are at least this share of it
COMPACT_SHARE = 0.25
#: :class:`SlotDecoder` reads prompts for freed slots once they are this share of the slots
REFILL_SHARE = 0.125
#: the most slots :func:`auto_slots` gives (past ~2k rows a step's cost grows with its rows)
MAX_AUTO_SLOTS = 2048
#: the share of the free GPU memory :func:`auto_slots` fills with slots
FREE_SHARE = 0.8


def uniforms(
    steps: int, batch_size: int, seed: int, device: str | torch.device = "cpu"
) -> torch.Tensor:
    """The uniform numbers of one round: ``(steps, batch_size)``, seeded (row i uses column i)."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    return torch.rand(steps, batch_size, generator=generator).to(device)


def candidates(
    logits: torch.Tensor,
    *,
    top_p: float = 1.0,
    top_k: int = 0,
    temperature: float = 1.0,
    width: int = DEFAULT_WIDTH,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """The tokens a row may draw and their weights: ``(ids, weights)``, both ``(rows, c)``
    (``ids`` None: all the vocabulary, in order). Weights are the probabilities after
    temperature and top-k, zero outside the top-p nucleus (not renormalised)."""
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    vocab = logits.shape[-1]
    ids: torch.Tensor | None
    if 0 < top_k < vocab:
        values, ids = logits.topk(top_k, dim=-1)
        probs = torch.softmax(values, dim=-1)
    elif top_p < 1.0:
        log_norm = torch.logsumexp(logits, dim=-1, keepdim=True)
        k = min(width, vocab)
        values, ids = logits.topk(k, dim=-1)
        probs = torch.exp(values - log_norm)
        short = (probs.sum(dim=-1) < top_p).nonzero().squeeze(-1)
        while len(short) and k < vocab:  # rows whose nucleus is wider: more candidates
            k_old, k = k, min(k * _WIDEN, vocab)
            ids = torch.cat([ids, ids.new_zeros(len(ids), k - k_old)], dim=-1)
            probs = torch.cat([probs, probs.new_zeros(len(probs), k - k_old)], dim=-1)
            values, ids[short] = logits[short].topk(k, dim=-1)
            probs[short] = torch.exp(values - log_norm[short])
            short = short[probs[short].sum(dim=-1) < top_p]
    else:
        ids, probs = None, torch.softmax(logits, dim=-1)
    if top_p < 1.0:  # keep a token while the mass of the tokens before it is below top_p
        probs = probs * ((probs.cumsum(dim=-1) - probs) < top_p)
    return ids, probs


def sample_next(
    logits: torch.Tensor,
    u: torch.Tensor,
    *,
    top_p: float = 1.0,
    top_k: int = 0,
    temperature: float = 1.0,
    width: int = DEFAULT_WIDTH,
) -> torch.Tensor:
    """One token per row of ``logits`` ``(rows, vocab)``, drawn with the uniform ``u[row]``
    from the temperature / top-k / top-p distribution (inverse CDF)."""
    ids, probs = candidates(logits, top_p=top_p, top_k=top_k, temperature=temperature, width=width)
    cdf = probs.cumsum(dim=-1)
    target = (u.to(cdf.dtype) * cdf[:, -1]).unsqueeze(-1)
    last = (probs > 0).long().cumsum(dim=-1).argmax(dim=-1, keepdim=True)  # u·mass rounded up
    pick = torch.minimum(torch.searchsorted(cdf, target, right=True), last)
    return (pick if ids is None else ids.gather(-1, pick)).squeeze(-1)


def _cache_keyword(model: Any) -> str:
    """``cache`` (transformers >= 5.x) or ``past_key_values`` (before the rename)."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def decode(
    model: Any,
    start_id: int,
    eos_id: int,
    pad_id: int,
    max_new_tokens: int,
    u: torch.Tensor,
    *,
    top_p: float = 1.0,
    top_k: int = 0,
    temperature: float = 1.0,
    width: int = DEFAULT_WIDTH,
    compact_share: float = COMPACT_SHARE,
    stats: dict[str, int] | None = None,
    prompts: Sequence[Sequence[int]] | None = None,
    choices: Sequence[int] | None = None,
    prefill: bool = True,
) -> list[list[int]]:
    """Sample ``u.shape[1]`` sequences from ``start_id`` (see the module doc): the ids after
    the start token, each ending with ``eos_id`` unless ``max_new_tokens`` cut it, padded with
    ``pad_id`` to the longest. ``u``: the uniforms, ``(max_new_tokens, rows)``; ``stats``, if
    given, gets ``steps`` (forward passes) and ``row_steps`` (rows the model ran, summed over
    the passes) added.

    ``prompts``: per row, the tokens that follow the start token, kept as they are (the row
    samples from the place after its prompt, its token at place p drawn with ``u[p]``; every
    row keeps the positions it would have alone); ``choices``: the only tokens a row may draw
    right after its prompt (the label tokens, when the model picks the label of a given
    premise). ``prefill``: read the prompts in one forward pass (:func:`_prefilled`), else
    feed them a token a step; the same ids up to float rounding."""
    from transformers import DynamicCache

    draw = partial(sample_next, top_p=top_p, top_k=top_k, temperature=temperature, width=width)
    if prompts is not None and prefill:
        ends = (start_id, eos_id, pad_id, max_new_tokens)
        return _prefilled(model, ends, u, prompts, draw, compact_share, stats, choices)
    device = next(model.parameters()).device
    rows = u.shape[1]
    forced = _forced(prompts, rows, device)
    choice_ids = torch.tensor(list(choices), device=device) if choices is not None else None
    out = torch.full((rows, max_new_tokens), pad_id, dtype=torch.long, device=device)
    active = torch.arange(rows, device=device)  # the output row of each batch row
    running = torch.ones(rows, dtype=torch.bool, device=device)  # not ended, per batch row
    tokens = torch.full((rows, 1), start_id, dtype=torch.long, device=device)
    cache = DynamicCache(config=model.config)
    keyword = _cache_keyword(model)
    steps = row_steps = 0
    with torch.inference_mode():
        for step in range(max_new_tokens):
            row_steps += len(active)
            logits = model(input_ids=tokens, use_cache=True, **{keyword: cache}).logits[:, -1, :]
            if choice_ids is not None and forced is not None:  # first step after a prompt
                choose = (forced[1][active] == step).nonzero().squeeze(-1)
                if len(choose):
                    allowed = logits[choose][:, choice_ids]
                    logits[choose] = -math.inf
                    logits[choose[:, None], choice_ids] = allowed
            nxt = draw(logits, u[step, active])
            if forced is not None and step < forced[0].shape[1]:  # prompt tokens as given
                given = forced[1][active] > step
                nxt = torch.where(given, forced[0][active, step], nxt)
            nxt = torch.where(running, nxt, pad_id)  # an ended row waiting to leave: padding
            out[active, step] = nxt
            steps = step + 1
            running &= nxt != eos_id
            n_running = int(running.sum())
            if n_running == 0:
                break
            if len(active) - n_running >= compact_share * len(active):
                active, nxt, running = _leave(cache, running, active, nxt, running)
            tokens = nxt.unsqueeze(-1)
    _count(stats, steps, row_steps)
    return out[:, :steps].tolist()


def _prefilled(
    model: Any,
    ends: tuple[int, int, int, int],
    u: torch.Tensor,
    prompts: Sequence[Sequence[int]],
    draw: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    compact_share: float,
    stats: dict[str, int] | None,
    choices: Sequence[int] | None,
) -> list[list[int]]:
    """:func:`decode` with the prompts read in one forward pass (prefill). ``ends``: the
    start, end and pad ids and ``max_new_tokens``; ``draw``: :func:`sample_next` with the
    sampling settings.

    The rows are left-padded to the longest prompt (the padding masked out, each row at its own
    positions), so every row starts sampling at the same pass; row i's token at place p is
    drawn with ``u[p, i]``, as when the prompt is fed a token a step: the same ids up to float
    rounding, in a fraction of the forward passes (on a CPU a pass costs about as much for 1
    token a row as for 20)."""
    from transformers import DynamicCache

    start_id, eos_id, pad_id, max_new_tokens = ends
    device = next(model.parameters()).device
    rows = u.shape[1]
    if len(prompts) != rows:
        raise ValueError(f"{len(prompts)} prompts for {rows} rows")
    longest = max((len(p) for p in prompts), default=0)
    tokens = torch.full((rows, longest + 1), pad_id, dtype=torch.long)
    mask = torch.zeros(rows, longest + 1, dtype=torch.long)
    out = torch.full((rows, max_new_tokens), pad_id, dtype=torch.long)
    for i, p in enumerate(prompts):
        tokens[i, longest - len(p)] = start_id
        tokens[i, longest + 1 - len(p) :] = torch.tensor(list(p), dtype=torch.long)
        mask[i, longest - len(p) :] = 1
        out[i, : min(len(p), max_new_tokens)] = torch.tensor(list(p)[:max_new_tokens])
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    tokens, mask, positions, out = (t.to(device) for t in (tokens, mask, positions, out))
    place = torch.tensor([len(p) for p in prompts], dtype=torch.long, device=device)
    choice_ids = torch.tensor(list(choices), device=device) if choices is not None else None
    active = torch.arange(rows, device=device)
    running = place < max_new_tokens
    cache = DynamicCache(config=model.config)
    keyword = _cache_keyword(model)
    steps = row_steps = 0
    with torch.inference_mode():
        while bool(running.any()):
            steps, row_steps = steps + 1, row_steps + len(active)
            logits = model(
                input_ids=tokens,
                attention_mask=mask,
                position_ids=positions,
                use_cache=True,
                **{keyword: cache},
            ).logits[:, -1, :]
            if choice_ids is not None and steps == 1:  # the token right after each prompt
                allowed = logits[:, choice_ids]
                logits = torch.full_like(logits, -math.inf)
                logits[:, choice_ids] = allowed
            at = place[active].clamp(max=max_new_tokens - 1)
            nxt = torch.where(running, draw(logits, u[at, active]), pad_id)
            out[active[running], at[running]] = nxt[running]
            place[active] += running.long()
            running &= (nxt != eos_id) & (place[active] < max_new_tokens)
            if not bool(running.any()):
                break
            if len(active) - int(running.sum()) >= compact_share * len(active):
                active, nxt, running, mask = _leave(cache, running, active, nxt, running, mask)
            tokens = nxt.unsqueeze(-1)
            mask = torch.cat([mask, mask.new_ones(len(mask), 1)], dim=-1)
            positions = place[active].unsqueeze(-1)
    _count(stats, steps, row_steps)
    return out[:, : int(place.max()) if rows else 0].tolist()


def _leave(cache: Any, running: torch.Tensor, *rows: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Drop the ended rows from the KV cache and from each of ``rows`` (batch-first)."""
    keep = running.nonzero().squeeze(-1)
    cache.batch_select_indices(keep)
    return tuple(t[keep] for t in rows)


def _count(stats: dict[str, int] | None, steps: int, row_steps: int) -> None:
    """Add a decode's forward passes and rows x passes to ``stats``."""
    if stats is not None:
        stats["steps"] = stats.get("steps", 0) + steps
        stats["row_steps"] = stats.get("row_steps", 0) + row_steps


def _forced(
    prompts: Sequence[Sequence[int]] | None, rows: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(tokens [rows, longest], lengths [rows])`` of the rows' prompts, or None."""
    if prompts is None:
        return None
    if len(prompts) != rows:
        raise ValueError(f"{len(prompts)} prompts for {rows} rows")
    width = max(1, max(len(p) for p in prompts))
    tokens = torch.zeros(rows, width, dtype=torch.long)
    for i, p in enumerate(prompts):
        tokens[i, : len(p)] = torch.tensor(list(p), dtype=torch.long)
    lengths = torch.tensor([len(p) for p in prompts], dtype=torch.long)
    return tokens.to(device), lengths.to(device)


# --------------------------------------------------------------------------- refill loop


def auto_slots(model: Any, max_new_tokens: int, device: Any = None) -> int:
    """Slots for :class:`SlotDecoder` on ``device`` (default: the model's): off CUDA 128; on
    CUDA as many as :data:`FREE_SHARE` of the free memory holds, a multiple of 64 from 64 to
    :data:`MAX_AUTO_SLOTS`, a slot costing its KV rows (2 x layers x KV heads x head size x
    ``max_new_tokens`` values) plus its step's work (logits in the model dtype and three
    float32 copies, hidden states)."""
    device = torch.device(device) if device is not None else next(model.parameters()).device
    if device.type != "cuda":
        return 128
    free, _total = torch.cuda.mem_get_info(device)
    per_row = slot_bytes(model, max_new_tokens)
    fits = int(FREE_SHARE * free // per_row) // 64 * 64
    return max(64, min(MAX_AUTO_SLOTS, fits))


def slot_bytes(model: Any, max_new_tokens: int) -> int:
    """The GPU bytes one slot of :class:`SlotDecoder` takes (see :func:`auto_slots`)."""
    cfg = model.config.get_text_config()
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    size = next(model.parameters()).element_size()
    kv = 2 * cfg.num_hidden_layers * kv_heads * head_dim * max_new_tokens * size
    work = cfg.vocab_size * (size + 12) + 16 * cfg.hidden_size * size
    return int(kv + work)


def refill_supported(model: Any) -> str | None:
    """Why :class:`SlotDecoder` cannot decode with ``model`` (None: it can): it needs full
    attention that takes a 4-D mask (eager or sdpa) and the ``Cache`` API."""
    cfg = model.config.get_text_config()
    attention = getattr(cfg, "_attn_implementation", None) or "eager"
    if attention not in ("eager", "sdpa"):
        return f"attention {attention!r} takes no 4-D mask"
    if getattr(cfg, "sliding_window", None) or getattr(cfg, "is_encoder_decoder", False):
        return "sliding-window or encoder-decoder attention"
    if getattr(cfg, "model_type", "") not in _REFILL_MODELS:
        return f"model type {cfg.model_type!r} not tested with the refill loop"
    return None


#: model types :class:`SlotDecoder` is tested with (tests/unit/generation/test_decode.py)
_REFILL_MODELS = ("gpt2", "llama")


@cache
def _slot_cache_type() -> type:
    """The ``Cache`` of :class:`SlotDecoder` (built on first use: transformers imports late).

    Each layer holds ``(slots, heads, length, head_dim)`` keys and values. A decoding step
    (``owner.rows`` None) writes one position per slot, the slot's ``owner.place``, and
    returns the slots' rows as they are (the mask hides other positions); a prefill writes
    ``owner.places`` ``(k, q)`` of the slots ``owner.rows`` and returns those slots' rows."""
    from transformers.cache_utils import Cache, CacheLayerMixin

    class SlotLayer(CacheLayerMixin):
        is_compileable = True
        is_sliding = False
        keys: torch.Tensor  # set by lazy_initialization, before anything reads them
        values: torch.Tensor

        def __init__(self, owner: Any) -> None:
            super().__init__()
            self.owner = owner

        def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
            o = self.owner
            heads = key_states.shape[1]
            self.keys = key_states.new_zeros(o.slots, heads, o.length, key_states.shape[-1])
            self.values = value_states.new_zeros(o.slots, heads, o.length, value_states.shape[-1])
            self.device = key_states.device
            if o.static:
                torch._dynamo.mark_static_address(self.keys)
                torch._dynamo.mark_static_address(self.values)
            self.is_initialized = True

        def update(
            self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
        ) -> tuple[torch.Tensor, torch.Tensor]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            o = self.owner
            keys, values = self.keys[: o.width], self.values[: o.width]
            if o.rows is None:
                at = o.place.view(-1, 1, 1, 1)
                keys.scatter_(2, at.expand_as(key_states), key_states)
                values.scatter_(2, at.expand_as(value_states), value_states)
                return keys, values
            rows, places = o.rows[:, None], o.places
            keys[rows, :, places] = key_states.transpose(1, 2)
            values[rows, :, places] = value_states.transpose(1, 2)
            return keys[o.rows], values[o.rows]

        def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
            return self.owner.length, 0

        def get_seq_length(self) -> int:
            return 0  # positions are always given

        def get_max_length(self) -> int:
            return int(self.owner.length)

    class SlotCache(Cache):
        def __init__(self, slots: int, length: int, *, static: bool) -> None:
            super().__init__(layer_class_to_replicate=partial(SlotLayer, self))  # type: ignore[arg-type]
            self.slots, self.length, self.width, self.static = slots, length, slots, static
            self.place: torch.Tensor | None = None
            self.rows: torch.Tensor | None = None
            self.places: torch.Tensor | None = None

        def pack(self, keep: torch.Tensor) -> None:
            """Move the slots ``keep`` to the front; the width becomes ``len(keep)``."""
            for layer in cast("list[SlotLayer]", self.layers):
                if layer.is_initialized:
                    layer.keys[: len(keep)] = layer.keys[keep]
                    layer.values[: len(keep)] = layer.values[keep]
            self.width = len(keep)

    return SlotCache


class SlotDecoder:
    """The refill loop (module doc): ``slots`` rows decoded at once, each slot on its own
    position in a static KV cache, a finished row replaced by the job's next one.

    ``compile``: run the decoding step through ``torch.compile`` (``mode``: default
    ``reduce-overhead``, CUDA graphs, on CUDA; ``default`` elsewhere), after one eager step
    has allocated the cache; the slots are then never packed, so the step keeps one shape.
    The decoder keeps its cache (and compiled step) from job to job."""

    def __init__(
        self,
        model: Any,
        max_new_tokens: int,
        slots: int | None = None,
        *,
        compile: bool = False,
        mode: str | None = None,
        backend: str = "inductor",
        refill_share: float = REFILL_SHARE,
        compact_share: float = COMPACT_SHARE,
    ) -> None:
        self.model = model
        self.length = max_new_tokens
        self.device = next(model.parameters()).device
        self.slots = slots or auto_slots(model, max_new_tokens, self.device)
        self.keyword = _cache_keyword(model)
        self.cache = _slot_cache_type()(self.slots, max_new_tokens, static=compile)
        self.refill_share, self.compact_share = refill_share, compact_share
        self.dtype = next(model.parameters()).dtype
        self.positions = torch.arange(max_new_tokens, device=self.device)
        self.compiled: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
        if compile:
            if mode is None:
                mode = "reduce-overhead" if self.device.type == "cuda" else "default"
            self.compiled = torch.compile(
                self._step, mode=mode, backend=backend, fullgraph=True, dynamic=False
            )

    def _mask(self, query: torch.Tensor) -> torch.Tensor:
        """The additive mask ``(rows, 1, q, length)`` that lets a query at place p see its
        slot's places 0..p (``query``: ``(rows, q)`` places)."""
        hidden = self.positions.view(1, 1, 1, -1) > query[:, None, :, None]
        zeros = torch.zeros(hidden.shape, dtype=self.dtype, device=self.device)
        return zeros.masked_fill(hidden, torch.finfo(self.dtype).min)

    def _step(self, token: torch.Tensor, place: torch.Tensor) -> torch.Tensor:
        """One decoding step of every slot: the logits ``(slots, vocab)`` after ``token``
        fed at ``place``."""
        self.cache.place = place
        out = self.model(
            input_ids=token[:, None],
            position_ids=place[:, None],
            attention_mask=self._mask(place[:, None]),
            use_cache=True,
            **{self.keyword: self.cache},
        )
        return out.logits[:, -1, :]

    def __call__(
        self,
        start_id: int,
        eos_id: int,
        pad_id: int,
        u: torch.Tensor,
        *,
        stats: dict[str, int] | None = None,
        prompts: Sequence[Sequence[int]] | None = None,
        choices: Sequence[int] | None = None,
        **sampling: Any,
    ) -> list[list[int]]:
        """The rows :func:`decode` returns for the same arguments (``u``: ``(max_new_tokens,
        rows)``; ``sampling``: ``top_p``, ``top_k``, ``temperature``, ``width`` as
        :func:`sample_next` takes them), up to float rounding. ``stats``: ``steps`` (forward
        passes: decoding steps and prefills), ``row_steps`` (rows the model ran, summed over
        the passes: every slot of a step, live or idle) and ``live_row_steps`` (the live slots
        of the decoding steps: without prompts, the rows' lengths summed;
        ``live_row_steps / row_steps`` is how full the slots were)."""
        if u.shape[0] != self.length:
            raise ValueError(f"uniforms for {u.shape[0]} places; the decoder has {self.length}")
        draw = partial(sample_next, **sampling)
        job = _Job(self, (start_id, eos_id, pad_id), u, prompts, choices, draw)
        with torch.no_grad():
            job.run()
        if stats is not None:
            for key in ("steps", "row_steps", "live_row_steps"):
                stats[key] = stats.get(key, 0) + job.counts[key]
        return job.out[: job.rows, : job.longest].tolist()


class _Job:
    """One :class:`SlotDecoder` call: its rows, the slots' state and the output."""

    def __init__(
        self,
        dec: SlotDecoder,
        ids: tuple[int, int, int],
        u: torch.Tensor,
        prompts: Sequence[Sequence[int]] | None,
        choices: Sequence[int] | None,
        draw: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    ) -> None:
        self.dec, self.u, self.draw = dec, u, draw
        self.start_id, self.eos_id, self.pad_id = ids
        self.rows = u.shape[1]
        device, length, slots = dec.device, dec.length, dec.slots
        if prompts is not None and len(prompts) != self.rows:
            raise ValueError(f"{len(prompts)} prompts for {self.rows} rows")
        self.prompts = [list(p) for p in prompts] if prompts is not None else None
        self.choices = torch.tensor(list(choices), device=device) if choices is not None else None
        # row `rows` of `out` is where idle slots write
        self.out = torch.full((self.rows + 1, length), self.pad_id, dtype=torch.long)
        lengths = [0] * self.rows
        for i, p in enumerate(self.prompts or []):
            lengths[i] = min(len(p), length)
            self.out[i, : lengths[i]] = torch.tensor(p[:length], dtype=torch.long)
        self.out = self.out.to(device)
        self.longest = max(lengths, default=0)
        #: the rows still to decode (a prompt as long as the rows is a whole row already)
        self.queue = [i for i in range(self.rows) if lengths[i] < length]
        self.next = 0
        self.row = torch.full((slots,), self.rows, dtype=torch.long, device=device)
        self.place = torch.zeros(slots, dtype=torch.long, device=device)
        self.token = torch.full((slots,), self.start_id, dtype=torch.long, device=device)
        self.live = torch.zeros(slots, dtype=torch.bool, device=device)
        self.top = torch.zeros((), dtype=torch.long, device=device)  # longest row written
        self.counts = {"steps": 0, "row_steps": 0, "live_row_steps": 0}
        dec.cache.width = slots

    def run(self) -> None:
        """Decode every row of the queue."""
        dec, cache = self.dec, self.dec.cache
        while True:
            width = cache.width
            n_live = int(self.live[:width].sum())
            waiting = len(self.queue) - self.next
            free = width - n_live
            if (
                waiting
                and free
                and (self.prompts is None or not n_live or free >= dec.refill_share * width)
            ):
                self._refill((~self.live[:width]).nonzero().squeeze(-1)[:waiting])
                n_live = int(self.live[:width].sum())
            if not n_live:
                if self.next >= len(self.queue):
                    break
                continue
            if (
                dec.compiled is None
                and self.next >= len(self.queue)
                and width - n_live >= dec.compact_share * width
            ):
                self._pack(self.live[:width].nonzero().squeeze(-1))
                width = cache.width
            self._decode_step(width, n_live)
        self.longest = max(self.longest, int(self.top))

    def _decode_step(self, width: int, n_live: int) -> None:
        """Every slot feeds its token and draws the next; the live slots write it."""
        dec, length = self.dec, self.dec.length
        place, row, live = self.place[:width], self.row[:width], self.live[:width]
        first = self.counts["steps"] == 0 and dec.compiled is not None
        step = dec._step if first or dec.compiled is None else dec.compiled
        logits = step(self.token[:width], place)
        self.counts["steps"] += 1
        self.counts["row_steps"] += width
        self.counts["live_row_steps"] += n_live
        nxt = self.draw(logits, self.u[place, row.clamp(max=self.rows - 1)])
        self.out[torch.where(live, row, self.rows), place] = nxt
        self.top = torch.maximum(self.top, ((place + 1) * live).max())
        going = live & (nxt != self.eos_id) & (place + 1 < length)
        self.place[:width] = torch.where(going, place + 1, place)
        self.token[:width] = nxt
        self.live[:width] = going

    def _refill(self, free: torch.Tensor) -> None:
        """The next rows of the queue into the slots ``free``: at their start token, or
        (prompts) with the prompts read and the first token drawn, in one pass."""
        new = self.queue[self.next : self.next + len(free)]
        self.next += len(new)
        rows = torch.tensor(new, dtype=torch.long, device=self.dec.device)
        if self.prompts is None:
            self.row[free], self.place[free] = rows, 0
            self.token[free], self.live[free] = self.start_id, True
            return
        self._prefill(free, rows, [self.prompts[i] for i in new])

    def _prefill(self, free: torch.Tensor, rows: torch.Tensor, prompts: list[list[int]]) -> None:
        """Read ``prompts`` (after the start token, right-padded) into the slots ``free`` in
        one forward pass and draw each row's token after its prompt."""
        dec, cache, device, length = self.dec, self.dec.cache, self.dec.device, self.dec.length
        width = 1 + max(len(p) for p in prompts)
        tokens = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        tokens[:, 0] = self.start_id
        for i, p in enumerate(prompts):
            tokens[i, 1 : 1 + len(p)] = torch.tensor(p, dtype=torch.long)
        tokens = tokens.to(device)
        at = torch.tensor([len(p) for p in prompts], dtype=torch.long, device=device)
        places = torch.arange(width, device=device).expand(len(prompts), width)
        cache.rows, cache.places = free, places
        try:
            logits = dec.model(
                input_ids=tokens,
                position_ids=places,
                attention_mask=dec._mask(places),
                use_cache=True,
                **{dec.keyword: cache},
            ).logits
        finally:
            cache.rows = cache.places = None
        logits = logits[torch.arange(len(prompts), device=device), at]
        if self.choices is not None:  # the token right after each prompt
            allowed = logits[:, self.choices]
            logits = torch.full_like(logits, -math.inf)
            logits[:, self.choices] = allowed
        self.counts["steps"] += 1
        self.counts["row_steps"] += len(prompts)
        nxt = self.draw(logits, self.u[at, rows])
        self.out[rows, at] = nxt
        self.top = torch.maximum(self.top, (at + 1).max())
        going = (nxt != self.eos_id) & (at + 1 < length)
        self.row[free], self.place[free] = rows, torch.where(going, at + 1, at)
        self.token[free], self.live[free] = nxt, going

    def _pack(self, keep: torch.Tensor) -> None:
        """The live slots ``keep`` to the front (cache rows and state): a narrower step."""
        self.dec.cache.pack(keep)
        for t in (self.row, self.place, self.token, self.live):
            t[: len(keep)] = t[keep].clone()
