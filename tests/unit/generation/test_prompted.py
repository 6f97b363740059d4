"""Prompted sampling against a stub OpenAI-compatible server: balanced labels, strict parsing,
retries, timeouts, garbage, token accounting, resume, key handling, bias-aware prompts, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from helpers.stub_server import StubServer, answer_for
from zdebias.cli import app
from zdebias.data.schema import Record
from zdebias.errors import ConfigError, ZdebiasError
from zdebias.generation.prompted import api_url, biased_words, parse_answer, request_seed
from zdebias.generation.sample import sample_generator
from zdebias.generation.store import read_samples

LABELS = ("entailment", "neutral", "contradiction")
HYPS = {
    "entailment": "Someone is outside.",
    "neutral": "A man is tall.",
    "contradiction": "Nobody.",
}


def _premises(k: int = 5) -> list[Record]:
    return [
        Record(
            id=f"p{i}-{lab}", premise=f"A man number {i} walks.", hypothesis=HYPS[lab], label=lab
        )
        for i in range(k)
        for lab in LABELS
    ]


def _run(server: StubServer, out: Path, **kw: Any) -> dict[str, Any]:
    options: dict[str, Any] = {
        "backend": "openai",
        "base_url": server.url,
        "batch_size": 6,
        "shard_size": 4,
        "few_shot": 2,
        "retry_backoff": 0.0,
        "progress": False,
        "premises": _premises(),
        **kw,
    }
    return sample_generator("stub-model", out, options.pop("n", 12), **options)


def test_parse_answer_is_strict() -> None:
    p = "A man walks."

    def reason(text: str | None, finish: str = "stop") -> str | None:
        return parse_answer(text, p, "neutral", labels=LABELS, finish_reason=finish).error

    ok = parse_answer(' Hypothesis: "A man is late." ', p, "neutral", labels=LABELS)
    assert ok.ok and ok.hypothesis == "A man is late." and ok.premise == p
    assert reason("   ") == "empty" and reason('""') == "empty" and reason(None) == "empty"
    assert reason("One.\nTwo.") == "malformed" and reason("123 ...") == "malformed"
    assert reason("A man is late.", "length") == "over_length"
    assert reason("Entailment") == "label_echo" and reason("The premise says so.") == "label_echo"
    assert reason("a man walks") == "copies_premise"
    assert reason("This contradicts it.") == "label_echo"


def test_api_url() -> None:
    assert api_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000/v1"
    assert api_url("https://host/openai/v1/") == "https://host/openai/v1"
    with pytest.raises(ConfigError, match="expected http"):
        api_url("127.0.0.1:8000")


def test_balanced_shards_usage_and_records(tmp_path: Path) -> None:
    with StubServer() as server:
        summary = _run(server, tmp_path / "s")
    # 2 rounds of 6 requests (2 per label each), every answer new and well formed
    assert summary["complete"] and summary["n_written"] == 12 and summary["n_shards"] == 2
    assert summary["n_generated"] == 12 and summary["n_malformed"] == 0
    assert summary["per_label"] == {"entailment": 4, "neutral": 4, "contradiction": 4}
    assert summary["usage"] == {
        "requests": 12,
        "failed_requests": 0,
        "retries": 0,
        "prompt_tokens": 120,
        "completion_tokens": 60,
        "mean_prompt_tokens": 10.0,
        "mean_completion_tokens": 5.0,
        "completion_tokens_per_s": summary["usage"]["completion_tokens_per_s"],
    }
    records = read_samples(tmp_path / "s")
    assert [r.id for r in records] == [f"prompt-s0:{i}" for i in range(12)]
    assert [r.label for r in records[:6]] == list(LABELS) * 2
    first = records[0]
    assert first.hypothesis == f"Person {request_seed(0, 0, 0) % 100_003} is outdoors."
    assert first.meta["type"] == "generated" and first.meta["backend"] == "openai"
    # each premise is asked for all three labels in a row
    assert len({r.premise for r in records[:3]}) == 1 != len({r.premise for r in records[:6]})
    (body,) = [b for b in server.bodies if b["seed"] == request_seed(0, 0, 0)]  # arrival order
    assert body["model"] == "stub-model" and len(server.bodies) == 12
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (1.0, 0.9, 48)
    # system, two examples (user + assistant each), the ask; examples have the target label
    assert [m["role"] for m in body["messages"]] == ["system", *["user", "assistant"] * 2, "user"]
    assert body["messages"][2]["content"] == HYPS["entailment"]
    assert "definitely true" in body["messages"][-1]["content"]
    rows = [json.loads(x) for x in (tmp_path / "s" / "requests-00000.jsonl").open()]
    assert len(rows) == 6 and rows[0]["prompt_tokens"] == 10 and rows[0]["attempts"] == 1
    from zdebias.report.text import sample_text

    assert sample_text(summary).endswith(
        "requests 12 (0 failed, 0 retries); tokens 120 prompt + 60 completion"
    )
    files = {p.name for p in (tmp_path / "s").iterdir()}
    assert {"samples.jsonl", "summary.json", "requests-00001.jsonl", "dropped-00001.jsonl"} <= files


def test_faults_are_retried_or_dropped_and_counted(tmp_path: Path) -> None:
    with StubServer(slow_seconds=1.0) as server:
        seeds = [request_seed(0, 0, j) for j in range(6)]
        server.faults = {
            seeds[0]: ["429", "500"],  # answered on the third attempt
            seeds[1]: ["garbage"],  # a 200 that is not JSON: dropped, not retried
            seeds[2]: ["slow"] * 3,  # times out three times: max_retries=2, dropped
            seeds[3]: ["text:Entailment."],
            seeds[4]: ["text:  "],
            seeds[5]: ["text:One.\nTwo."],
        }
        summary = _run(server, tmp_path / "s", n=6, timeout=0.3, max_retries=2)
        assert server.attempts[seeds[0]] == 3 and server.attempts[seeds[1]] == 1
        assert server.attempts[seeds[2]] == 3
    assert summary["complete"] and summary["n_written"] == 6
    assert summary["malformed"] == {
        "bad_response": 1,
        "request_failed": 1,
        "label_echo": 1,
        "empty": 1,
        "malformed": 1,
    }
    # round 0 gave one entailment; round 1 asks e, n, c, e, n, c: the second e is surplus
    assert summary["n_surplus"] == 1 and summary["n_generated"] == 12
    assert summary["per_label"] == {"entailment": 2, "neutral": 2, "contradiction": 2}
    usage = summary["usage"]
    assert (usage["requests"], usage["failed_requests"], usage["retries"]) == (12, 2, 4)
    assert usage["prompt_tokens"] == 100 and usage["completion_tokens"] == 50
    dropped = [json.loads(x) for x in (tmp_path / "s" / "dropped-00000.jsonl").open()]
    assert [d["reason"] for d in dropped] == [
        "bad_response",
        "request_failed",
        "label_echo",
        "empty",
        "malformed",
    ]
    assert dropped[1]["text"] == "[timeout]"


def test_a_server_that_never_answers_stops_the_run(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = type("Dead", (), {"url": f"http://127.0.0.1:{port}/v1"})()
    with pytest.raises(ZdebiasError, match=r"no answer to any request of round 0 .*connection"):
        _run(dead, tmp_path / "s", n=3, batch_size=3, max_retries=1)  # type: ignore[arg-type]
    assert not (tmp_path / "s" / "state.json").exists()


def test_overwrite_removes_nothing_until_the_server_answers(tmp_path: Path) -> None:
    import socket

    out = tmp_path / "s"
    with StubServer() as server:
        first = _run(server, out, n=6)
    before = sorted(p.name for p in out.iterdir())
    assert first["n_written"] == 6 and "state.json" in before
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = type("Dead", (), {"url": f"http://127.0.0.1:{port}/v1"})()
    with pytest.raises(ZdebiasError, match=r"/v1/models: no answer .*Nothing was removed"):
        _run(dead, out, n=3, batch_size=3, overwrite=True)  # type: ignore[arg-type]
    assert sorted(p.name for p in out.iterdir()) == before  # the old run is still there
    assert len(read_samples(out)) == 6
    with StubServer() as server:  # a server that answers: the old run is replaced
        again = _run(server, out, n=3, batch_size=3, overwrite=True)
    assert again["n_written"] == 3 and len(read_samples(out)) == 3


def test_stop_and_resume_equals_uninterrupted(tmp_path: Path) -> None:
    with StubServer() as server:
        whole = _run(server, tmp_path / "whole")
        part = _run(server, tmp_path / "part", max_shards=1)
        assert not part["complete"] and part["n_written"] == 6
        before = len(server.bodies)
        rest = _run(server, tmp_path / "part")
        resumed = {b["seed"] for b in server.bodies[before:]}
    assert resumed == {request_seed(0, 1, j) for j in range(6)}  # round 1 only
    for key in ("n_written", "n_generated", "per_label"):
        assert rest[key] == whole[key], key
    assert rest["usage"]["requests"] == 12 and rest["usage"]["prompt_tokens"] == 120
    a, b = read_samples(tmp_path / "whole"), read_samples(tmp_path / "part")
    assert [r.to_dict() for r in a] == [r.to_dict() for r in b]
    with pytest.raises(ConfigError, match=r"few_shot=1 \(run has 2\)"):
        _run(server, tmp_path / "part", few_shot=1)


def test_api_key_from_env_is_sent_never_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZD_TEST_KEY", "sk-secret-123")
    with StubServer() as server:
        _run(server, tmp_path / "s", api_key_env="ZD_TEST_KEY", n=3, batch_size=3)
        assert server.headers[0]["Authorization"] == "Bearer sk-secret-123"
        server.faults = {request_seed(0, 0, 0): ["401"]}
        server.attempts.clear()
        with pytest.raises(ConfigError, match=r"HTTP 401: .*invalid api key.*\$ZD_TEST_KEY"):
            _run(server, tmp_path / "t", api_key_env="ZD_TEST_KEY", n=3, batch_size=3)
    for path in [*(tmp_path / "s").iterdir(), *(tmp_path / "t").iterdir()]:
        assert "sk-secret" not in path.read_text(), path.name


def test_bias_aware_prompts_list_the_top_z_words(tmp_path: Path) -> None:
    # "nobody" is in all 8 contradiction hypotheses and nowhere else: z = (1 - 1/3) /
    # sqrt(2/9 / 8) = 4.0; "sleeps", "eats" and the bigrams are in only 4 (z = 2.83)
    examples = [
        Record(id=f"e{i}", premise=f"A dog runs {i}.", hypothesis=h, label=lab)
        for i in range(8)
        for lab, h in (
            ("entailment", "An animal moves outside."),
            ("neutral", "A dog runs for a prize."),
            ("contradiction", "Nobody sleeps." if i % 2 else "Nobody eats."),
        )
    ]
    words = biased_words(examples, LABELS, 1)
    assert words["contradiction"] == ["nobody"]
    assert all(len(v) == 1 for v in words.values())
    assert biased_words(examples, LABELS, 0) == {lab: [] for lab in LABELS}
    with StubServer() as server:
        summary = _run(server, tmp_path / "s", n=3, batch_size=3, avoid_biased=1, examples=examples)
    (body,) = [b for b in server.bodies if b["seed"] == request_seed(0, 0, 2)]  # contradiction
    assert body["messages"][0]["content"].endswith("Do not use these words or phrases: nobody.")
    assert summary["prompting"]["avoid"] == words


def test_completions_endpoint_and_cli(tmp_path: Path) -> None:
    path = tmp_path / "premises.jsonl"
    with path.open("w") as fh:
        for r in _premises():
            row = {"premise": r.premise, "hypothesis": r.hypothesis, "label": r.label}
            fh.write(json.dumps(row) + "\n")
    with StubServer() as server:
        args = ["sample", "--backend", "openai", "--base-url", server.url, "--generator", "m"]
        args += ["--premises", str(path), "--n", "6", "--out", str(tmp_path / "o")]
        result = CliRunner().invoke(app, [*args, "--endpoint", "completions", "-q", "--json"])
        assert result.exit_code == 0, (result.output, result.exception)
        summary = json.loads(result.stdout[result.stdout.index("{") :])
        assert summary["n_written"] == 6 and summary["usage"]["requests"] == 6
        (body,) = [b for b in server.bodies if b["seed"] == request_seed(0, 0, 0)]
        assert body["prompt"].endswith(
            "Premise: A man number 2 walks.\nHypothesis:"
        )  # seeded order
        assert body["stop"] == ["\n"] and "messages" not in body
        assert read_samples(tmp_path / "o")[0].hypothesis == answer_for(body)
    # bad input: exit 2 and one line naming the option (the real entry point)
    cmd = [sys.executable, "-m", "zdebias.cli", *args[:-2], "--out", str(tmp_path / "b")]
    proc = subprocess.run([*cmd, "--concurrency", "0"], capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "--concurrency" in proc.stderr and not (tmp_path / "b").exists()
    missing = CliRunner().invoke(app, [*args[:7], "--n", "3", "--out", str(tmp_path / "c")])
    assert isinstance(missing.exception, ConfigError) and "--premises" in str(missing.exception)


def test_recipe_stage_samples_through_the_server(tmp_path: Path) -> None:
    data = tmp_path / "train.jsonl"
    with data.open("w") as fh:
        for r in _premises():
            row = {"premise": r.premise, "hypothesis": r.hypothesis, "label": r.label}
            fh.write(json.dumps(row) + "\n")
    with StubServer() as server:
        recipe = tmp_path / "r.yaml"
        recipe.write_text(
            "name: t\ntask: nli\nseed: 3\n"
            f"data: {{train: {data}}}\n"
            "stages:\n"
            "  samples: {stage: sample, backend: openai, generator: stub, premises: train,\n"
            f"            base_url: '{server.url}', n: 6, batch_size: 6, few_shot: 1}}\n"
        )
        result = CliRunner().invoke(app, ["run", str(recipe), "--out", str(tmp_path / "run")])
        assert result.exit_code == 0, (result.output, result.exception)
    folder = next(p for p in (tmp_path / "run").rglob("samples.jsonl"))
    rows = [json.loads(x) for x in folder.open()]
    assert len(rows) == 6 and {r["label"] for r in rows} == set(LABELS)
    assert all(r["id"].startswith("prompt-s3:") for r in rows)  # the recipe's seed
    assert {b["seed"] for b in server.bodies} == {request_seed(3, 0, j) for j in range(6)}


def test_local_backend_is_seeded_and_counts_tokens(tiny_model) -> None:
    from transformers import AutoTokenizer

    from zdebias.generation.prompted import LocalChatBackend, RequestPlanner
    from zdebias.generation.settings import PromptSettings, SampleSettings

    gen = str(tiny_model("gpt2"))
    cfg = SampleSettings(n=3, backend="local", batch_size=3)
    prompt = PromptSettings(endpoint="completions", max_tokens=6, few_shot=1)
    records = _premises(2)
    requests = RequestPlanner(records[::3], records, LABELS, cfg, prompt, {}).plan(0, None)
    backend = LocalChatBackend(gen, cfg, prompt)
    first, again = backend.run(requests, 11), backend.run(requests, 11)
    assert [a.text for a in first] == [a.text for a in again]  # one seeded generate per round
    tok = AutoTokenizer.from_pretrained(gen)
    for req, ans in zip(requests, first, strict=True):
        assert ans.prompt_tokens == len(tok(req.text(), add_special_tokens=False)["input_ids"])
        assert 1 <= ans.completion_tokens <= 6 and ans.finish_reason in ("stop", "length")
    with pytest.raises(ConfigError, match="no chat template"):
        LocalChatBackend(gen, cfg, PromptSettings())


def test_sample_backend_local_cli(tmp_path: Path, tiny_model) -> None:
    path = tmp_path / "premises.jsonl"
    with path.open("w") as fh:
        for r in _premises():
            row = {"premise": r.premise, "hypothesis": r.hypothesis, "label": r.label}
            fh.write(json.dumps(row) + "\n")
    args = ["sample", "--backend", "local", "--generator", str(tiny_model("gpt2"))]
    args += ["--premises", str(path), "--n", "3", "--out", str(tmp_path / "o"), "--max-tokens"]
    args += ["8", "--endpoint", "completions", "--batch-size", "3", "--patience-rounds", "2"]
    result = CliRunner().invoke(app, [*args, "-q", "--json"])
    # a random tiny model never ends a line within 8 tokens: every answer is cut off, and the
    # run stops after 2 rounds without a sample (6 answers, all over_length)
    assert isinstance(result.exception, ZdebiasError), result.output
    assert "no new well-formed sample in 2 rounds" in str(result.exception)
    assert "{'over_length': 6}" in str(result.exception)
