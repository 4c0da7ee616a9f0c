#!/usr/bin/env bash
# compute-sanitizer over the CUDA op harness (tests/cuda: every CUDA op
# against the CPU reference) and one model-parity run (tests/golden_cuda:
# the tiny models' greedy tokens against their HF goldens and the CPU,
# through the real ModelRunner with the GPU sampler and decode graphs), with
#   memcheck   out-of-bounds and misaligned device accesses, device leaks
#   racecheck  shared-memory data hazards
#   initcheck  reads of device memory nothing wrote
#   synccheck  barriers used wrongly (divergent __syncthreads and the like)
# Prints a table last: errors per binary and tool, and the first reports.
# Logs go to $OUT (or /tmp/hyllm-sanitize-out).
#
#   tools/cuda/sanitize.sh                          build here (build-cuda), then check
#   HYLLM_PREBUILT=DIR tools/cuda/sanitize.sh       DIR/test_cuda_ops and DIR/test_golden_cuda,
#                                                   built on the Debian machine (as run_device_checks.sh)
#   HYLLM_SANITIZE_TOOLS="memcheck initcheck"       a subset (default: all four)
#   HYLLM_OPS_FILTER='*DeltaRule*'                  gtest filter for the op harness (default: all)
#   HYLLM_PARITY_FILTER='...'                       gtest filter for the parity run (default: greedy
#                                                   tokens of every tiny model)
#   HYLLM_SANITIZE_TIMEOUT=480                      seconds per (binary, tool) run
#   HYLLM_OPS_SHARD=I/N                             the op harness's shard I of N (gtest sharding),
#                                                   for tools too slow for the whole harness in one
#                                                   call: run I = 0 .. N-1 in N calls
#   HYLLM_SANITIZE_RUNS="op_harness model_parity"   which of the two runs (default both)
# The machine's 10-minute limit per command can call for two calls, e.g.
# HYLLM_SANITIZE_TOOLS="memcheck initcheck" then "racecheck synccheck".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/hyllm-sanitize-out}
mkdir -p "$OUT"
BUILD=${HYLLM_BUILD_DIR:-$ROOT/build-cuda}
TOOLS=${HYLLM_SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}
OPS_FILTER=${HYLLM_OPS_FILTER:-*}
PARITY_FILTER=${HYLLM_PARITY_FILTER:-*CudaParity.GreedyTokensMatchGoldenAndCpu*}
LIMIT=${HYLLM_SANITIZE_TIMEOUT:-480}
RUNS=${HYLLM_SANITIZE_RUNS:-op_harness model_parity}
SHARD=${HYLLM_OPS_SHARD:-}
if [[ -n "$SHARD" && ! "$SHARD" =~ ^[0-9]+/[1-9][0-9]*$ ]]; then
  echo "HYLLM_OPS_SHARD must be I/N, e.g. 0/4" >&2
  exit 2
fi
SANITIZER=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}

source "$ROOT/tools/cuda/host_deps_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
"$SANITIZER" --version | tail -1 | tee -a "$OUT/gpu.txt"

if [[ -n "${HYLLM_PREBUILT:-}" ]]; then
  OPS_BIN=$HYLLM_PREBUILT/test_cuda_ops
  PARITY_BIN=$HYLLM_PREBUILT/test_golden_cuda
else
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHYLLM_ENABLE_CUDA=ON \
    -DHYLLM_BUILD_BENCHMARKS=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > "$OUT/build.log" 2>&1 &&
    cmake --build "$BUILD" -j"${HYLLM_JOBS:-16}" --target test_cuda_ops test_golden_cuda >> "$OUT/build.log" 2>&1 ||
    { echo "build FAILED:"; tail -30 "$OUT/build.log"; exit 1; }
  OPS_BIN=$BUILD/tests/cuda/test_cuda_ops
  PARITY_BIN=$BUILD/tests/golden_cuda/test_golden_cuda
fi

rows=()
failed=0
# check NAME BINARY FILTER TOOL
check() {
  local name=$1 bin=$2 filter=$3 tool=$4
  local log=$OUT/${name}_$tool.log
  local extra=()
  case $tool in
    memcheck) extra=(--leak-check full) ;;
  esac
  [[ -x "$bin" ]] || { rows+=("| $name | $tool | - | - | binary missing |"); failed=1; return; }
  local shard_env=()
  if [[ $name == op_harness && -n "$SHARD" ]]; then
    shard_env=(GTEST_SHARD_INDEX="${SHARD%/*}" GTEST_TOTAL_SHARDS="${SHARD#*/}")
    name="op_harness_shard_${SHARD%/*}_of_${SHARD#*/}"
    log=$OUT/${name}_$tool.log
  fi
  local start=$SECONDS
  env "${shard_env[@]}" timeout "$LIMIT" "$SANITIZER" --tool "$tool" "${extra[@]}" --error-exitcode 99 --print-limit 50 \
    --log-file "$log" "$bin" --gtest_filter="$filter" --gtest_brief=1 > "$OUT/${name}_${tool}_test.log" 2>&1
  local rc=$?
  local secs=$((SECONDS - start))
  local errors
  errors=$(grep -oE "ERROR SUMMARY: [0-9]+" "$log" 2>/dev/null | awk '{s += $3} END {print s + 0}')
  local hazards
  hazards=$(grep -oE "RACECHECK SUMMARY: [0-9]+ hazards?" "$log" 2>/dev/null | awk '{s += $3} END {print s + 0}')
  local result=clean
  if ((rc == 124)); then
    result="timed out after $LIMIT s"
    failed=1
  elif ((rc == 99 || errors > 0 || hazards > 0)); then
    result="REPORTS (see ${name}_$tool.log)"
    failed=1
  elif ((rc != 0)); then
    result="test FAILED (rc $rc, see ${name}_${tool}_test.log)"
    failed=1
  fi
  local tests
  tests=$(grep -oE "\[  PASSED  \] [0-9]+ tests?" "$OUT/${name}_${tool}_test.log" | grep -oE "[0-9]+" | head -1)
  rows+=("| $name | $tool | ${tests:-0} | $errors errors${hazards:+, $hazards hazards} | $secs s | $result |")
  echo "== $name $tool: $result ($secs s)"
}

for tool in $TOOLS; do
  [[ " $RUNS " == *" op_harness "* ]] && check op_harness "$OPS_BIN" "$OPS_FILTER" "$tool"
  [[ " $RUNS " == *" model_parity "* ]] && check model_parity "$PARITY_BIN" "$PARITY_FILTER" "$tool"
done

echo
echo "================ compute-sanitizer ================"
cat "$OUT/gpu.txt"
echo "| run | tool | tests passed | reports | time | result |"
echo "|---|---|---:|---|---:|---|"
for r in "${rows[@]}"; do echo "$r"; done | tee "$OUT/table.md"
for log in "$OUT"/*_{memcheck,racecheck,initcheck,synccheck}.log; do
  [[ -f "$log" ]] || continue
  if grep -qE "^========= (Invalid|Uninitialized|Race|Barrier|Leaked|Program hit|Error)" "$log"; then
    echo "--- first reports in $(basename "$log"):"
    grep -E "^=========" "$log" | head -30
  fi
done
exit $failed
