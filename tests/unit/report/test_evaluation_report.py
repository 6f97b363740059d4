"""`zdebias report RESULTS.json` on an evaluate results file (issue 39.5) and the report
command's overwrite rule (issue 39.6)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_result_reports import tables
from typer.testing import CliRunner

from zdebias.cli import app
from zdebias.data.schema import Record
from zdebias.errors import ConfigError
from zdebias.evaluation.metrics import flat_label_metrics
from zdebias.evaluation.suites import flat_metrics, score_predictions, summarize
from zdebias.report.results import result_kind

NLI = ["entailment", "neutral", "contradiction"]


def _results(path: Path) -> Path:
    """An evaluate results file: one run on 'imb', 8 entailment and 2 neutral rows, all
    predicted entailment (accuracy 80 %, balanced accuracy 50 %, macro-F1 44.44 %)."""
    records = [Record(f"r{i}", "entailment", "p", "h", None, {}) for i in range(8)]
    records += [Record(f"n{i}", "neutral", "p", "h", None, {}) for i in range(2)]
    probs = np.tile([0.7, 0.2, 0.1], (10, 1))
    result = score_predictions(probs, NLI, records)
    metrics = {**flat_metrics("imb", result), **flat_label_metrics("imb", result)}
    doc = {
        "kind": "zdebias-evaluation",
        "version": 1,
        "name": "ce",
        "suites": [{"name": "imb", "path": "imb.jsonl", "n": 10}],
        "runs": [{"model": "m", "labels": NLI, "results": {"imb": result}, "metrics": metrics}],
        "summary": {k: summarize([v]) for k, v in metrics.items()},
    }
    path.write_text(json.dumps(doc))
    return path


def test_report_renders_an_evaluate_results_file(tmp_path: Path) -> None:
    path = _results(tmp_path / "results.json")
    assert result_kind(path) == "evaluation"
    runner = CliRunner()
    result = runner.invoke(app, ["report", str(path)])
    assert result.exit_code == 0, result.output
    html = (tmp_path / "results.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "zdebias evaluate: ce" in html
    t = list(tables(html).values())
    assert t[0] == [["Method (model w/ data)", "imb"], ["ce", "80.00"]]
    assert t[1] == [["suite", "accuracy", "macro-F1", "balanced accuracy"],
                    ["imb", "80.00", "44.44", "50.00"]]  # fmt: skip
    assert t[2] == [
        ["suite", "gold label", "n", "accuracy (recall)", "precision", "F1"],
        ["imb", "entailment", "8", "100.00", "80.00", "88.89"],
        ["imb", "neutral", "2", "0.00", "0.00", "0.00"],
    ]
    assert "<h2>Stages</h2>" not in html and "status <b>" not in html

    # issue 39.6: a second report does not replace the first without --overwrite
    (tmp_path / "results.html").write_text("earlier\n")
    again = runner.invoke(app, ["report", str(path)])
    assert isinstance(again.exception, ConfigError)
    assert "exists and is not empty; pass --overwrite" in str(again.exception)
    assert (tmp_path / "results.html").read_text() == "earlier\n"
    assert runner.invoke(app, ["report", str(path), "--overwrite"]).exit_code == 0
    assert (tmp_path / "results.html").read_text() == html


def test_other_json_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"kind": "something"}')
    with pytest.raises(ConfigError, match="nor a zdebias evaluate results file"):
        result_kind(tmp_path / "x.json")
