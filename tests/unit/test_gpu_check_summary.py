"""The GPU check's summary: paper-scale times from measured rates (scripts/gpu_check_summary.py)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check_summary.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check_summary", SCRIPT)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


CLASSIFY = {
    "gpu": "H100",
    "small": False,
    "raw": {
        "seq128": {"train_examples_per_s": 50.0},
        "seq48": {"train_examples_per_s": 100.0},
    },
    "zdebias": {"poe": {"trainer_examples_per_s": 80.0}},
    "total_s": 60.0,
}
GENERATE = {
    "device": "H100",
    "small": False,
    "raw": {
        "train_consistency_b24x2": {"steps_per_s": 1.0},
        "generate_b256_40tok": {"sequences_per_s": 200.0},
    },
    "zdebias": {
        "train": {"train_tokens_per_s": 1234.0},
        "sample_hf": {"sequences_per_s_incl_parse": 40.0},
        "sample_hf_generate": {"sequences_per_s_incl_parse": 20.0},
        "vllm": "not installed (or no GPU): skipped",
    },
    "total_seconds": 120.0,
    "sampling": {
        "parameters": 774_030_080,
        "generate": {"rows_per_s": 140.0, "hours_for_5m": 9.92, "seconds": 30.1},
        "refill": {"rows_per_s": 700.0, "x_generate": 5.0, "hours_for_5m": 1.98},
        "refill_compiled": {"error": "RuntimeError: no graph"},
    },
    "train": {"plain_causal_lm": {"tokens_per_s": 1000.0}},
}


def test_times_at_paper_scale_by_hand() -> None:
    s = _module().summarise(CLASSIFY, GENERATE)
    # 5,000,000 / 40 per s / 3600 = 34.72 h; / 20 = 69.44 h; / 200 = 6.94 h
    assert s["sampling"]["hours_for_5m"] == {
        "zdebias_sampler": 34.72,
        "hf_generate": 69.44,
        "raw_model_generate_b256": 6.94,
    }
    assert s["sampling"]["sequences_per_s"]["vllm"] == "not installed (or no GPU): skipped"
    # 5 epochs × ceil(550,152 / 24) = 114,615 steps at 1 step/s = 31.84 h
    assert s["generator_training"]["hours_5_epochs_snli"] == 31.84
    # 550,152 / 100 / 3600 = 1.53 h; (550,152 + 5M) / 100 / 3600 = 15.42 h
    assert s["classifier_training"]["hours_per_epoch_snli"] == 1.53
    assert s["classifier_training"]["hours_per_epoch_snli_plus_5m"] == 15.42
    assert s["paper"]["sampling_samples_per_s"] == 39.7  # 5M in 35 h
    assert s["errors"] == {} and s["small"] is False
    # the loops' rows as measured, a loop's error kept, the model's size left out
    assert s["decode_loops"] == {
        "generate": {"rows_per_s": 140.0, "hours_for_5m": 9.92},
        "refill": {"rows_per_s": 700.0, "x_generate": 5.0, "hours_for_5m": 1.98},
        "refill_compiled": {"error": "RuntimeError: no graph"},
    }
    assert s["side_by_side"] == {
        "generator_training": {"plain_causal_lm": {"tokens_per_s": 1000.0}},
        "classifier_training": None,
    }


def test_a_missing_part_is_reported_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "gpu_check_generate.json").write_text(json.dumps(GENERATE))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dir", str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    assert json.loads(done.stdout) == result
    assert list(result["errors"]) == ["classify"]
    assert result["classifier_training"]["hours_per_epoch_snli"] is None
    assert result["sampling"]["hours_for_5m"]["zdebias_sampler"] == 34.72
