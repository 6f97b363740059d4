"""Premise-conditioned sampling of a trained generator (``zdebias sample --premises``): every
sample's premise is its slot's premise in the seeded order, forced-label quotas are exact,
a stopped run resumes byte for byte, and the vLLM backend is given the HF backend's prompts."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from helpers.nli_toy import TOY_PREMISES
from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.generation.sample import sample_generator
from zdebias.generation.store import read_samples

LABELS = ["entailment", "neutral", "contradiction"]
QUOTAS = "entailment=1,neutral=1,contradiction=1"


@pytest.fixture
def premises_file(tmp_path: Path) -> Path:
    """10 rows, 6 distinct premises (two repeat in other case and spacing)."""
    texts = [*TOY_PREMISES, "A cat sleeps.", "Two  men talk.", "a cat SLEEPS.", *TOY_PREMISES[:2]]
    texts.insert(5, "Two men talk.")
    path = tmp_path / "premises.jsonl"
    with path.open("w") as fh:
        for text in texts:
            fh.write(json.dumps({"premise": text, "hypothesis": "x", "label": "neutral"}) + "\n")
    return path


def _order(path: Path, seed: int) -> list[str]:
    """The premises' seeded order, computed here by hand: distinct premises (case and spaces
    folded, first kept) shuffled by ``random.Random(seed)``."""
    seen, order = set(), []
    for line in path.open():
        text = json.loads(line)["premise"]
        key = re.sub(r"\s+", " ", text.strip()).casefold()
        if key not in seen:
            seen.add(key)
            order.append(text)
    random.Random(seed).shuffle(order)
    return order


def _run(gen: Path, out: Path, premises: Path, n: int, **kw: Any) -> dict[str, Any]:
    options = {"batch_size": 5, "shard_size": 4, "progress": False, **kw}
    return sample_generator(gen, out, n, premises=str(premises), **options)


def test_forced_quotas_are_exact_per_premise_in_seeded_order(
    ending_generator: Path, premises_file: Path, tmp_path: Path
) -> None:
    summary = _run(ending_generator, tmp_path / "s", premises_file, 12, per_premise=QUOTAS)
    order = _order(premises_file, 0)
    assert len(order) == 6
    records = read_samples(tmp_path / "s")
    assert summary["complete"] and len(records) == 12
    assert Counter(r.label for r in records) == {lab: 4 for lab in LABELS}
    assert summary["per_label"] == {lab: 4 for lab in LABELS}
    # the slot of a record: row j of round r is slot r·5 + j; 3 rows per premise draw
    slots = [r.meta["round"] * 5 + r.meta["row"] for r in records]
    assert slots == sorted(slots)
    draws: dict[int, list[Record]] = {}
    for slot, r in zip(slots, records, strict=True):
        draws.setdefault(slot // 3, []).append(r)
        assert r.premise == order[(slot // 3) % 6]  # exactly as in the file, not as decoded
        assert r.label == LABELS[slot % 3]
        assert r.hypothesis and r.meta["type"] == "generated"
    assert sorted(draws) == [0, 1, 2, 3]
    for rows in draws.values():
        assert [r.label for r in rows] == LABELS  # every premise exactly its quota
    assert [rows[0].premise for rows in draws.values()] == order[:4]
    premises = summary["premises"]
    assert premises["labels"] == "forced" and premises["n_short"] == 0
    assert (premises["n_premises"], premises["n_unique"], premises["n_draws"]) == (10, 6, 4)
    # nothing lost: every output is written, dropped or counted
    assert summary["n_generated"] == (
        12 + summary["n_malformed"] + summary["n_duplicates"] + summary["n_surplus"]
    )


def test_sampled_labels_cycle_the_premises(
    ending_generator: Path, premises_file: Path, tmp_path: Path
) -> None:
    summary = _run(ending_generator, tmp_path / "s", premises_file, 8, seed=3, batch_size=4)
    order = _order(premises_file, 3)
    records = read_samples(tmp_path / "s")
    slots = [r.meta["round"] * 4 + r.meta["row"] for r in records]
    assert slots == list(range(8))  # one sample per slot: a malformed row is decoded again
    assert [r.premise for r in records] == [order[g % 6] for g in range(8)]  # cycles after 6
    assert all(r.label in LABELS and r.hypothesis for r in records)
    assert summary["premises"]["labels"] == "sampled" and summary["premises"]["n_short"] == 0
    assert "per_label" not in summary  # labels are the generator's choice


def test_stop_and_resume_is_byte_identical(
    ending_generator: Path, premises_file: Path, tmp_path: Path
) -> None:
    whole = _run(ending_generator, tmp_path / "whole", premises_file, 12, per_premise=QUOTAS)
    part = _run(
        ending_generator, tmp_path / "part", premises_file, 12, per_premise=QUOTAS, max_shards=1
    )
    assert not part["complete"] and 4 <= part["n_written"] < 12
    with pytest.raises(ConfigError, match=r"per_premise=\{'entailment': 2"):
        _run(ending_generator, tmp_path / "part", premises_file, 12, per_premise="entailment=2")
    rest = _run(ending_generator, tmp_path / "part", premises_file, 12, per_premise=QUOTAS)
    assert rest["complete"]
    a, b = (tmp_path / "whole" / "samples.jsonl"), (tmp_path / "part" / "samples.jsonl")
    assert a.read_bytes() == b.read_bytes()
    for key in ("n_written", "n_generated", "n_malformed", "n_duplicates", "n_surplus"):
        assert rest[key] == whole[key], key
    assert rest["premises"] == whole["premises"]


def test_requests_that_are_refused(
    ending_generator: Path, premises_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "s"
    with pytest.raises(ConfigError, match=r"--n 10: not a multiple of 3"):
        _run(ending_generator, out, premises_file, 10, per_premise=QUOTAS)
    with pytest.raises(ConfigError, match=r"unknown label 'entail'; .* entailment, neutral"):
        _run(ending_generator, out, premises_file, 3, per_premise="entail=1")
    with pytest.raises(ConfigError, match=r"expected LABEL=COUNT"):
        _run(ending_generator, out, premises_file, 3, per_premise="entailment")
    with pytest.raises(ConfigError, match=r"--per-premise: only premise-conditioned"):
        sample_generator(ending_generator, out, 3, per_premise=QUOTAS, progress=False)
    with pytest.raises(ConfigError, match=r"--premises with --worker/--workers"):
        _run(ending_generator, out, premises_file, 3, workers=2)
    with pytest.raises(ConfigError, match=r"--premises with --ray: not supported yet"):
        _run(ending_generator, out, premises_file, 3, ray="auto")
    with pytest.raises(ConfigError, match=r"--examples: only --backend openai or local"):
        _run(ending_generator, out, premises_file, 3, examples=str(premises_file))


class _Recorder:
    """An engine that records what it is asked; it answers EOS at once after a forced label
    (an empty hypothesis), and when it must choose, the first label, a one-token hypothesis
    (one per row) and EOS."""

    def __init__(self, fmt: Any) -> None:
        self.fmt, self.calls = fmt, []

    def complete(self, prompts: Any, seed: int, *, choices: Any = None) -> list[list[int]]:
        self.calls.append(([list(p) for p in prompts], seed, choices))
        eos = self.fmt.eos_token_id
        if choices is None:
            return [[*p, eos] for p in prompts]
        return [[*p, choices[0], 50 + i, eos] for i, p in enumerate(prompts)]


@pytest.mark.parametrize("per_premise", [None, {"neutral": 1, "contradiction": 2}])
def test_vllm_gets_the_prompts_of_the_training_format(
    ending_generator: Path, per_premise: dict[str, int] | None
) -> None:
    from transformers import AutoTokenizer

    from zdebias.generation.conditioned import ConditionedRounds
    from zdebias.generation.format import GeneratorFormat, encode_record
    from zdebias.generation.premises import PremisePlan
    from zdebias.generation.settings import SampleSettings
    from zdebias.generation.trained import vllm_requests

    tok = AutoTokenizer.from_pretrained(ending_generator)
    fmt = GeneratorFormat.load(ending_generator)
    records = [Record(id=f"p{i}", premise=p, hypothesis="x", label="neutral") for i, p in
               enumerate(TOY_PREMISES)]  # fmt: skip
    plan = PremisePlan.of(records, seed=0, per_premise=per_premise)
    rounds = ConditionedRounds(plan, tok, fmt, batch_size=6, seed=0, attempts=2)
    engine = _Recorder(fmt)
    out = rounds(engine, 0)
    prompts, seed, choices = engine.calls[0]
    assert len(engine.calls) == (2 if per_premise else 1)  # forced: empty hypotheses retried
    labels = (
        [None] * 6 if per_premise is None else ["neutral", "contradiction", "contradiction"] * 2
    )
    for j, prompt in enumerate(prompts):
        slot = plan.slot(j)
        # the prompt is the start of the training sequence of (premise, label, hypothesis)
        enc = encode_record(slot.premise.replace(label=slot.label or "neutral"), tok, fmt)
        cut = enc.label_index + (1 if slot.label else 0)
        assert [fmt.bos_token_id, *prompt] == enc.input_ids[:cut]
        assert slot.label == labels[j]
    settings = SampleSettings(n=6, top_k=5, temperature=0.7)
    requests = vllm_requests(fmt, settings, prompts, seed, choices=choices)
    for (prompt, params), ids in zip(requests, prompts, strict=True):
        assert prompt == {"prompt_token_ids": [fmt.bos_token_id, *ids]}
        assert (params["top_k"], params["temperature"], params["top_p"]) == (5, 0.7, 0.9)
        if choices is None:  # forced labels: the hypothesis, up to the generator's length
            assert params["max_tokens"] == fmt.max_length - 1 - len(ids)
            assert params["stop_token_ids"] == [fmt.eos_token_id]
        else:  # the model's label first: one token among the label tokens
            assert params["max_tokens"] == 1
            assert params["allowed_token_ids"] == list(fmt.label_token_ids.values())
    assert len({p["seed"] for _, p in requests}) == 6  # a seed per row
    if per_premise is None:
        assert all(c.parsed.ok and c.parsed.label == "entailment" for c in out.candidates)
    else:  # every attempt gave an empty hypothesis: counted, not lost
        assert [c.parsed.error for c in out.candidates] == ["empty_hypothesis"] * 12


def test_a_resumed_run_keeps_the_loop_and_slots_it_began_with(
    ending_generator: Path,
    premises_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The automatic slot count follows the free GPU memory, and auto's loop the device: a run
    resumed with them left to auto decodes with what it began with (here 3 slots of refill,
    resumed where auto would give 7 slots of carry); another device is said in a warning."""
    import zdebias.generation.decode as decode_mod

    slots = {"n": 3}
    monkeypatch.setattr(decode_mod, "auto_slots", lambda *_a, **_k: slots["n"])
    kw = {"per_premise": QUOTAS, "decode_loop": "refill", "device": "cpu"}  # on any machine
    whole = _run(ending_generator, tmp_path / "whole", premises_file, 6, **kw)
    part = _run(ending_generator, tmp_path / "part", premises_file, 6, max_shards=1, **kw)
    assert part["compute"]["decode"] == {"loop": "refill", "compile": False, "slots": 3}
    slots["n"] = 7  # less (or more) free memory at the resume
    with caplog.at_level("WARNING", logger="zdebias"):
        rest = _run(
            ending_generator, tmp_path / "part", premises_file, 6, per_premise=QUOTAS, device="cpu"
        )
    assert rest["complete"] and not caplog.records
    assert rest["compute"]["decode"] == {"loop": "refill", "compile": False, "slots": 3}
    a, b = (tmp_path / "whole" / "samples.jsonl"), (tmp_path / "part" / "samples.jsonl")
    assert a.read_bytes() == b.read_bytes() and rest["n_written"] == whole["n_written"]
    # a pinned --decode-batch or loop wins, and is said: the rows are not the same bytes
    again = _run(ending_generator, tmp_path / "pin", premises_file, 6, max_shards=1, **kw)
    assert again["compute"]["decode"]["slots"] == 7
    with caplog.at_level("WARNING", logger="zdebias"):
        pinned = _run(ending_generator, tmp_path / "pin", premises_file, 6, decode_batch=5, **kw)
    assert pinned["compute"]["decode"]["slots"] == 5
    (line,) = [r.getMessage() for r in caplog.records]
    assert "began sampling on cpu float32 (refill, 7 slots) and goes on on cpu float32 " in line
    assert "(refill, 5 slots)" in line and "same distribution" in line
    # a run begun on another device keeps nothing, and says so
    state_path = tmp_path / "gpu" / "state.json"
    _run(ending_generator, tmp_path / "gpu", premises_file, 6, max_shards=1, **kw)
    state = json.loads(state_path.read_text())
    state["compute"].update(device="cuda", dtype="bfloat16")
    state["compute"]["decode"].update(slots=512)
    state_path.write_text(json.dumps(state))
    caplog.clear()
    with caplog.at_level("WARNING", logger="zdebias"):
        moved = _run(
            ending_generator, tmp_path / "gpu", premises_file, 6, per_premise=QUOTAS, device="cpu"
        )
    assert moved["compute"]["decode"] == {"loop": "carry", "compile": False}
    (line,) = [r.getMessage() for r in caplog.records]
    assert "on cuda bfloat16 (refill, 512 slots) and goes on on cpu float32 (carry)" in line
