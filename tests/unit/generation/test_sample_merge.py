"""Sampling on N workers: disjoint rounds, exact merge, refusals, vLLM engine keywords.

The fake backend's round r gives 4 outputs: ``man r`` (new each round), ``cat`` (the same
every round), one without a label token, and ``dog r // 2`` (the same in rounds 2k and 2k+1,
so with 2 workers each dog is found by both). With n = 7, one process keeps
man0 cat dog0 | man1 | man2 dog1 | man3 (rounds 0-3).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers.cli_main import run_main
from zdebias.errors import ConfigError
from zdebias.generation import trained as trained_mod
from zdebias.generation.format import GeneratorFormat
from zdebias.generation.rounds import round_seed
from zdebias.generation.sample import sample_generator
from zdebias.generation.settings import SampleSettings
from zdebias.generation.store import read_samples
from zdebias.generation.trained import vllm_engine_args
from zdebias.generation.workers import merge_samples, worker_lock

ONE_PROCESS = [
    ("A man number 0.", "entailment"),
    ("A cat.", "neutral"),
    ("A dog number 0.", "neutral"),
    ("A man number 1.", "entailment"),
    ("A man number 2.", "entailment"),
    ("A dog number 1.", "neutral"),
    ("A man number 3.", "entailment"),
]


@pytest.fixture
def generator(tiny_generator: Path) -> Path:
    """A random tiny GPT-2 saved as a generator folder (the fake backend uses its tokenizer)."""
    return tiny_generator


class FakeBackend:
    """The 4 outputs of the module doc for the round whose seed it is given."""

    calls: list[int] = []  # noqa: RUF012

    def __init__(self, generator: Path, fmt: GeneratorFormat, settings: Any, **_: Any) -> None:
        from transformers import AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(generator)
        self.fmt = fmt

    def _ids(self, premise: str, label: str | None, hyp: str) -> list[int]:
        lab = [self.fmt.label_token_ids[label]] if label else []
        return [
            *self.tok(premise, add_special_tokens=False)["input_ids"],
            *lab,
            *self.tok(hyp, add_special_tokens=False)["input_ids"],
            self.fmt.eos_token_id,
        ]

    def generate(self, batch_size: int, seed: int) -> list[list[int]]:
        r = next(i for i in range(1000) if round_seed(0, i) == seed)
        FakeBackend.calls.append(r)
        return [
            self._ids(f"A man number {r}.", "entailment", "A man."),
            self._ids("A cat.", "neutral", "A cat sits."),
            self._ids(f"No label {r}.", None, "x"),
            self._ids(f"A dog number {r // 2}.", "neutral", "A dog."),
        ]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> type[FakeBackend]:
    monkeypatch.setitem(trained_mod.BACKENDS, "hf", FakeBackend)
    FakeBackend.calls = []
    return FakeBackend


def _run(gen: Path, out: Path, **kw: Any) -> dict[str, Any]:
    options = {"n": 7, "batch_size": 4, "shard_size": 3, "progress": False, **kw}
    return sample_generator(gen, out, **options)


def test_two_workers_merge_to_the_one_process_run(
    generator: Path, tmp_path: Path, fake: type[FakeBackend]
) -> None:
    one = _run(generator, tmp_path / "one")
    assert fake.calls == [0, 1, 2, 3]
    assert [(r.premise, r.label) for r in read_samples(tmp_path / "one")] == ONE_PROCESS

    fake.calls = []
    w0 = _run(generator, tmp_path / "w", worker="0/2")
    # alone, worker 0 stops at its share (4) and the estimated end: rounds 0, 2, 4
    assert fake.calls == [0, 2, 4]
    assert w0["complete"] and not w0["ready_to_merge"] and w0["pending_workers"] == [1]
    assert w0["n_written"] == 7 and w0["n_duplicates"] == 2  # cat in rounds 2 and 4
    with pytest.raises(ConfigError) as err:
        merge_samples(tmp_path / "w")
    assert str(err.value) == (
        f"{tmp_path / 'w'}: not ready to merge (3 of 7 samples in the rounds all workers "
        "have done); run again: worker 1/2 (not started)"
    )

    fake.calls = []
    w1 = _run(generator, tmp_path / "w", worker="1/2")
    assert fake.calls == [1, 3, 5]  # it stops once rounds 0-5 hold 7 unique samples
    assert w1["ready_to_merge"] and w1["prefix_unique"] == 7
    assert [r.id for r in read_samples(tmp_path / "w" / "worker-1-of-2")][:2] == [
        "gen-s0-w1of2:0",
        "gen-s0-w1of2:1",
    ]

    merged = merge_samples(tmp_path / "w")
    # the same file, byte for byte: records, ids, order
    assert (tmp_path / "w" / "samples.jsonl").read_bytes() == (
        tmp_path / "one" / "samples.jsonl"
    ).read_bytes()
    assert [r.to_dict() for r in read_samples(tmp_path / "w")] == [
        r.to_dict() for r in read_samples(tmp_path / "one")
    ]
    assert merged["rounds"] == one["n_generated"] // 4 == 4
    # counts over all 6 rounds sampled: 24 = 7 written + 6 malformed + 6 duplicates + 5 unused
    assert merged["rounds_sampled"] == 6 and merged["n_generated"] == 24
    assert merged["malformed"] == {"no_label": 6}
    assert merged["n_cross_worker_duplicates"] == 2  # round 1's cat and dog0
    assert merged["n_duplicates"] == 6 and merged["n_surplus"] == 5
    assert [w["rounds"] for w in merged["per_worker"]] == [3, 3]
    saved = json.loads((tmp_path / "w" / "summary.json").read_text())
    assert saved["n_written"] == 7 and saved["workers"] == 2


def test_a_worker_resumes_and_a_finished_one_does_nothing(
    generator: Path, tmp_path: Path, fake: type[FakeBackend]
) -> None:
    _run(generator, tmp_path / "w", worker="0/2")
    part = _run(generator, tmp_path / "w", worker="1/2", max_shards=1)
    assert not part["complete"] and part["n_written"] == 3
    fake.calls = []
    rest = _run(generator, tmp_path / "w", worker="1/2")
    assert fake.calls == [3, 5] and rest["ready_to_merge"]
    fake.calls = []
    again = _run(generator, tmp_path / "w", worker="0/2")
    assert fake.calls == [] and again["this_call"]["generated"] == 0  # no model loaded either
    merge_samples(tmp_path / "w")
    assert [(r.premise, r.label) for r in read_samples(tmp_path / "w")] == ONE_PROCESS


def test_workers_and_one_process_runs_do_not_mix(
    generator: Path, tmp_path: Path, fake: type[FakeBackend]
) -> None:
    _run(generator, tmp_path / "one", max_shards=1)
    with pytest.raises(ConfigError, match="holds a one-process sampling run"):
        _run(generator, tmp_path / "one", worker="0/2")
    _run(generator, tmp_path / "w", worker="0/2", max_shards=1)
    with pytest.raises(ConfigError, match="holds --worker runs; merge them"):
        _run(generator, tmp_path / "w")
    with pytest.raises(ConfigError, match="holds the workers of a run on 2, not 3"):
        _run(generator, tmp_path / "w", worker="0/3", max_shards=1)
    (tmp_path / "w" / "worker-0-of-3").mkdir()  # made by hand
    with pytest.raises(ConfigError, match="holds workers of runs with different N"):
        merge_samples(tmp_path / "w")
    with pytest.raises(ConfigError, match="holds no worker-I-of-N folders"):
        merge_samples(tmp_path / "one")


def test_a_running_worker_is_not_run_twice(
    generator: Path, tmp_path: Path, fake: type[FakeBackend]
) -> None:
    with worker_lock(tmp_path / "w" / "worker-1-of-2"):  # as if another process had it
        with pytest.raises(ConfigError, match="this worker is running in another process"):
            _run(generator, tmp_path / "w", worker="1/2")
        assert _run(generator, tmp_path / "w", worker="0/2")["n_written"] == 7
    assert fake.calls == [0, 2, 4]


def test_worker_settings_are_checked() -> None:
    assert SampleSettings(n=5, worker=" 1/ 4").worker_index() == (1, 4)
    for bad, message in [
        ("4/4", "needs 0 <= I < N"),
        ("1-4", "worker must be I/N"),
        ("a/b", "worker must be I/N"),
    ]:
        with pytest.raises(ConfigError, match=message):
            SampleSettings.checked({"n": 5, "worker": bad})
    with pytest.raises(ConfigError, match="not both"):
        SampleSettings.checked({"n": 5, "worker": "0/2", "workers": 2})
    with pytest.raises(ConfigError, match="balances labels over one process"):
        sample_generator("smollm2", "unused", 5, backend="local", worker="0/2", progress=False)


def test_vllm_engine_args() -> None:
    plain = SampleSettings(n=5, seed=3)
    assert vllm_engine_args("g", plain) == {"model": "g", "seed": 3}
    wide = SampleSettings(n=5, tensor_parallel_size=4, dtype="bfloat16")
    assert vllm_engine_args(Path("g"), wide) == {
        "model": "g",
        "seed": 0,
        "tensor_parallel_size": 4,
        "dtype": "bfloat16",
    }


def test_cli_worker_and_merge(
    generator: Path, tmp_path: Path, fake: type[FakeBackend], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "w"
    base = ["sample", "--generator", generator, "--out", out, "--n", 7, "--batch-size", 4]
    base += ["--shard-size", 3, "-q"]
    assert run_main([*base, "--worker", "0/2"]) == 0
    assert "worker 0/2: 7 samples" in capsys.readouterr().out
    assert run_main(["sample", "merge", out]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run again: worker 1/2 (not started)" in err
    assert run_main([*base, "--worker", "1/2"]) == 0
    assert "the merge is ready: zdebias sample merge" in capsys.readouterr().out
    assert run_main(["sample", "merge", out, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n_written"] == 7 and summary["n_cross_worker_duplicates"] == 2
    assert [(r.premise, r.label) for r in read_samples(out)] == ONE_PROCESS
    assert run_main([*base, "--worker", "2/2"]) == 2
    assert "worker" in capsys.readouterr().err
