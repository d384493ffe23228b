#!/usr/bin/env bash
# On a machine with internet: fetch the wheels benchmarks/gpu.sh needs on a CUDA machine that reaches no
# package index (its image has torch, triton and numpy, for Python 3.12) into .whl/ (in .gitignore).
set -euo pipefail
cd "$(dirname "$0")/.."
"${PYTHON:-python3}" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  fla-core==0.6.0 einops==0.8.2 simpy==4.1.2 pytest==9.2.0 iniconfig==2.3.1 pluggy==1.7.0 packaging==25.0 pygments==2.19.2
ls -la .whl
