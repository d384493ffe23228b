#!/usr/bin/env bash
# Issue 16 on a CUDA machine, from the repository root:
#
#     bash benchmarks/gpu.sh [OUT_DIR]        # OUT_DIR defaults to $OUT, else ./out
#
# 1. makes the project and what the GPU runs need importable, with the python3 that holds CUDA torch:
#    - wheels in .whl/ (made on a machine with internet by `bash benchmarks/gpu_wheels.sh`) are installed
#      into /tmp/kda-site, for machines that reach no package index;
#    - otherwise `pip install -e ".[cuda]" pytest` where an index answers;
#    - the checkout itself goes on PYTHONPATH either way (no build step needed);
# 2. runs the GPU tests: the FLA oracle (tests/kda/test_gpu_oracle.py, every design against FLA's Triton
#    chunk_kda on the Kimi layer shape in bf16), the CUDA device tests and the backward's (every design with a
#    backward against FLA's Triton backward and fp64 autograd) -> OUT_DIR/gpu_tests.txt;
# 3. runs the whole-layer benchmarks -> OUT_DIR/devices.md (forward), OUT_DIR/devices_backward.md (training).
# Exit status: that of the tests (the benchmark runs regardless).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${1:-${OUT:-out}}"
mkdir -p "$OUT_DIR"
PY="${PYTHON:-python3}"

if compgen -G ".whl/*.whl" > /dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/kda-site .whl/*.whl \
    && export PYTHONPATH="/tmp/kda-site${PYTHONPATH:+:$PYTHONPATH}"
else
  "$PY" -m pip install -q --timeout 10 --retries 0 -e ".[cuda]" pytest 2>/dev/null \
    || echo "pip could not install from an index (no network?): using what this python has"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

"$PY" - <<'PY'
import importlib.util, torch
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, device: "
      f"{torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}")
for name in ("simpy", "numpy", "pytest", "fla", "einops", "triton"):
    print(f"  {name}: {'ok' if importlib.util.find_spec(name) else 'MISSING'}")
PY

"$PY" -m pytest tests/kda/test_gpu_oracle.py tests/kda/test_devices.py tests/kda/test_backward_devices.py -m cuda -o addopts="" -q -rs --durations=12 2>&1 | tee "$OUT_DIR/gpu_tests.txt"
status=${PIPESTATUS[0]}

"$PY" benchmarks/devices.py --device cuda --out "$OUT_DIR/devices.md"
"$PY" benchmarks/devices.py --device cuda --backward --out "$OUT_DIR/devices_backward.md"
exit "$status"
