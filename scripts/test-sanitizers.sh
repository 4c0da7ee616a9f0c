#!/usr/bin/env bash
# The unit and end-to-end tests again, on a build with AddressSanitizer and
# UndefinedBehaviorSanitizer (clang, CPU backend only, in build-san/), then a
# short run of every libFuzzer target (tests/fuzz) on its seed corpus.
# Any sanitizer report fails the run, including one from a `hyllm serve` that
# an e2e test started: reports go to build-san/sanitizer-reports/ and are
# printed at the end.
#
#   bash scripts/test-sanitizers.sh                 # unit + e2e + fuzz tests on the sanitizer build
#   bash scripts/test-sanitizers.sh --fuzz-only     # what scripts/test.sh runs: the fuzz targets only
#   HYLLM_FUZZ_SECONDS=600 bash scripts/test-sanitizers.sh   # longer fuzzing
#   bash scripts/test-sanitizers.sh -DCMAKE_CXX_COMPILER_LAUNCHER=ccache   # extra cmake args
set -euo pipefail
cd "$(dirname "$0")/.."
labels='unit|e2e|fuzz'
targets=()
if [[ ${1:-} == --fuzz-only ]]; then
  shift
  labels=fuzz
  for f in tests/fuzz/fuzz_*.cpp; do targets+=(--target "$(basename "$f" .cpp)"); done
fi
bash scripts/install-deps.sh
bash scripts/npm-deps.sh

jobs=${HYLLM_BUILD_JOBS:-$(nproc)}
build=build-san
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_C_FLAGS_DEBUG=-O1 -DCMAKE_CXX_FLAGS_DEBUG=-O1 \
  -DHYLLM_FUZZ=ON -DHYLLM_BUILD_BENCHMARKS=OFF \
  -DHYLLM_FUZZ_SECONDS="${HYLLM_FUZZ_SECONDS:-15}" "$@" >/dev/null
cmake --build "$build" -j "$jobs" "${targets[@]}"

reports=$PWD/$build/sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"
export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:check_initialization_order=1"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="log_path=$reports/lsan"

status=0
(cd "$build" && ctest --output-on-failure -j "${HYLLM_TEST_JOBS:-$(nproc)}" --timeout 1800 -L "$labels") || status=$?

if compgen -G "$reports/*" >/dev/null; then
  echo "=== sanitizer reports ==="
  for f in "$reports"/*; do
    echo "--- $f"
    head -c 20000 "$f"
  done
  status=1
fi
exit "$status"
