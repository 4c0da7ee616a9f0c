#!/usr/bin/env bash
# The GPU machine's one script for the CUDA backend: builds the CUDA targets,
# runs the op harness (every CUDA op against the CPU reference), model parity
# when its test exists, and the real-scale step benchmarks; prints a short
# table last. Logs go to $OUT (or /tmp/hyllm-device-out).
#
#   tools/cuda/run_device_checks.sh            build here, then run everything
#   HYLLM_PREBUILT=DIR tools/cuda/...          run binaries built elsewhere
#                                              (DIR/test_cuda_ops, DIR/bench_cuda_step),
#                                              building here in the background only to
#                                              check that the build works
#
# The image has nvcc, CMake and ninja but not every Debian -dev package the
# build needs: tools/cuda/pack_host_deps.sh packs them into
# .carry/cuda/deps.tar.xz, unpacked here at /tmp/hyllm-deps.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/hyllm-device-out}
mkdir -p "$OUT"
DEPS_ARCHIVE=${HYLLM_DEPS_ARCHIVE:-$ROOT/.carry/cuda/deps.tar.xz}
BUILD=${HYLLM_BUILD_DIR:-$ROOT/build-cuda}
JOBS=${HYLLM_JOBS:-16}
summary=()
note() { summary+=("$1"); echo "== $1"; }

if [[ -f "$DEPS_ARCHIVE" ]]; then
  D=/tmp/hyllm-deps
  [[ -d $D/usr ]] || { mkdir -p $D && tar -xJf "$DEPS_ARCHIVE" -C $D; }
  export PKG_CONFIG=$D/usr/bin/pkgconf
  export PKG_CONFIG_LIBDIR=$D/usr/lib/x86_64-linux-gnu/pkgconfig:$D/usr/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig:$D/usr/share/pkgconfig
  export LD_LIBRARY_PATH=$D/usr/lib/x86_64-linux-gnu:$D/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  export CMAKE_PREFIX_PATH=$D/usr
  export CMAKE_POLICY_VERSION_MINIMUM=3.5
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

build() {
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHYLLM_ENABLE_CUDA=ON \
    -DHYLLM_BUILD_BENCHMARKS=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc &&
    cmake --build "$BUILD" -j"$JOBS" --target test_cuda_ops bench_cuda_step
}

if [[ -n "${HYLLM_PREBUILT:-}" ]]; then
  BIN=$HYLLM_PREBUILT
  (build > "$OUT/build.log" 2>&1; echo "rc=$?" >> "$OUT/build.log") &
  build_pid=$!
else
  start=$(date +%s)
  if build > "$OUT/build.log" 2>&1; then note "build: ok in $(( $(date +%s) - start )) s"; else
    note "build: FAILED (see build.log)"; tail -30 "$OUT/build.log"; exit 1; fi
  BIN=$BUILD/tests/cuda
fi

# 1. Op harness.
start=$(date +%s)
"$BIN/test_cuda_ops" --gtest_brief=1 > "$OUT/harness.log" 2>&1
rc=$?
note "op harness: $([[ $rc == 0 ]] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s ($(grep -c ' ok$' "$OUT/harness.log") outputs ok, $(grep -c 'FAIL$' "$OUT/harness.log") over threshold)"

if [[ -n "${HYLLM_PREBUILT:-}" ]]; then
  wait $build_pid
  note "device build (background): $(tail -1 "$OUT/build.log")"
fi

# 2. Model parity (tiny models and the default model against their goldens),
# when the golden harness exists in this tree.
PARITY=${HYLLM_PARITY_BIN:-$BUILD/tests/golden_cuda/test_golden_cuda}
if [[ -z "${HYLLM_PARITY_BIN:-}" && -f tests/golden/harness.h ]]; then
  cmake --build "$BUILD" -j"$JOBS" --target test_golden_cuda > "$OUT/parity_build.log" 2>&1 ||
    note "model parity: build FAILED (see parity_build.log)"
fi
if [[ -x "$PARITY" ]]; then
  start=$(date +%s)
  "$PARITY" > "$OUT/parity.log" 2>&1 && note "model parity: passed in $(( $(date +%s) - start )) s" ||
    note "model parity: FAILED (see parity.log)"
  grep -E "^\[.*(greedy|teacher-forced)" "$OUT/parity.log" | sed 's/^/  /' | head -40 > "$OUT/parity_summary.txt"
else
  note "model parity: not run (no golden harness in this tree)"
fi

# 3. Real-scale steps (random weights, BF16).
for cfg in qwen3_5_27b qwen3_5_35b_a3b; do
  "$BIN/bench_cuda_step" "tests/data/configs/$cfg" --prefill 1024 --context 1024 --batches 1,8,32 --iters 20 \
    > "$OUT/bench_$cfg.log" 2>&1 || note "bench $cfg: FAILED"
done

echo
echo "================ summary ================"
cat "$OUT/gpu.txt"
for s in "${summary[@]}"; do echo "$s"; done
[[ -f "$OUT/parity_summary.txt" ]] && cat "$OUT/parity_summary.txt"
sed -n '/cuda op output/,$p' "$OUT/harness.log" | grep -E "cuda op output|FAIL|sampler|paged|delta|moe_experts|linear"
for cfg in qwen3_5_27b qwen3_5_35b_a3b; do cat "$OUT/bench_$cfg.log"; done
