#!/usr/bin/env bash
# The test suite's GPU-relevant part on a machine with a CUDA GPU, in one command (at most 4 min):
#   1. every test marked `cuda` (they skip without a GPU): the numbers of the generator loss,
#      the scorer, the classifier and saliency on the GPU in float32 and bfloat16 against the
#      CPU, within the tolerance stated per dtype (tests/unit/test_devices.py);
#   2. the test files whose outcome depends on what is picked when CUDA is visible (device
#      "auto", HF Trainer's device, DDP's backend) or on the installed typer / transformers,
#      then those whose models take the GPU on their own (cut first when time runs out).
# The two parts are cut at 60 s and 180 s ($GPU_TESTS_CUDA_S, $GPU_TESTS_FILES_S).
# Before any test it checks, at once, that every package pyproject.toml names is importable
# and not older than its lower bound, and says in one line what is missing (exit 2).
# Writes $OUT/gpu_tests.txt (GPU, versions, pytest's summaries) and $OUT/gpu_tests-*.xml
# (junit). A part cut by its time limit is interrupted like Ctrl-C: its summary and junit
# keep the tests that ran.
# Usage, from the repository root:
#   bash scripts/gpu_tests.sh                  # PYTHON=/path/to/python to pick another
set -uo pipefail
export OUT="${OUT:-$(mktemp -d)}" PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src:${PYTHONPATH:-}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export TRANSFORMERS_NO_ADVISORY_WARNINGS=1
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
LOG="$OUT/gpu_tests.txt"

"$PY" - <<'EOF' 2>&1 | tee "$LOG"
"""Every requirement of pyproject.toml (and its dev extra) importable and new enough."""
import importlib.metadata as md
import importlib.util
import re
import sys
import tomllib

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
dev = [d for d in project["optional-dependencies"]["dev"] if not d.startswith("ruff")]
wanted = project["dependencies"] + dev  # ruff (lint) is not needed to run the tests
modules = {"scikit-learn": "sklearn", "pyyaml": "yaml"}
missing, old = [], []
for spec in wanted:
    name, low = re.match(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*(?:>=\s*([0-9.]+))?", spec).groups()
    module = modules.get(name.lower(), name.lower().replace("-", "_"))
    if importlib.util.find_spec(module) is None:
        missing.append(name)
        continue
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        continue
    nums = lambda v: tuple(int(x) for x in re.findall(r"\d+", v)[:3])  # noqa: E731
    if low and nums(have) < nums(low):
        old.append(f"{name} {have} (needs >={low})")
problems = ([f"missing: {' '.join(missing)}"] if missing else []) + (
    [f"too old: {', '.join(old)}"] if old else []
)
if problems:
    print("gpu_tests: cannot run the tests; " + "; ".join(problems), file=sys.stderr)
    sys.exit(2)
import torch

gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, GPU: {gpu or 'none visible'}")
print("versions: " + ", ".join(f"{n} {md.version(n)}" for n in ("transformers", "accelerate", "typer")))
if gpu is None:
    print("no CUDA GPU: the cuda tests skip; the rest runs on the CPU")
EOF
status=${PIPESTATUS[0]}
if [[ $status -ne 0 ]]; then exit "$status"; fi

FILES=(
  tests/unit/test_devices.py
  tests/unit/generation/test_trainer.py
  tests/unit/counterfactual/test_cf_saliency.py
  tests/unit/classify/test_classify_train.py
  tests/unit/models/test_distributed.py
  tests/unit/models/test_models.py
  tests/unit/pipeline/test_pipeline_runner.py
  tests/unit/test_front_door.py
  tests/unit/generation/test_generation_front_door.py
  tests/unit/data/test_malformed.py
  tests/integration/test_ddp.py
  # then the files whose models take the GPU on their own (device auto: found by running
  # the unit tests under ZDEBIAS_TEST_FAKE_CUDA=1); first cut when time runs out
  tests/unit/generation/test_{sample,sample_cells,sample_premises,prompted}.py
  tests/unit/classify/test_{classify_confidence,classify_judge,hypo_only_feature}.py
  tests/unit/classify/test_predict_progress.py
  tests/unit/counterfactual/test_cf_{infill,metrics,prompted,rationales,select}.py
  tests/unit/evaluation/test_eval_cache.py
)
PYTEST=("$PY" -m pytest -q -ra -p no:cacheprovider)
# 1. the cuda tests of the whole suite; 2. the device-sensitive files (packaged pretrained
# models, `real_model`, are CPU tests and need their packages: left out)
echo "== pytest -m cuda" | tee -a "$LOG"
timeout -s INT "${GPU_TESTS_CUDA_S:-60}" "${PYTEST[@]}" -m cuda --continue-on-collection-errors \
  --junitxml="$OUT/gpu_tests-cuda.xml" tests \
  2>&1 | tail -n 25 | tee -a "$LOG"
cuda_status=${PIPESTATUS[0]}
echo "== pytest -m 'not cuda and not real_model' ${FILES[*]}" | tee -a "$LOG"
timeout -s INT "${GPU_TESTS_FILES_S:-180}" "${PYTEST[@]}" -m "not cuda and not real_model" \
  --junitxml="$OUT/gpu_tests-files.xml" "${FILES[@]}" 2>&1 | tail -n 40 | tee -a "$LOG"
files_status=${PIPESTATUS[0]}
echo "gpu_tests: cuda part status $cuda_status, device-sensitive files status $files_status" \
  "(0: passed; 1: a test failed; 124: cut by the time limit); results in $OUT" | tee -a "$LOG"
[[ $cuda_status -eq 0 && $files_status -eq 0 ]]
