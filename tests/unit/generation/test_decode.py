"""The sampler's decoding loop: the nucleus HF's warpers keep, draws by hand, rows that do not
depend on their batch, and the same ids as ``model.generate`` where both are deterministic."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from zdebias.generation.decode import (
    candidates,
    decode,
    sample_next,
    uniforms,
)


def _distribution(logits: torch.Tensor, **options: Any) -> torch.Tensor:
    ids, weights = candidates(logits, **options)
    full = weights if ids is None else torch.zeros_like(logits).scatter_add_(1, ids, weights)
    return full / full.sum(dim=-1, keepdim=True)


def test_draws_by_hand_on_five_tokens() -> None:
    # p = 0.5, 0.25, 0.125, 0.0625, 0.0625; top-p 0.7 keeps the first two (mass before the
    # third is 0.75 >= 0.7): weights 0.5, 0.25 → the CDF 0.5, 0.75 is cut at u·0.75
    logits = torch.tensor([[0.5, 0.25, 0.125, 0.0625, 0.0625]]).log().repeat(4, 1)
    u = torch.tensor([0.0, 0.6, 0.7, 0.999])
    assert sample_next(logits, u, top_p=0.7).tolist() == [0, 0, 1, 1]
    # the first candidate list (width 1: mass 0.5 < 0.7) is widened: the same draws
    assert sample_next(logits, u, top_p=0.7, width=1).tolist() == [0, 0, 1, 1]
    # u next to 1 never lands on a token outside the nucleus (or on a padded candidate)
    u = torch.full((4,), 1 - 2**-24)
    assert sample_next(logits, u, top_p=0.7, width=1).tolist() == [1, 1, 1, 1]
    # no top-p: the whole CDF 0.5, 0.75, 0.875, 0.9375, 1
    u = torch.tensor([0.49, 0.51, 0.8, 0.9])
    assert sample_next(logits, u).tolist() == [0, 1, 2, 3]
    # top-k 3 renormalises over 0.5, 0.25, 0.125 (CDF 4/7, 6/7, 1)
    u = torch.tensor([0.57, 0.58, 0.85, 0.86])
    assert sample_next(logits, u, top_k=3).tolist() == [0, 1, 1, 2]


@pytest.mark.parametrize(
    ("temperature", "top_k", "top_p"),
    [(1.0, 0, 0.9), (0.7, 0, 0.5), (1.3, 50, 0.9), (1.0, 20, 1.0), (1.0, 0, 1.0), (2.0, 0, 0.99)],
)
def test_distribution_equals_hf_warpers(temperature: float, top_k: int, top_p: float) -> None:
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 3000, generator=generator) * 3
    logits[0] = torch.randn(3000, generator=generator) * 0.01  # near flat: widened to all
    warpers = [TemperatureLogitsWarper(temperature)]
    warpers += [TopKLogitsWarper(top_k)] if top_k else []
    warpers += [TopPLogitsWarper(top_p)] if top_p < 1 else []
    scores = logits.clone()
    for warper in warpers:
        scores = warper(None, scores)
    ours = _distribution(logits, top_p=top_p, top_k=top_k, temperature=temperature, width=8)
    hf = torch.softmax(scores, dim=-1)
    assert torch.equal(ours > 0, hf > 0)  # the same tokens kept
    assert torch.allclose(ours, hf, atol=1e-6)


@pytest.fixture(scope="module")
def tiny_lms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM

    from zdebias.models.tiny import make_tiny_model

    root = tmp_path_factory.mktemp("decode")
    return {
        kind: AutoModelForCausalLM.from_pretrained(make_tiny_model(kind, root / kind)).eval()
        for kind in ("gpt2", "llama")
    }


def _frequent_token(model: Any, steps: int, u: torch.Tensor) -> int:
    """An end token that ends rows at many different steps: the token whose first place in
    the rows the model writes without one varies most."""
    firsts: dict[int, set[int]] = {}
    for row in decode(model, 1, -1, 0, steps, u, top_p=0.9):
        for token in set(row):
            firsts.setdefault(token, set()).add(row.index(token))
    return max(firsts, key=lambda token: (len(firsts[token]), -token))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_rows_do_not_depend_on_their_batch(kind: str, tiny_lms: dict[str, Any]) -> None:
    model, steps = tiny_lms[kind], 16
    u = uniforms(steps, 16, seed=5)
    eos = _frequent_token(model, steps, u)
    batch = decode(model, 1, eos, 0, steps, u, top_p=0.9)
    never_compacted = decode(model, 1, eos, 0, steps, u, top_p=0.9, compact_share=2.0)
    ends = [row.index(eos) if eos in row else None for row in batch]
    assert len({e for e in ends if e is not None}) >= 3, ends  # rows end at different steps
    assert batch == never_compacted
    # one row per end step (and one that never ends) decoded alone: the same ids, unpadded
    picked = list({end: i for i, end in enumerate(ends)}.values())
    for i in picked:
        (alone,) = decode(model, 1, eos, 0, steps, u[:, i : i + 1], top_p=0.9)
        assert batch[i] == alone + [0] * (len(batch[i]) - len(alone))
    for row, end in zip(batch, ends, strict=True):
        if end is not None:
            assert set(row[end + 1 :]) <= {0}  # padding after the end token


def _prompted(model: Any, *extra: list[int]) -> tuple[Any, int, torch.Tensor, int, list]:
    """``(model, steps, u, eos, prompts)``: 14 places, prompts of 3-9 tokens, one as long as
    the rows, then ``extra``; the uniforms of seed 3, one column per prompt."""
    steps = 14
    prompts = [[(5 * i + 3 * k) % 40 + 2 for k in range(3 + i % 7)] for i in range(11)]
    prompts += [[4] * steps, *extra]
    u = uniforms(steps, len(prompts), seed=3)
    return model, steps, u, _frequent_token(model, steps, u), prompts


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
@pytest.mark.parametrize("choices", [None, [7, 9, 11]])
def test_prefilled_prompts_give_the_ids_of_prompts_fed_a_token_a_step(
    kind: str, choices: list[int] | None, tiny_lms: dict[str, Any]
) -> None:
    # prompts of 3-9 tokens, one as long as the rows may be: the prefill (left padding, own
    # positions) draws the same ids as feeding each prompt a token a step, in fewer passes
    model, steps, u, eos, prompts = _prompted(tiny_lms[kind])
    slow: dict[str, int] = {}
    fast: dict[str, int] = {}
    options = {"top_p": 0.9, "prompts": prompts, "choices": choices}
    old = decode(model, 1, eos, 0, steps, u, prefill=False, stats=slow, **options)
    new = decode(model, 1, eos, 0, steps, u, stats=fast, **options)
    assert new == old
    assert [row[: len(p)] for row, p in zip(new, prompts, strict=True)] == prompts
    if choices is not None:
        assert all(row[len(p)] in choices for row, p in zip(new[:-1], prompts[:-1], strict=True))
    assert fast["steps"] < slow["steps"]


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_same_ids_as_model_generate_when_deterministic(kind: str, tiny_lms: dict[str, Any]) -> None:
    # top-k 1 makes both samplers greedy: the loop, the cache and the stop must agree
    model, steps = tiny_lms[kind], 15
    u = uniforms(steps, 1, seed=0)
    eos = _frequent_token(model, steps, uniforms(steps, 8, seed=5))
    ours = decode(model, 1, eos, 0, steps, u, top_k=1)
    start = torch.tensor([[1]])
    hf = model.generate(
        input_ids=start,
        attention_mask=torch.ones_like(start),
        do_sample=False,
        max_new_tokens=steps,
        eos_token_id=eos,
        pad_token_id=0,
    )
    assert ours == [hf[0, 1:].tolist()]


@pytest.fixture
def generator(tiny_model: Callable[..., Path]) -> tuple[Path, Any, Any]:
    """``(folder, model, fmt)``: a tiny GPT-2 generator folder (max length 10), its model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from zdebias.generation.format import add_format_tokens

    folder = tiny_model("gpt2")
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    fmt = add_format_tokens(tok, model, "nli", max_length=10)
    model.save_pretrained(folder)
    return folder, model, fmt


def test_backend_rounds_are_seeded(generator: tuple[Path, Any, Any]) -> None:
    from zdebias.generation.settings import SampleSettings
    from zdebias.generation.trained import HFBackend

    folder, _, fmt = generator
    backend = HFBackend(folder, fmt, SampleSettings(n=1, batch_size=4), device="cpu")
    first = backend.generate(4, 123)
    assert len(first) == 4 and 1 <= len(first[0]) <= 9
    assert all(len(row) == len(first[0]) for row in first)
    # of 4 rows, each ended row leaves the batch at once (1 of 4 is a quarter): the model ran
    # each row up to its end token
    eos = fmt.eos_token_id
    lengths = [row.index(eos) + 1 if eos in row else len(row) for row in first]
    assert backend.stats == {"steps": len(first[0]), "row_steps": sum(lengths)}
    assert backend.generate(4, 123) == first
    assert backend.generate(4, 124) != first
    # rounds decoded together: each gets the rows it gets alone
    assert backend.generate_rounds(4, [124, 123]) == [backend.generate(4, 124), first]
    # --threads: the rounds run on that many threads; torch's own setting is left as it was
    threads = torch.get_num_threads()
    one = HFBackend(folder, fmt, SampleSettings(n=1, batch_size=4, threads=1), device="cpu")
    seen: list[int] = []
    one.model.register_forward_hook(lambda *_: seen.append(torch.get_num_threads()))
    assert one.generate(4, 123) == first
    assert set(seen) == {1} and torch.get_num_threads() == threads


class _GroupingEngine:
    """Records which seeds each call decodes together; a row is its round's seed."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    @staticmethod
    def rounds_per_batch(batch_size: int) -> int:
        return 128 // batch_size

    def generate_rounds(self, batch_size: int, seeds: list[int]) -> list[list[list[int]]]:
        self.calls.append(list(seeds))
        return [[[seed]] * batch_size for seed in seeds]


@pytest.mark.parametrize(("stride", "first"), [(1, 0), (3, 2)])
def test_round_batches_are_aligned_to_the_run(stride: int, first: int) -> None:
    from zdebias.generation.rounds import round_seed
    from zdebias.generation.trained import RoundBatches

    # batch 32: 4 rounds per decoding batch; worker 2 of 3 (stride 3) has rounds 2, 5, 8, ...
    rounds = [first + j * stride for j in range(10)]
    whole = _GroupingEngine()
    batches = RoundBatches(whole, 32, seed=7, stride=stride)
    assert [batches(r)[0] for r in rounds] == [[round_seed(7, r)] for r in rounds]
    # rounds j = 0-3, 4-7 and 8-11 of the run (10 and 11 decoded, never asked for)
    assert whole.calls == [
        [round_seed(7, first + j * stride) for j in range(i, i + 4)] for i in (0, 4, 8)
    ]
    # a run resumed at its 7th round decodes rounds 4-7 again: the batch it was decoded in
    resumed = _GroupingEngine()
    again = RoundBatches(resumed, 32, seed=7, stride=stride)
    assert [again(r)[0] for r in rounds[6:]] == [[round_seed(7, r)] for r in rounds[6:]]
    assert resumed.calls == whole.calls[1:]


# --------------------------------------------------------------------------- refill loop


def _lengths(rows: list[list[int]], eos: int) -> list[int]:
    return [row.index(eos) + 1 if eos in row else len(row) for row in rows]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
@pytest.mark.parametrize("slots", [16, 5, 1])
def test_refill_loop_gives_the_ids_of_the_carry_loop(
    kind: str, slots: int, tiny_lms: dict[str, Any]
) -> None:
    # fp32 on CPU: the static cache's masked places add exact zeros and each row's matmuls do
    # not depend on its batch for these tiny models, so the ids are equal, not only alike
    from zdebias.generation.decode import SlotDecoder

    model, steps = tiny_lms[kind], 16
    u = uniforms(steps, 16, seed=5)
    eos = _frequent_token(model, steps, u)
    carry = decode(model, 1, eos, 0, steps, u, top_p=0.9)
    stats: dict[str, int] = {}
    refill = SlotDecoder(model, steps, slots)(1, eos, 0, u, top_p=0.9, stats=stats)
    assert refill == carry
    lengths = _lengths(carry, eos)
    assert len(set(lengths)) >= 3, lengths  # rows end at different steps: slots are refilled
    # every live slot of a step is a token written: the rows' lengths; one slot: one row a step
    assert stats["live_row_steps"] == sum(lengths)
    assert stats["row_steps"] >= stats["live_row_steps"]
    if slots == 1:
        assert stats["steps"] == stats["row_steps"] == sum(lengths)
    if slots == 16:  # every row from the first step: as many steps as the longest row
        assert stats["steps"] == max(lengths)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_refilled_rows_are_the_rows_sampled_alone(kind: str, tiny_lms: dict[str, Any]) -> None:
    from zdebias.generation.decode import SlotDecoder

    model, steps = tiny_lms[kind], 16
    u = uniforms(steps, 12, seed=8)
    eos = _frequent_token(model, steps, u)
    decoder = SlotDecoder(model, steps, 3)  # 12 rows through 3 slots: 9 rows come in later
    batch = decoder(1, eos, 0, u, top_p=0.9)
    assert len(batch) == 12 and len({len(r) for r in batch}) == 1
    for i in range(12):
        (alone,) = SlotDecoder(model, steps, 1)(1, eos, 0, u[:, i : i + 1], top_p=0.9)
        assert batch[i] == alone + [0] * (len(batch[i]) - len(alone))
    # the decoder keeps its cache from job to job: the same job again, the same ids
    assert decoder(1, eos, 0, u, top_p=0.9) == batch


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
@pytest.mark.parametrize("choices", [None, [7, 9, 11]])
def test_refill_loop_reads_prompts_as_the_carry_loop(
    kind: str, choices: list[int] | None, tiny_lms: dict[str, Any]
) -> None:
    # the targeted and premise-conditioned samplers' path: prompts of 0-9 tokens, one as long
    # as the rows (a whole row already), the label tokens as the only first choice
    from zdebias.generation.decode import SlotDecoder

    model, steps, u, eos, prompts = _prompted(tiny_lms[kind], [])
    options = {"top_p": 0.9, "prompts": prompts, "choices": choices}
    carry = decode(model, 1, eos, 0, steps, u, **options)
    for slots in (13, 4):
        stats: dict[str, int] = {}
        refill = SlotDecoder(model, steps, slots)(1, eos, 0, u, stats=stats, **options)
        assert refill == carry
        # 12 rows to decode (one is all prompt): at most one prefill pass per row
        assert stats["steps"] <= 12 + stats["row_steps"]
    assert [row[: len(p)] for row, p in zip(carry, prompts, strict=True)] == prompts
    if choices is not None:
        firsts = [row[len(p)] for row, p in zip(carry, prompts, strict=True) if len(p) < steps]
        assert set(firsts) <= set(choices)


@pytest.mark.slow
def test_refill_step_compiles_as_one_graph(tiny_lms: dict[str, Any]) -> None:
    # fullgraph=True: the step (model, slot cache, mask) traces without a break, as CUDA
    # graphs need; the eager backend keeps the test quick and the ids equal
    from zdebias.generation.decode import SlotDecoder

    model, steps = tiny_lms["gpt2"], 12
    u = uniforms(steps, 10, seed=5)
    eos = _frequent_token(model, steps, u)
    carry = decode(model, 1, eos, 0, steps, u, top_p=0.9)
    decoder = SlotDecoder(model, steps, 4, compile=True, backend="eager")
    stats: dict[str, int] = {}
    assert decoder(1, eos, 0, u, top_p=0.9, stats=stats) == carry
    assert stats["row_steps"] == 4 * stats["steps"]  # compiled: the slots are never packed


def test_auto_slots_from_free_memory(
    tiny_lms: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from zdebias.generation.decode import MAX_AUTO_SLOTS, auto_slots, slot_bytes

    model = tiny_lms["gpt2"]
    cfg = model.config
    # tiny GPT-2: KV 2 x layers x hidden x 127 places x 4 bytes, work vocab x 16 + 16 x hidden x 4
    per_row = 2 * cfg.n_layer * cfg.n_embd * 127 * 4 + cfg.vocab_size * 16 + 16 * cfg.n_embd * 4
    assert slot_bytes(model, 127) == per_row
    assert auto_slots(model, 127) == 128  # off CUDA
    for free, slots in [(1000 * per_row / 0.8, 960), (10**15, MAX_AUTO_SLOTS), (per_row, 64)]:
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *_, f=free: (int(f), 2 * int(f)))
        assert auto_slots(model, 127, "cuda") == slots


@pytest.mark.slow
def test_backend_loop_setting(generator: tuple[Path, Any, Any]) -> None:
    from zdebias.errors import ConfigError
    from zdebias.generation.settings import SampleSettings
    from zdebias.generation.trained import HFBackend, decode_loop

    folder, model, fmt = generator

    def backend(**kw: Any) -> HFBackend:
        return HFBackend(folder, fmt, SampleSettings(n=1, batch_size=4, **kw), device="cpu")

    carry, refill = backend(), backend(decode_loop="refill", decode_batch=3)
    assert (carry.loop, refill.loop) == ("carry", "refill")  # auto off CUDA: carry
    assert carry.compute["decode"] == {"loop": "carry", "compile": False}
    assert refill.compute["decode"] == {"loop": "refill", "compile": False, "slots": 3}
    # rows per job: carry 128, refill 8 x the slots
    assert (carry.rounds_per_batch(4), refill.rounds_per_batch(4)) == (32, 6)
    assert backend(decode_batch=16).rounds_per_batch(4) == 4
    # the slots ran each row up to its end token
    (rows,) = refill.generate_rounds(4, [5])
    assert refill.stats["live_row_steps"] == sum(_lengths(rows, fmt.eos_token_id))
    # the same rounds (3 slots for 8 rows: refilled), the same ids as the carry loop
    assert refill.generate_rounds(4, [123, 124]) == carry.generate_rounds(4, [123, 124])
    # auto on CUDA: refill for the model types it is tested with; refused (or carry) else
    assert decode_loop(model, "cuda", "auto") == "refill"
    model.config._attn_implementation = "flash_attention_2"
    assert decode_loop(model, "cuda", "auto") == "carry"
    with pytest.raises(ConfigError, match="--decode-loop refill: not for this model"):
        decode_loop(model, "cpu", "refill")
    # --compile with the carry loop would compile nothing: refused, not ignored
    with pytest.raises(ConfigError, match="--compile compiles the refill loop's step"):
        backend(compile=True)


def test_a_ray_driver_plans_groups_without_a_model() -> None:
    """The Ray driver holds the backend class, not a loaded model: its groups come from the
    settings (carry's 128 rows on CPU; refill's 8 x 2048 slots on CUDA; pinned slots)."""
    from zdebias.generation.settings import SampleSettings
    from zdebias.generation.trained import HFBackend, rounds_per_group

    cfg = SampleSettings(n=10)
    assert rounds_per_group(HFBackend, 32, cfg) == 4
    assert rounds_per_group(HFBackend, 32, cfg, cuda=True) == 8 * 2048 // 32
    pinned = SampleSettings(n=10, decode_loop="refill", decode_batch=64)
    assert rounds_per_group(HFBackend, 32, pinned) == 8 * 64 // 32
    assert rounds_per_group(HFBackend, 32, SampleSettings(n=10, decode_batch=256)) == 8
