#!/usr/bin/env bash
# GPU checks for a lent accelerator: training and inference/sampling throughput at real model
# sizes (BERT-base classifier, GPT-2-large generator), built from configs (no downloads).
# Usage on the GPU machine, from the repository root: bash scripts/gpu_check.sh
set -euo pipefail
export OUT="${OUT:-$(mktemp -d)}" PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src:${PYTHONPATH:-}"
nvidia-smi --query-gpu=name,memory.total --format=csv || true
python3 scripts/gpu_check_classify.py
python3 scripts/gpu_check_generate.py
echo "results in $OUT"
