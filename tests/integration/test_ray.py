"""Sampling and scoring on Ray (``--ray``), on a local cluster of 2 CPUs: the outputs are the
in-process ones byte for byte (a classifier's probabilities to float32's last digits); killed
actors are replaced by the others, and once all are gone the next call resumes, sampling only
the rounds after the last shard. Skipped without the ``ray`` extra."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from helpers.cli_main import run_main  # noqa: E402
from zdebias.classify.settings import InferenceSettings  # noqa: E402
from zdebias.data.options import ReadOptions  # noqa: E402
from zdebias.data.writers import write_records  # noqa: E402
from zdebias.errors import ZdebiasError  # noqa: E402
from zdebias.evaluation.files import EvaluationFiles  # noqa: E402
from zdebias.generation import rounds as rounds_mod  # noqa: E402
from zdebias.generation.on_ray import ACTOR_PREFIX  # noqa: E402
from zdebias.generation.sample import sample_generator  # noqa: E402

N, BATCH, SHARD = 200, 16, 40
RAY = {"ray": "auto", "ray_actors": 2}


def _close(a: Any, b: Any) -> bool:
    """JSON values equal, floats to float32's last digits: a classifier scored in another
    process may sum a matrix product in another order (seen once in a few runs on busy cores)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def assert_same_scores(there: Path, here: Path) -> None:
    """The same JSON / JSONL document: every row, field and label exactly, probabilities to
    float32's last digits."""
    if here.suffix == ".json":
        assert _close(json.loads(there.read_text()), json.loads(here.read_text())), here.name
        return
    rows = [[json.loads(line) for line in p.open(encoding="utf-8")] for p in (there, here)]
    assert len(rows[0]) == len(rows[1]), here.name
    assert all(_close(a, b) for a, b in zip(*rows, strict=True)), here.name


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_worker_niceness", "0")  # Ray's nice 15 starves them on busy cores
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        yield
        ray.shutdown()


@pytest.fixture(scope="module")
def generator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GPT-2 generator whose next token does not depend on the context: a fixed
    distribution over 40 word pieces, the 3 label tokens and EOS, so that about one output in
    ten is a well-formed sample (a random one writes none)."""
    import torch
    from transformers import AutoModelForCausalLM

    from zdebias.generation.format import GeneratorFormat
    from zdebias.generation.tiny import make_tiny_generator

    folder = make_tiny_generator(tmp_path_factory.mktemp("gen") / "g", max_length=24)
    fmt = GeneratorFormat.load(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    model.config.tie_word_embeddings = False
    vocab, width = model.lm_head.weight.shape
    logits = torch.full((vocab,), -30.0)
    logits[list(range(300, 340))] = math.log(0.7 / 40)
    logits[list(fmt.label_token_ids.values())] = math.log(0.05)
    logits[fmt.eos_token_id] = math.log(0.15)
    head = torch.nn.Linear(width, vocab, bias=False)
    with torch.no_grad():  # the last hidden state is e_0, so the logits are head[:, 0]
        head.weight.zero_()
        head.weight[:, 0] = logits
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.zero_()
        model.transformer.ln_f.bias[0] = 1.0
    model.lm_head = head
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def one_process(generator: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("one") / "s"
    summary = _sample(generator, out)
    assert summary["complete"] and summary["n_duplicates"] >= 0
    return out


def _sample(generator: Path, out: Path, **more: Any) -> dict[str, Any]:
    return sample_generator(
        generator, out, N, batch_size=BATCH, shard_size=SHARD, threads=1, progress=False, **more
    )


def _files(folder: Path) -> dict[str, bytes]:
    """Every file of a sampling folder; ``state.json`` without its seconds."""
    out = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != "summary.json"}
    state = json.loads(out.pop("state.json"))
    state.pop("seconds")
    out["state.json"] = json.dumps(state).encode()
    return out


def test_two_actors_write_the_one_process_folder(
    generator: Path, one_process: Path, tmp_path: Path
) -> None:
    summary = _sample(generator, tmp_path / "s", **RAY)
    assert summary["complete"] and summary["ray"]["actors"] == 2
    assert summary["ray"]["actors_lost"] == 0
    mine, theirs = _files(tmp_path / "s"), _files(one_process)
    # 5 shards and their dropped files, samples, state, the ownership marker
    assert len(theirs) == 2 * 5 + 3 and ".zdebias-output.json" in theirs
    assert mine == theirs


def test_killed_actors_then_resume_sample_only_the_missing_rounds(
    generator: Path, one_process: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One actor is killed after shard 0 (the other takes its rounds), the other after
    shard 1: the call fails and keeps 2 shards; the next call (one actor) samples only the
    rounds after them and the folder is the one-process run's."""
    write_shard = rounds_mod.write_shard
    killed: list[str] = []

    def kill_one_after_each_shard(*args: Any, **kwargs: Any) -> dict[str, Any]:
        entry = write_shard(*args, **kwargs)
        names = sorted(n for n in ray.util.list_named_actors() if n.startswith(ACTOR_PREFIX))
        alive = [n for n in names if n not in killed]
        if args[1] < 2:
            killed.append(alive[0])
            ray.kill(ray.get_actor(alive[0]))
        return entry

    monkeypatch.setattr(rounds_mod, "write_shard", kill_one_after_each_shard)
    out = tmp_path / "s"
    with pytest.raises(ZdebiasError, match=r"all 2 Ray sampling actors died.*run the same command"):
        _sample(generator, out, **RAY)
    monkeypatch.undo()
    state = json.loads((out / "state.json").read_text())
    assert len(state["shards"]) == 2
    rounds_total = json.loads((one_process / "summary.json").read_text())["n_generated"] // BATCH
    done = state["next_round"]
    assert 0 < done < rounds_total

    summary = _sample(generator, out, ray="auto", ray_actors=1)  # resumed by one actor
    assert summary["complete"] and summary["ray"]["actors_lost"] == 0
    assert summary["this_call"]["generated"] == (rounds_total - done) * BATCH
    assert _files(out) == _files(one_process)


def test_ray_data_scoring_equals_in_process_predict(tiny_model: Any, tmp_path: Path) -> None:
    from zdebias.data.demo import make_demo_corpus

    records = make_demo_corpus(seed=3, n_train=2000, n_dev=3, n_test=3)["train"]
    data = tmp_path / "data.jsonl"
    write_records(records, data)
    model = str(tiny_model("bert"))
    files = EvaluationFiles(ReadOptions(task="nli"), progress=False)
    here = files.predict(model, str(data), tmp_path / "here.jsonl", InferenceSettings())
    there = files.predict(model, str(data), tmp_path / "ray.jsonl", InferenceSettings(**RAY))
    assert here["n"] == there["n"] == 2000
    assert_same_scores(tmp_path / "ray.jsonl", tmp_path / "here.jsonl")


def test_cli_confidence_filter_on_ray_publishes_the_same_folder(
    tiny_model: Any, tmp_path: Path
) -> None:
    from zdebias.data.demo import make_demo_corpus

    data = tmp_path / "data.jsonl"
    write_records(make_demo_corpus(seed=4, n_train=300, n_dev=3, n_test=3)["train"], data)
    model = str(tiny_model("bert"))
    common = ["confidence-filter", str(data), "--classifier", model, "--threshold", "0.3", "-q"]
    assert run_main([*common, "--out", str(tmp_path / "here")]) == 0
    assert (
        run_main([*common, "--out", str(tmp_path / "ray"), "--ray", "auto", "--ray-actors", "1"])
        == 0
    )
    for name in ("kept.jsonl", "rejected.jsonl", "summary.json"):
        assert_same_scores(tmp_path / "ray" / name, tmp_path / "here" / name)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left


def test_cli_evaluate_on_ray_writes_the_same_results(tiny_model: Any, tmp_path: Path) -> None:
    """Two suites through one actor pool: the results, tables and predictions are the
    in-process ones."""
    from zdebias.data.demo import make_demo_corpus

    corpus = make_demo_corpus(seed=5, n_train=200, n_dev=100, n_test=3)
    suites = []
    for name in ("train", "dev"):
        write_records(corpus[name], tmp_path / f"{name}.jsonl")
        suites += ["--suite", f"{name}={tmp_path / f'{name}.jsonl'}"]
    model = str(tiny_model("bert"))
    for where, more in (("here", []), ("ray", ["--ray", "auto", "--ray-actors", "1"])):
        out = [f"--out={tmp_path / where}.json", f"--predictions={tmp_path / where}-pred"]
        assert run_main(["evaluate", model, *suites, *out, "--name", "m", "-q", *more]) == 0
    for name in (".json", ".md"):
        assert (
            Path(f"{tmp_path}/ray{name}").read_bytes()
            == Path(f"{tmp_path}/here{name}").read_bytes()
        )
    for name in ("-pred/run0-train.jsonl", "-pred/run0-dev.jsonl"):
        assert_same_scores(Path(f"{tmp_path}/ray{name}"), Path(f"{tmp_path}/here{name}"))
