"""The GPU check's one answer: throughputs and the paper-scale times they imply (JSON).

``python3 scripts/gpu_check_summary.py [--dir DIR] [--out FILE]`` reads what
``gpu_check_classify.py`` and ``gpu_check_generate.py`` wrote into ``DIR`` (default ``$OUT``) and
writes ``gpu_check.json`` there (or ``FILE``), printing it too:

- ``sampling``: sequences/s of the GPT-2-large-sized generator through zdebias's sampler (its
  decoding loop), through ``model.generate`` and through vLLM (when installed), and the hours
  5M samples take at each rate, beside the paper's (~35 h on one A100, ~40 samples/s). The
  random model never writes EOS, so every sequence runs the full 40 new tokens (SNLI pairs
  average ~33 GPT-2 tokens in all): an upper bound on time per sequence; a trained generator's
  malformed and duplicate outputs (a few %) add to it.
- ``generator_training``: steps/s at batch 24 with the consistency copy (λ > 0) and the hours
  GD-NLI's 5 epochs over SNLI's 550,152 pairs take (the paper: ~24 h).
- ``classifier_training``: BERT-base training examples/s at sequence length 48 (SNLI-like) and
  128, and hours per epoch over SNLI (550k) and over SNLI + 5M generated pairs.
- ``decode_loops``: the GPT-2-large-sized generator, bf16, 127 new tokens a row, rows/s of
  ``model.generate`` and of the carry, refill and compiled refill loops, each one's ratio to
  ``model.generate`` and hours for 5M rows (issue 28's targets: >= 3x and >= 1,000 rows/s).
- ``side_by_side``: zdebias's generator trainer against a plain causal-LM fine-tune (tokens/s,
  MFU) and its classifier trainer against plain HF Trainer (samples/s, first 50 steps vs the
  rest), as the two scripts measured them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
from typing import Any

SNLI_TRAIN = 550_152
SAMPLES = 5_000_000
PAPER = {
    "sampling_hours_5m": 35,
    "sampling_samples_per_s": round(SAMPLES / (35 * 3600), 1),
    "generator_training_hours": 24,
    "gpu": "one A100 (GD-NLI, Wu et al. 2022)",
}

#: what ``decode_loops`` keeps of each loop's measurement
LOOP_KEYS = ("rows_per_s", "x_generate", "hours_for_5m", "error")


def _load(folder: Path, name: str) -> dict[str, Any]:
    try:
        return json.loads((folder / name).read_text())
    except (OSError, ValueError) as err:
        return {"error": f"{name}: {err}"}


def _hours(items: float, per_s: float | None) -> float | None:
    return round(items / per_s / 3600, 2) if per_s else None


def _get(doc: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)  # type: ignore[assignment]
    return doc


def summarise(classify: dict[str, Any], generate: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of the two scripts' results."""
    rates: dict[str, Any] = {}
    for key, name in (
        ("sample_hf", "zdebias_sampler"),
        ("sample_hf_generate", "hf_generate"),
        ("sample_vllm", "vllm"),
    ):
        part = _get(generate, "zdebias", key)
        if isinstance(part, dict) and "sequences_per_s_incl_parse" in part:
            rates[name] = part["sequences_per_s_incl_parse"]
        elif part is not None:
            rates[name] = part.get("error") if isinstance(part, dict) else part
    if "vllm" not in rates:
        rates["vllm"] = _get(generate, "zdebias", "vllm") or "not measured"
    for key, value in (_get(generate, "raw") or {}).items():
        if key.startswith("generate_b") and isinstance(value, dict):  # generate_b256_40tok
            rates[f"raw_model_{key.removesuffix('_40tok')}"] = value.get("sequences_per_s")
    small = bool(generate.get("small") or classify.get("small"))
    sampling = {
        "model": "GPT-2 large sizes (774M parameters), random weights"
        if not small
        else "--small: a 2-layer GPT-2 (smoke run, not a measurement)",
        "new_tokens_per_sequence": 40,
        "sequences_per_s": rates,
        "hours_for_5m": {
            k: _hours(SAMPLES, v) for k, v in rates.items() if isinstance(v, int | float)
        },
    }
    steps_per_s = _get(generate, "raw", "train_consistency_b24x2", "steps_per_s")
    steps = 5 * math.ceil(SNLI_TRAIN / 24)
    training = {
        "steps_per_s_batch24_consistency": steps_per_s,
        "tokens_per_s_zdebias_trainer": _get(generate, "zdebias", "train", "train_tokens_per_s"),
        "hours_5_epochs_snli": _hours(steps, steps_per_s),
    }
    seq48 = _get(classify, "raw", "seq48", "train_examples_per_s")
    classifier = {
        "model": "BERT-base sizes (110M parameters), random weights"
        if not small
        else "--small: a 2-layer BERT (smoke run, not a measurement)",
        "train_examples_per_s_seq48": seq48,
        "train_examples_per_s_seq128": _get(classify, "raw", "seq128", "train_examples_per_s"),
        "zdebias_trainer_examples_per_s": _get(
            classify, "zdebias", "poe", "trainer_examples_per_s"
        ),
        "hours_per_epoch_snli": _hours(SNLI_TRAIN, seq48),
        "hours_per_epoch_snli_plus_5m": _hours(SNLI_TRAIN + SAMPLES, seq48),
    }
    loops = {
        name: {k: v for k, v in part.items() if k in LOOP_KEYS}
        for name, part in (_get(generate, "sampling") or {}).items()
        if isinstance(part, dict)
    }
    return {
        "device": generate.get("device") or classify.get("gpu") or "cpu",
        "small": small,
        "sampling": sampling,
        "generator_training": training,
        "classifier_training": classifier,
        "decode_loops": loops,
        "side_by_side": {
            "generator_training": _get(generate, "train"),
            "classifier_training": _get(classify, "trainer_side_by_side"),
        },
        "paper": PAPER,
        "seconds": {
            "classify": classify.get("total_s"),
            "generate": generate.get("total_seconds"),
        },
        "errors": {
            k: v["error"]
            for k, v in (("classify", classify), ("generate", generate))
            if "error" in v
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=os.environ.get("OUT"), help="the scripts' JSON folder")
    parser.add_argument("--out", default=None, help="result file (default DIR/gpu_check.json)")
    args = parser.parse_args()
    if not args.dir:
        parser.error("give --dir or set $OUT")
    folder = Path(args.dir)
    result = summarise(
        _load(folder, "gpu_check_classify.json"), _load(folder, "gpu_check_generate.json")
    )
    text = json.dumps(result, indent=2)
    Path(args.out or folder / "gpu_check.json").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
