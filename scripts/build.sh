#!/usr/bin/env bash
# Configures and builds everything into build/ (Release): the binary, the
# tests, the benchmarks, and the CUDA backend when nvcc is there. The options
# are set explicitly because scripts/serve.sh turns them off in the same
# build folder. Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${HYLLM_BUILD_JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DHYLLM_BUILD_TESTS=ON -DHYLLM_BUILD_BENCHMARKS=ON -DHYLLM_ENABLE_CUDA=ON "$@" >/dev/null
cmake --build build -j "$jobs"
