#!/usr/bin/env bash
# Here, before a lent GPU session: the wheels the GPU image lacks (or has too old), for its
# Python 3.12, into .whl/ (git-ignored through .git/info/exclude), to be carried with `carry:
# [.whl]` and installed by scripts/device_session.sh. The versions are this venv's, the ones
# the suite passes with. About 20 MB.
#   bash scripts/device_prepare.sh
set -euo pipefail
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
PY="${PYTHON:-.venv/bin/python}"
# missing there: pydantic orjson datasets gguf httpx2 plotly; typer there is older than 0.29
NAMES=(pydantic pydantic_core annotated-types typing-inspection orjson datasets dill multiprocess
       gguf httpx2 httpcore2 truststore plotly typer click rich)
specs=()
for n in "${NAMES[@]}"; do
  specs+=("$n==$("$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$n")")
done
rm -rf .whl && mkdir -p .whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "${specs[@]}"
ls .whl && du -sh .whl
