"""Prompted counterfactuals against a stub OpenAI-compatible server: prompts carry the
rationale words and the target, answers are parsed strictly, post-selection and the metrics
apply as to AutoCAD's outputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from helpers.stub_server import StubServer
from zdebias.counterfactual.metrics import counterfactual_metrics
from zdebias.counterfactual.prompted import (
    inserted_words,
    prompt_counterfactuals,
    word_edit_distance,
)
from zdebias.data.schema import Record
from zdebias.generation.prompted import request_seed

LABELS = ["entailment", "neutral", "contradiction"]


class FakeClassifier:
    labels = LABELS


def _fake_proba(clf: Any, records: list[Record], **_: Any) -> np.ndarray:
    """contradiction if the hypothesis has "dancing", neutral with "after work", else
    entailment (p = 0.8 for the pick)."""
    out = np.full((len(records), 3), 0.1)
    for i, r in enumerate(records):
        h = r.hypothesis or ""
        out[i, 2 if "dancing" in h else 1 if "after work" in h else 0] = 0.8
    return out


def _record(i: int) -> Record:
    hyp = f"A man {i} is resting."
    start = hyp.index("resting")
    return Record(
        id=f"r{i}",
        label="entailment",
        premise=f"A man {i} sleeps on a couch.",
        hypothesis=hyp,
        meta={"rationales": {"hypothesis": [[start, start + 7]]}},
    )


def test_word_edit_distance_and_inserted_words() -> None:
    assert word_edit_distance("A man is resting.", "A man is dancing.") == 1
    assert word_edit_distance("A man is resting.", "A woman is not resting!") == 3
    assert word_edit_distance("", "two words") == 2
    assert inserted_words("A man is resting.", "A man is dancing wildly.") == ["dancing wildly."]
    assert inserted_words("same", "same") == []


def test_prompted_counterfactuals_select_and_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    import zdebias.classify.predict as predict

    monkeypatch.setattr(predict, "predict_proba", _fake_proba)
    records = [_record(i) for i in range(3)]

    def answer(body: dict[str, Any]) -> str:
        ask = body["messages"][-1]["content"]
        i = ask.split("A man ", 1)[1].split(" ", 1)[0]
        if "so that the hypothesis is definitely false" in ask:
            return f"A man {i} is dancing."
        return f"A man {i} is resting after work." if i != "2" else "A man 2 is dancing."

    with StubServer() as server:
        server.answer = answer
        # job order: r0→neutral, r0→contradiction, r1→..., r2→... (targets "all")
        seeds = [request_seed(0, k, 0) for k in range(6)]
        server.faults = {
            seeds[0]: ["500"],  # retried, then answered
            seeds[2]: ["text:A man 1 is resting."],  # unchanged
            seeds[3]: ["text:Hypothesis: Contradiction"],  # label echo
        }
        kept, rejected, summary = prompt_counterfactuals(
            "stub",
            FakeClassifier(),
            records,
            targets="all",
            base_url=server.url,
            retry_backoff=0.0,
        )
        body = next(b for b in server.bodies if b["seed"] == seeds[1])
    ask = body["messages"][-1]["content"]
    assert 'The words that decide this: "resting"' in ask
    assert "so that the hypothesis is definitely false if the premise is true" in ask
    assert ask.endswith("Answer with the new hypothesis only.")
    assert [r.id for r in kept] == ["r0:cf:neutral:0", "r0:cf:contradiction:0",
                                    "r2:cf:contradiction:0"]  # fmt: skip
    assert [r.meta["rejected_by"] for r in rejected] == [
        "unchanged", "malformed", "classifier"]  # fmt: skip
    assert rejected[2].id == "r2:cf:neutral:0"  # "dancing": the classifier says contradiction
    assert kept[1].hypothesis == "A man 0 is dancing." and kept[1].premise == records[0].premise
    assert kept[1].meta["fillers"] == ["dancing."] and kept[1].meta["edit_distance"] == 1
    assert kept[0].meta["edit_distance"] == 2  # "resting ." → "resting after work ."
    assert summary["n_outputs"] == 6 and summary["n_kept"] == 3 and summary["n_candidates"] == 4
    assert summary["flip_rate"] == 0.75 and summary["mean_edit_distance"] == 1.25  # (2+1+1+1)/4
    assert summary["usage"]["requests"] == 6 and summary["usage"]["retries"] == 1
    assert summary["usage"]["prompt_tokens"] == 60
    # the AutoCAD metrics read them as they are
    assert rejected[1].meta["parse_error"] == "label_echo"
    assert summary["rejected_by"] == {"unchanged": 1, "label_echo": 1, "classifier": 1}
    # the AutoCAD metrics read them as they are: the unparsed answer is left out, and of the
    # other 5 the classifier gives 3 their target (the unchanged one stays entailment)
    metrics = counterfactual_metrics(kept + rejected)
    assert metrics["n_outputs"] == 5 and metrics["n_excluded_malformed"] == 1
    assert metrics["flip_rate"] == 0.6


def test_cli_writes_what_metrics_reads(tmp_path, tiny_model) -> None:
    import json

    from typer.testing import CliRunner

    from zdebias.cli import app

    data = tmp_path / "rationales.jsonl"
    data.write_text("".join(json.dumps(_record(i).to_dict()) + "\n" for i in range(3)))
    with StubServer() as server:
        server.answer = lambda body: "A man is dancing."
        args = ["counterfactual", "prompt", str(data), "--generator", "stub", "--classifier"]
        args += [str(tiny_model("bert")), "--out", str(tmp_path / "cf"), "--base-url", server.url]
        result = CliRunner().invoke(app, [*args, "--json", "-q"])
        assert result.exit_code == 0, (result.output, result.exception)
    summary = json.loads((tmp_path / "cf" / "summary.json").read_text())
    kept = (tmp_path / "cf" / "kept.jsonl").read_text().splitlines()
    rejected = (tmp_path / "cf" / "rejected.jsonl").read_text().splitlines()
    # one target each; "A man is dancing." differs from every original (edit distance 2)
    assert summary["n_outputs"] == 3 == len(kept) + len(rejected)
    assert summary["n_candidates"] == 3 and summary["mean_edit_distance"] == 2.0
    result = CliRunner().invoke(app, ["counterfactual", "metrics", str(tmp_path / "cf"), "--json"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout[result.stdout.index("{") :])
    assert metrics["n_outputs"] == 3 and metrics["flip_rate"] == summary["flip_rate"]


def test_recipe_stage(tmp_path, tiny_model) -> None:
    import json

    from typer.testing import CliRunner

    from zdebias.cli import app

    data = tmp_path / "rationales.jsonl"
    data.write_text("".join(json.dumps(_record(i).to_dict()) + "\n" for i in range(2)))
    clf = tiny_model("bert")
    with StubServer() as server:
        server.answer = lambda body: "A man is dancing."
        (tmp_path / "r.yaml").write_text(
            f"name: t\ntask: nli\ndata: {{rat: {data}}}\nstages:\n"
            "  cf: {stage: counterfactual-prompt, generator: stub, input: rat, targets: all,\n"
            f"       classifier: '{clf}', base_url: '{server.url}'}}\n"
        )
        result = CliRunner().invoke(
            app, ["run", str(tmp_path / "r.yaml"), "--out", str(tmp_path / "run")]
        )
        assert result.exit_code == 0, (result.output, result.exception)
        assert len(server.bodies) == 4  # 2 examples x 2 other labels
    summary = json.loads(next((tmp_path / "run").rglob("cf/summary.json")).read_text())
    assert summary["n_outputs"] == 4 and summary["usage"]["prompt_tokens"] == 40


def test_one_front_door() -> None:
    import inspect

    from zdebias.counterfactual.settings import PromptCounterfactualSettings
    from zdebias.generation.settings import ClientSettings
    from zdebias.pipeline.stages.counterfactual import CounterfactualPromptConfig

    params = inspect.signature(prompt_counterfactuals).parameters
    assert "PromptCounterfactualSettings" in str(params["settings"].annotation)
    assert "ClientSettings" in str(params["client"].annotation)
    fields = set(CounterfactualPromptConfig.model_fields)
    assert (
        set(PromptCounterfactualSettings.model_fields) | set(ClientSettings.model_fields) < fields
    )
