#!/usr/bin/env bash
# GPU check for a lent accelerator, one command: the decoding loops against model.generate
# (GPT-2-large shape), zdebias's generator and classifier trainers against plain HF, sampling,
# generator and BERT-base classifier training speed, and the times these imply at paper scale
# (5M samples), in one JSON: $OUT/gpu_check.json (the two parts' details beside it). Models
# are built from their configs with random weights: nothing is downloaded. Within 8 minutes
# on one H100: the parts are cut at 160 s and 300 s ($GPU_CHECK_CLASSIFY_S,
# $GPU_CHECK_GENERATE_S), and a part cut keeps what it had measured.
# Usage, from the repository root:
#   bash scripts/gpu_check.sh            # on the GPU machine
#   bash scripts/gpu_check.sh --small    # tiny sizes on CPU, a 1-3 minute smoke run
set -uo pipefail
SMALL=()
if [[ "${1:-}" == "--small" ]]; then SMALL=(--small); fi
export OUT="${OUT:-$(mktemp -d)}" PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src:${PYTHONPATH:-}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null || echo "no nvidia-smi: CPU"
timeout "${GPU_CHECK_CLASSIFY_S:-160}" "$PY" scripts/gpu_check_classify.py "${SMALL[@]}" > "$OUT/classify.log" 2>&1 \
  || echo "classify part ended with status $? (see $OUT/classify.log)"
timeout "${GPU_CHECK_GENERATE_S:-300}" "$PY" scripts/gpu_check_generate.py "${SMALL[@]}" > "$OUT/generate.log" 2>&1 \
  || echo "generate part ended with status $? (see $OUT/generate.log)"
"$PY" scripts/gpu_check_summary.py --dir "$OUT"
echo "results in $OUT (gpu_check.json; details: gpu_check_classify.json, gpu_check_generate.json)"
