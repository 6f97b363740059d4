"""One front door: the AutoCAD settings shared by library, stage and CLI; old spellings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zdebias.cli import app
from zdebias.counterfactual.settings import InfillSettings, SelectSettings
from zdebias.data.schema import Record
from zdebias.data.writers import write_records
from zdebias.errors import ConfigError
from zdebias.pipeline.stages.counterfactual import InfillerConfig

runner = CliRunner()


def test_the_train_stage_offers_every_arch() -> None:
    cfg = InfillerConfig(stage="counterfactual-train", model="minilm", train="t", arch="bert2bert")
    assert InfillSettings.take(cfg).arch == "bert2bert"
    with pytest.raises(ConfigError, match="arch"):
        InfillSettings.of(model="t5-small", arch="gpt")


def test_old_keys_still_work() -> None:
    assert InfillSettings.of(model="x", lr=1e-3).learning_rate == 1e-3
    assert SelectSettings.of(density=0.5).ratio == 0.5
    assert InfillSettings.of(model="x").seed == 0 == SelectSettings().seed


def _outputs(tmp_path: Path) -> Path:
    recs = [
        Record(f"r{i}", lab, text=t, meta={"classifier_label": pred, "fillers": [t.split()[0]]})
        for i, (t, lab, pred) in enumerate(
            [("good film", "positive", "positive"), ("bad film", "negative", "positive")]
        )
    ]
    path = tmp_path / "cf.jsonl"
    write_records(recs, path)
    return path


def test_metrics_json_text_and_the_old_data_flag(tmp_path: Path) -> None:
    path = _outputs(tmp_path)
    res = runner.invoke(app, ["counterfactual", "metrics", str(path), "--json"])
    assert res.exit_code == 0, res.output
    m = json.loads(res.stdout)
    assert m["n_outputs"] == 2 and m["flip_rate"] == 0.5 and m["input"] == str(path)
    text = runner.invoke(app, ["counterfactual", "metrics", str(path)])
    assert text.exit_code == 0 and "flip_rate: 0.5" in text.stdout
    old = runner.invoke(app, ["counterfactual", "metrics", "--data", str(path), "--json"])
    assert old.exit_code == 0 and json.loads(old.stdout)["flip_rate"] == 0.5
    assert "--data is deprecated" in old.stderr


def test_metrics_refuses_a_non_empty_out(tmp_path: Path) -> None:
    path = _outputs(tmp_path)
    out = tmp_path / "m.json"
    out.write_text("{}")
    res = runner.invoke(app, ["counterfactual", "metrics", str(path), "--out", str(out)])
    assert res.exit_code != 0 and out.read_text() == "{}"
    res = runner.invoke(
        app, ["counterfactual", "metrics", str(path), "--out", str(out), "--overwrite"]
    )
    assert res.exit_code == 0 and json.loads(out.read_text())["n_outputs"] == 2


@pytest.mark.parametrize(
    ("target", "settings"),
    [
        ("zdebias.counterfactual.rationales:extract_rationales", "RationaleSettings"),
        ("zdebias.counterfactual.trainer:train_infiller", "InfillSettings"),
        ("zdebias.counterfactual.select:generate_counterfactuals", "SelectSettings"),
        ("zdebias.counterfactual.metrics:counterfactual_metrics", "MetricsSettings"),
    ],
)
def test_library_functions_take_the_settings_object(target: str, settings: str) -> None:
    import importlib
    import inspect

    module, name = target.split(":")
    fn = getattr(importlib.import_module(module), name)
    assert settings in str(inspect.signature(fn).parameters["settings"].annotation)
