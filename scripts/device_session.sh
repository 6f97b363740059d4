#!/usr/bin/env bash
# On a lent GPU machine (the `device` tool), one prepared command within its 10-minute limit:
# the wheels of scripts/device_prepare.sh installed, then scripts/gpu_check.sh (cut at 2 + 4
# min) and scripts/gpu_tests.sh (cut at 1 + 2 min). Results under $OUT: gpu_check.json and
# the parts' JSON and logs, gpu_tests.txt and the junit files.
#   here:   bash scripts/device_prepare.sh
#   device: run(command="bash scripts/device_session.sh", carry=[".whl"], timeout_s=600)
set -uo pipefail
export OUT="${OUT:-$(mktemp -d)}" PYTHONUNBUFFERED=1
mkdir -p "$OUT"
if [[ -d .whl ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 2
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
GPU_CHECK_CLASSIFY_S=120 GPU_CHECK_GENERATE_S=240 bash scripts/gpu_check.sh 2>&1 | tee "$OUT/gpu_check.log"
GPU_TESTS_CUDA_S=60 GPU_TESTS_FILES_S=120 bash scripts/gpu_tests.sh 2>&1 | tee "$OUT/gpu_tests.log" | tail -40
