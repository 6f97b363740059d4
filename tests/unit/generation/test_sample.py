"""Sharded, resumable, seeded sampling: exact counts, exact resume, clear refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from zdebias.errors import ConfigError, ZdebiasError
from zdebias.generation import rounds as rounds_mod
from zdebias.generation import trained as trained_mod
from zdebias.generation.format import GeneratorFormat, sample_key
from zdebias.generation.rounds import round_seed
from zdebias.generation.sample import sample_generator
from zdebias.generation.store import read_samples


@pytest.fixture
def untrained_generator(tiny_generator: Path) -> Path:
    """A random tiny GPT-2 saved as a generator folder (format added, no training)."""
    return tiny_generator


class FakeBackend:
    """Round r gives 4 outputs: a new sample, a repeat of round 0's first sample, an output
    without label token, and another new sample."""

    calls: ClassVar[list[int]] = []

    def __init__(self, generator: Path, fmt: GeneratorFormat, settings: Any, **_: Any) -> None:
        from transformers import AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(generator)
        self.fmt = fmt
        self.round = {}

    def _ids(self, premise: str, label: str | None, hyp: str) -> list[int]:
        enc = self.tok(premise, add_special_tokens=False)["input_ids"]
        lab = [self.fmt.label_token_ids[label]] if label else []
        return [
            *enc,
            *lab,
            *self.tok(hyp, add_special_tokens=False)["input_ids"],
            self.fmt.eos_token_id,
        ]

    def generate(self, batch_size: int, seed: int) -> list[list[int]]:
        r = next(i for i in range(1000) if round_seed(0, i) == seed)
        FakeBackend.calls.append(r)
        return [
            self._ids(f"A man number {r}.", "entailment", "A man."),
            self._ids("A man number 0.", "entailment", "A  MAN."),  # duplicate after normalising
            self._ids(f"No label {r}.", None, "x"),
            self._ids(f"A dog number {r}.", "neutral", "A dog."),
        ]


@pytest.fixture
def fake_backend(monkeypatch: pytest.MonkeyPatch) -> type[FakeBackend]:
    monkeypatch.setitem(trained_mod.BACKENDS, "hf", FakeBackend)
    FakeBackend.calls = []
    return FakeBackend


def _run(gen: Path, out: Path, **kw: Any) -> dict[str, Any]:
    options = {"batch_size": 4, "shard_size": 3, "progress": False, **kw}
    return sample_generator(gen, out, options.pop("n", 7), **options)


def test_exact_counts_ids_and_shards(
    untrained_generator: Path, tmp_path: Path, fake_backend
) -> None:
    summary = _run(untrained_generator, tmp_path / "s")
    # rounds 0-3: 2 new samples each; shard 0 = rounds 0-1 (4), shard 1 = rounds 2-3 cut to 3
    assert fake_backend.calls == [0, 1, 2, 3]
    assert summary["complete"] and summary["n_written"] == 7 and summary["n_shards"] == 2
    assert summary["n_generated"] == 16
    assert summary["malformed"] == {"no_label": 4}
    assert summary["n_duplicates"] == 4  # round 0's repeat is a duplicate within round 0 too
    assert summary["parseable_share"] == 0.75
    assert summary["n_surplus"] == 1  # round 3's second sample did not fit in n = 7
    records = read_samples(tmp_path / "s")
    assert [r.id for r in records] == [f"gen-s0:{i}" for i in range(7)]
    assert [(r.premise, r.label) for r in records] == [
        ("A man number 0.", "entailment"),
        ("A dog number 0.", "neutral"),
        ("A man number 1.", "entailment"),
        ("A dog number 1.", "neutral"),
        ("A man number 2.", "entailment"),
        ("A dog number 2.", "neutral"),
        ("A man number 3.", "entailment"),
    ]
    assert all(r.meta["type"] == "generated" and r.hypothesis for r in records)
    files = sorted(p.name for p in (tmp_path / "s").iterdir())
    assert files == [
        ".zdebias-output.json",  # the ownership marker (issue 27)
        "dropped-00000.jsonl",
        "dropped-00001.jsonl",
        "samples.jsonl",
        "shard-00000.jsonl",
        "shard-00001.jsonl",
        "state.json",
        "summary.json",
    ]
    merged = (tmp_path / "s" / "samples.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in merged] == [r.id for r in records]
    dropped = [json.loads(x) for x in (tmp_path / "s" / "dropped-00000.jsonl").open()]
    assert [d["reason"] for d in dropped] == ["duplicate", "no_label"] * 2
    # rerunning a complete run does nothing
    again = _run(untrained_generator, tmp_path / "s")
    assert again["this_call"] == {"generated": 0, "accepted": 0, "shards": 0}


def test_stop_and_resume_equals_uninterrupted(
    untrained_generator: Path, tmp_path: Path, fake_backend
) -> None:
    whole = _run(untrained_generator, tmp_path / "whole")
    part = _run(untrained_generator, tmp_path / "part", max_shards=1)
    assert not part["complete"] and part["n_written"] == 4
    assert not (tmp_path / "part" / "samples.jsonl").exists()
    fake_backend.calls = []
    rest = _run(untrained_generator, tmp_path / "part")
    assert fake_backend.calls == [2, 3]  # continues at the recorded round
    assert rest["complete"]
    for key in ("n_written", "n_generated", "n_malformed", "n_duplicates"):
        assert rest[key] == whole[key], key
    a, b = read_samples(tmp_path / "whole"), read_samples(tmp_path / "part")
    assert [r.to_dict() for r in a] == [r.to_dict() for r in b]


def test_crash_between_shard_and_state_loses_nothing(
    untrained_generator: Path, tmp_path: Path, fake_backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = rounds_mod.write_json
    writes = {"n": 0}

    def dying_write(obj: Any, path: Path) -> Path:
        if Path(path).name == "state.json":
            writes["n"] += 1
            if writes["n"] == 2:  # shard 1 is on disk, its state update never happens
                raise KeyboardInterrupt
        return real_write(obj, path)

    monkeypatch.setattr(rounds_mod, "write_json", dying_write)
    with pytest.raises(KeyboardInterrupt):
        _run(untrained_generator, tmp_path / "s")
    assert (tmp_path / "s" / "shard-00001.jsonl").exists()  # written, but not in the state
    monkeypatch.setattr(rounds_mod, "write_json", real_write)
    fake_backend.calls = []
    summary = _run(untrained_generator, tmp_path / "s")
    assert fake_backend.calls == [2, 3]
    records = read_samples(tmp_path / "s")
    assert len(records) == 7 == len({sample_key(r) for r in records})
    assert summary["n_generated"] == 16 and summary["n_duplicates"] == 4


def test_settings_change_is_refused_and_n_can_grow(
    untrained_generator: Path, tmp_path: Path, fake_backend
) -> None:
    _run(untrained_generator, tmp_path / "s", max_shards=1)
    with pytest.raises(ConfigError, match=r"top_p=0.5 \(run has 0.9\)"):
        _run(untrained_generator, tmp_path / "s", top_p=0.5)
    done = _run(untrained_generator, tmp_path / "s")
    assert done["n_written"] == 7
    with pytest.raises(ConfigError, match="already holds 7 samples"):
        _run(untrained_generator, tmp_path / "s", n=5)
    bigger = _run(untrained_generator, tmp_path / "s", n=10)
    records = read_samples(tmp_path / "s")
    assert bigger["complete"] and len(records) == 10 == len({sample_key(r) for r in records})


def test_untrained_generator_fails_after_patience(
    untrained_generator: Path, tmp_path: Path
) -> None:
    # a random model almost never writes one label token and EOS in 24 tokens
    with pytest.raises(ZdebiasError, match="no new well-formed sample in 3 rounds"):
        sample_generator(
            untrained_generator, tmp_path / "s", 5, batch_size=4, patience_rounds=3, progress=False
        )
    state = (
        json.loads((tmp_path / "s" / "state.json").read_text())
        if (tmp_path / "s" / "state.json").exists()
        else None
    )
    assert state is None  # nothing was accepted, no shard written


def test_bad_options_and_vllm_without_vllm(untrained_generator: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="top-p must be in"):
        sample_generator(untrained_generator, tmp_path / "s", 5, top_p=0.0, progress=False)
    with pytest.raises(ConfigError, match="not a zdebias generator folder"):
        sample_generator(tmp_path, tmp_path / "s", 5, progress=False)
    with pytest.raises(ConfigError, match="--backend vllm needs"):
        sample_generator(untrained_generator, tmp_path / "s", 5, backend="vllm", progress=False)


def test_overwrite_checks_every_input_and_the_device_before_removing(
    untrained_generator: Path,
    tmp_path: Path,
    fake_backend,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 40: `sample --overwrite` with a missing --premises file, or --device cuda where
    torch sees no GPU, fails with one line and leaves the old run as it was."""
    import torch

    from helpers.cli_main import run_main

    out = tmp_path / "s"
    _run(untrained_generator, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    base = [
        "sample",
        "--generator",
        untrained_generator,
        "--out",
        out,
        "--n",
        "7",
        "--overwrite",
        "-q",
    ]
    assert run_main([*base, "--premises", tmp_path / "nope.jsonl"]) == 2
    assert "nope.jsonl" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert run_main([*base, "--device", "cuda"]) == 2
    assert capsys.readouterr().err == (
        "error: --device cuda asked for, but no CUDA GPU is visible\n"
    )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    premises = tmp_path / "p.jsonl"
    premises.write_text('{"id": "p0", "premise": "A man sleeps.", "label": "entailment"}\n')
    local = ["sample", "--generator", "smollm2", "--backend", "local", "--premises", premises]
    assert (
        run_main([*local, "--out", out, "--n", "3", "--overwrite", "-q", "--device", "cuda"]) == 2
    )
    assert capsys.readouterr().err == (
        "error: --device cuda asked for, but no CUDA GPU is visible\n"
    )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_user_folder_with_a_state_json_is_refused(
    untrained_generator: Path, tmp_path: Path, fake_backend, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40: a folder zdebias did not write is refused (not a KeyError), with or without
    --overwrite, on one worker or several, and keeps its files."""
    from helpers.cli_main import run_main

    user = tmp_path / "user"
    user.mkdir()
    (user / "state.json").write_text('{"mine": 1}')
    base = ["sample", "--generator", untrained_generator, "--out", user, "--n", "7", "-q"]
    for extra in ([], ["--overwrite"], ["--workers", "2"], ["--workers", "2", "--overwrite"]):
        assert run_main([*base, *extra]) == 2, extra
        assert capsys.readouterr().err.startswith(
            f"error: {user} holds files zdebias did not write; choose a new --out or empty it"
        ), extra
        assert sorted(p.name for p in user.iterdir()) == ["state.json"]
    with pytest.raises(ConfigError, match="holds files zdebias did not write"):
        _run(untrained_generator, user)  # a library call without the CLI's check_out too
    assert sorted(p.name for p in user.iterdir()) == ["state.json"]
    assert fake_backend.calls == []


def test_workers_with_overwrite_replace_a_one_process_run_as_one_process_does(
    untrained_generator: Path, tmp_path: Path, fake_backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40: `--workers 2 --overwrite` on a folder zdebias wrote (a one-process run) goes
    through the --overwrite rules and starts afresh (it was refused: `holds other files than
    worker folders`); without --overwrite it is refused, files kept."""
    from zdebias.generation import workers as workers_mod

    out = tmp_path / "s"
    _run(untrained_generator, out)
    before = sorted(p.name for p in out.iterdir())
    checked: list[str] = []
    seen: list[list[str]] = []

    def fake_run_workers(generator: Any, folder: Path, cfg: Any, **_: Any) -> dict[str, Any]:
        seen.append(sorted(p.name for p in folder.iterdir()))
        return {"workers": cfg.workers}

    monkeypatch.setattr(workers_mod, "run_workers", fake_run_workers)
    with pytest.raises(ConfigError, match=r"holds other files than worker folders \("):
        _run(untrained_generator, out, workers=2, check_out=lambda: checked.append("x"))
    assert sorted(p.name for p in out.iterdir()) == before and checked == []
    summary = _run(
        untrained_generator,
        out,
        workers=2,
        overwrite=True,
        check_out=lambda: checked.append("checked"),
    )
    assert summary == {"workers": 2} and checked == ["checked"]
    assert seen == [[".zdebias-output.json"]]  # the old run removed, the folder marked anew
