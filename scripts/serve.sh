#!/usr/bin/env bash
# Quick start: installs what building needs, builds the `hyllm` binary alone
# (no tests, no benchmarks) and starts `hyllm serve` on the embedded default
# model; the chat page is at http://localhost:8000/. Extra arguments go to
# `hyllm serve`. The CUDA backend is compiled only when a GPU is visible:
# without one the server runs on the CPU, and the kernels would only cost
# build time (scripts/test.sh compiles them whenever nvcc is there).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh build
cuda=OFF
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then cuda=ON; fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DHYLLM_BUILD_TESTS=OFF -DHYLLM_BUILD_BENCHMARKS=OFF -DHYLLM_ENABLE_CUDA="$cuda" >/dev/null
cmake --build build -j "${HYLLM_BUILD_JOBS:-$(nproc)}" --target hyllm
exec build/hyllm serve "$@"
