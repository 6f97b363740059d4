"""A real OpenAI-compatible server in the test suite: ``transformers serve`` on the packaged
SmolLM2-135M-Instruct (CPU), prompted for 50 SNLI-style samples through ``zdebias sample
--backend openai``, then confidence-filtered and Seq-Z filtered (the prompted-seq-z recipe's
steps). ``make setup`` installs the server's extras (``zdebias[serve]``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zdebias.classify.confidence import confidence_filter
from zdebias.cli import app
from zdebias.data.readers import read_records
from zdebias.generation.store import read_samples
from zdebias.models.resolve import resolve_model
from zdebias.stats.recipes import seq_z

LABELS = ("entailment", "neutral", "contradiction")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM if the test process dies without cleaning up."""
    import ctypes
    import signal

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def serve_command(model: str, port: int) -> list[str]:
    """How the docs start the server (``transformers serve``), with this interpreter."""
    code = "import sys; from transformers.cli.transformers import main; sys.exit(main())"
    return [sys.executable, "-c", code, "serve", model, "--host", "127.0.0.1", "--port",
            str(port), "--device", "cpu", "--dtype", "float32"]  # fmt: skip


@pytest.fixture(scope="module")
def smollm2_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """``(base_url, model name)`` of a running ``transformers serve`` (stopped afterwards)."""
    import httpx2

    model = resolve_model("smollm2")
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}
    with log.open("w") as fh:
        proc = subprocess.Popen(
            serve_command(model, port), stdout=fh, stderr=fh, env=env, preexec_fn=_die_with_parent
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"transformers serve exited: {log.read_text()[-2000:]}")
            try:
                if httpx2.get(url + "/models", timeout=2).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        yield url, model
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.real_model
def test_prompt_50_samples_confidence_filter_seq_z(
    smollm2_server: tuple[str, str], data_dir: Path, tmp_path: Path, tiny_model
) -> None:
    url, model = smollm2_server
    train = read_records(data_dir / "snli_20k" / "train.jsonl")[::40]  # labels mixed
    premises, examples = tmp_path / "premises.jsonl", tmp_path / "examples.jsonl"
    for path, rows in ((premises, train[:120]), (examples, train)):
        with path.open("w") as fh:
            for r in rows:
                fh.write(json.dumps({"premise": r.premise, "hypothesis": r.hypothesis,
                                     "label": r.label}) + "\n")  # fmt: skip
    out = tmp_path / "prompted"
    args = ["sample", "--backend", "openai", "--base-url", url, "--generator", model]
    args += ["--premises", str(premises), "--examples", str(examples), "--n", "50"]
    args += ["--out", str(out)]
    args += ["--batch-size", "18", "--few-shot", "2", "--avoid-biased", "3", "--concurrency", "2"]
    args += ["--temperature", "0.7", "--max-tokens", "48", "--timeout", "600", "--shard-size", "18"]
    args += ["-q", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (result.output, result.exception)
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    print(json.dumps({k: summary.get(k) for k in ("n_generated", "malformed", "n_duplicates",
                                                  "samples_per_s", "usage")}))  # fmt: skip

    samples = read_samples(out)
    assert summary["complete"] and len(samples) == 50
    assert Counter(r.label for r in samples) == {
        "entailment": 17,
        "neutral": 17,
        "contradiction": 16,
    }
    assert len({(r.premise, r.label, r.hypothesis) for r in samples}) == 50
    assert all(r.hypothesis and "\n" not in r.hypothesis for r in samples)
    # the counts add up: every request is a written, dropped, duplicate or surplus sample
    usage = summary["usage"]
    dropped = summary["n_malformed"] + summary["n_duplicates"] + summary["n_surplus"]
    assert usage["requests"] == summary["n_generated"] == 50 + dropped
    assert usage["prompt_tokens"] > 50 * 60 and usage["completion_tokens"] >= 50
    # bias-aware: the top-z hypothesis words of each label in the 500 examples, avoided
    assert summary["prompting"]["avoid"] == {
        "entailment": ["there", "outside", "are outside"],
        "neutral": ["to", "his", "in his"],
        "contradiction": ["sleeping", "plays", "is sleeping"],
    }

    # an untrained 3-way head gives every label p ≈ 1/3 (0.3317-0.3366): τ 0.3 keeps all
    clf = tiny_model("bert")
    kept, rejected, conf = confidence_filter(samples, clf, threshold=0.3, progress=False)
    assert len(kept) == 50 == conf["n_input"] and not rejected
    assert all(0.3 < r.meta["confidence"] < 0.34 for r in kept)

    original = train[:600]
    combined = seq_z(original, kept, zfilter_batch_size=100, seed=0)
    types = Counter(r.meta["type"] for r in combined.records)
    assert len(combined.records) + len(combined.rejected) == len(original) + len(kept)
    assert set(types) <= {"original", "generated"} and types["original"] > 0
