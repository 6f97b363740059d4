"""The HF sampler's decoding loop: KV cache, finished rows dropped, nucleus sampling on a short
list (SPEC §6; used by :class:`zdebias.generation.sample.HFBackend`).

``model.generate`` spent most of a CPU sampling round outside the model: every step it sorted
the whole vocabulary (49k for SmolLM2) for top-p and drew with ``torch.multinomial`` over it,
and every row ran until the longest row of the batch ended. Here, per step:

- the nucleus is found among the ``width`` most likely tokens (``topk``), widened only for
  rows whose top ``width`` tokens hold less than ``top_p`` of the mass, so the nucleus is
  exact, the same set ``TopPLogitsWarper`` keeps (after temperature and top-k, in that order);
- each row draws its token by inverse CDF with its own uniform number: the uniforms of a round
  are drawn up front, ``(max_new_tokens, batch)``, from a generator seeded with the round's
  seed, so a row's draws do not depend on which other rows are still running;
- rows that wrote the end token leave the batch (and the KV cache) once a quarter of the
  batch has finished; the loop ends when every row has ended or at ``max_new_tokens``.

The output is what ``model.generate`` returns, minus the start token: one id list per row, the
rows padded with the pad id to the longest. The samples are not the ones ``model.generate``
draws with the same seed (another random stream), but they come from the same distribution and
are as reproducible: the same seed, model and device give the same ids. Only temperature,
top-k and top-p shape the distribution: other logits processors a model's
``generation_config.json`` may ask for (``repetition_penalty``, ...) are not applied.

>>> ids = decode(model, 1, 2, 2, 47, uniforms(47, 32, seed), top_p=0.9)  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import torch

#: candidates looked at first for the nucleus; widened by ``_WIDEN`` while too few
DEFAULT_WIDTH = 64
_WIDEN = 16
#: finished rows leave the batch once they are at least this share of it
COMPACT_SHARE = 0.25


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
