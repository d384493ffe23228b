#!/usr/bin/env bash
# Creates .venv and installs the project with its test tools. Idempotent and offline-friendly:
# torch is pinned to the CPU build 2.13.0 before anything else can pull a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=".venv/bin/python -m pip --disable-pip-version-check -q"
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  # On machines without a local CPU wheel, pass e.g. PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
  $PIP install "torch==${TORCH_VERSION:-2.13.0}"
fi
$PIP install -e ".[dev]"
touch .venv/.stamp
