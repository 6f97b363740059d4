"""Every input of a command carries its own reader options (issue 39, item 4).

``train-classifier --columns`` maps the training file; a dev set in another schema (here
zdebias's own kept.jsonl) resets them with ``PATH::columns=``. ``evaluate`` takes
``--columns`` and ``--where`` like every other command, and a suite's ``::`` options.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zdebias.cli import app
from zdebias.errors import ConfigError

HEADER = "pair_ID\tsentence_A\tsentence_B\tentailment_label\tSemEval_set"
ROWS = [
    ("A man is running.", "A person moves.", "ENTAILMENT", "TRAIN"),
    ("A dog is sleeping.", "A cat is sleeping.", "NEUTRAL", "TRAIN"),
    ("A kid is eating.", "Nobody is eating.", "CONTRADICTION", "TRAIN"),
    ("A woman sings.", "A woman makes a sound.", "ENTAILMENT", "TRAIN"),
    ("A girl reads.", "A child reads.", "ENTAILMENT", "TRIAL"),
    ("A cook fries eggs.", "Nobody cooks.", "CONTRADICTION", "TRIAL"),
    ("A man plays.", "A man plays a guitar.", "NEUTRAL", "TRIAL"),
    ("A man walks.", "A man is outside.", "UNSURE", "TEST"),
]
COLUMNS = "premise=sentence_A,hypothesis=sentence_B,label=entailment_label"


def _files(tmp_path: Path) -> tuple[Path, Path]:
    sick = tmp_path / "SICK.txt"
    lines = [HEADER, *(f"{i}\t" + "\t".join(row) for i, row in enumerate(ROWS, 1))]
    sick.write_text("\n".join(lines) + "\n", encoding="utf-8")
    kept = tmp_path / "kept.jsonl"  # zdebias's own schema
    pairs = [("k1", "A man rests.", "entailment"), ("k2", "He is awake.", "neutral")]
    rows = [{"id": i, "premise": "A man sleeps.", "hypothesis": h, "label": y} for i, h, y in pairs]
    kept.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return sick, kept


@pytest.mark.slow
def test_train_with_a_dev_set_in_another_schema_then_evaluate_with_columns(
    tmp_path: Path, tiny_model: Callable[..., Path]
) -> None:
    sick, kept = _files(tmp_path)
    out = tmp_path / "clf"
    base = ["train-classifier", "--train", str(sick), "--out", str(out)]
    base += ["--model", str(tiny_model("bert")), "--max-steps", "2", "--batch-size", "2"]
    base += ["--columns", COLUMNS, "--where", "SemEval_set=TRAIN", "--json", "-q"]
    # the shared --columns cannot read kept.jsonl: the error names the columns it has
    failed = CliRunner().invoke(app, [*base, "--dev", str(kept)])
    assert isinstance(failed.exception, ConfigError)  # exit 2 from the entry point
    assert str(failed.exception) == (
        f"{kept}: --columns premise=sentence_A: no column 'sentence_A'; the columns are id, "
        "premise, hypothesis, label"
    )
    assert not out.exists()
    result = CliRunner().invoke(app, [*base, "--dev", f"{kept}::columns=;where="])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["n_train"], summary["n_dev"]) == (4, 2)

    # evaluate: --columns and --where for every suite; kept.jsonl's own options reset them
    res = tmp_path / "res.json"
    args = ["evaluate", str(out), "--suite", f"trial={sick}"]
    args += ["--suite", f"train={sick}::where=SemEval_set=TRAIN"]
    args += ["--suite", f"kept={kept}::columns=;where=", "--out", str(res)]
    args += ["--columns", COLUMNS, "--where", "SemEval_set=TRIAL", "--json", "-q"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    suites = {s["name"]: s for s in json.loads(res.read_text(encoding="utf-8"))["suites"]}
    assert (suites["trial"]["n"], suites["trial"]["n_skipped_by_where"]) == (3, 5)
    assert suites["trial"]["where"] == {"SemEval_set": "TRIAL"}
    assert suites["kept"]["n"] == 2 and "n_skipped_by_where" not in suites["kept"]
    assert (suites["train"]["n"], suites["train"]["n_skipped_by_where"]) == (4, 4)
    assert suites["train"]["where"] == {"SemEval_set": "TRAIN"}
