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
# Printed reports are split (sanitize_classify.awk) into hyllm's own and those
# inside NVIDIA's libraries (racecheck's hazards within cuBLASLt's kernels,
# NCCL's probing API errors): a run is clean when hyllm's code has none.
# Logs go to $OUT (or /tmp/hyllm-sanitize-out), and all of them into $OUT/logs.tar.xz.
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
#   HYLLM_OPS_SHARDS=N                              every one of the N shards, each a run of its own
#   HYLLM_SANITIZE_JOBS=J                           J runs at once (default 1). The tools' time goes
#                                                   mostly to host work (patching and checking each
#                                                   launch), which one process does on one core, so
#                                                   runs side by side on the one GPU finish sooner
#   HYLLM_SANITIZE_RUNS="op_harness model_parity"   which of the two runs (default both)
# The machine's 10-minute limit per command can call for two calls, e.g.
# HYLLM_SANITIZE_TOOLS="memcheck initcheck" then "racecheck synccheck", or
# one call with HYLLM_OPS_SHARDS and HYLLM_SANITIZE_JOBS.
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
SHARDS=${HYLLM_OPS_SHARDS:-}
if [[ -n "$SHARDS" && ! "$SHARDS" =~ ^[1-9][0-9]*$ ]]; then
  echo "HYLLM_OPS_SHARDS must be a count, e.g. 4" >&2
  exit 2
fi
JOBS=${HYLLM_SANITIZE_JOBS:-1}
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "HYLLM_SANITIZE_JOBS must be a count" >&2; exit 2; }
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

ROWS=$OUT/rows
rm -rf "$ROWS"
mkdir -p "$ROWS"
# check NAME BINARY FILTER TOOL [SHARD I/N]: one run; its table row goes to
# $ROWS (runs may go side by side), "failed" to its .failed file.
check() {
  local name=$1 bin=$2 filter=$3 tool=$4 shard=${5:-}
  local log=$OUT/${name}_$tool.log
  local extra=()
  case $tool in
    memcheck) extra=(--leak-check full) ;;
  esac
  local shard_env=()
  if [[ -n "$shard" ]]; then
    shard_env=(GTEST_SHARD_INDEX="${shard%/*}" GTEST_TOTAL_SHARDS="${shard#*/}")
    name="op_harness_shard_${shard%/*}_of_${shard#*/}"
    log=$OUT/${name}_$tool.log
  fi
  local row=$ROWS/${name}_$tool
  [[ -x "$bin" ]] || { echo "| $name | $tool | - | - | - | binary missing |" > "$row.row"; touch "$row.failed"; return; }
  local start=$SECONDS
  # --nvtx true: the GEMM wrapper marks cuBLASLt's outputs initialized through
  # NVTX (sanitizer_marks.h), writes initcheck cannot see; harmless elsewhere.
  env "${shard_env[@]}" timeout "$LIMIT" "$SANITIZER" --tool "$tool" --nvtx true "${extra[@]}" --error-exitcode 99 \
    --print-limit 2000 \
    --log-file "$log" "$bin" --gtest_filter="$filter" --gtest_brief=1 > "$OUT/${name}_${tool}_test.log" 2>&1
  local rc=$?
  local secs=$((SECONDS - start))
  local errors
  errors=$(grep -oE "ERROR SUMMARY: [0-9]+" "$log" 2>/dev/null | awk '{s += $3} END {print s + 0}')
  local hazards
  hazards=$(grep -oE "RACECHECK SUMMARY: [0-9]+ hazards?" "$log" 2>/dev/null | awk '{s += $3} END {print s + 0}')
  # Reports inside NVIDIA's libraries are counted apart: hyllm cannot fix
  # them, and they must not hide one of its own.
  local own lib printed
  read -r own lib printed < <(awk -f "$ROOT/tools/cuda/sanitize_classify.awk" "$log" 2>/dev/null || echo "0 0 0")
  local reported=$((errors > hazards ? errors : hazards))
  local result=clean
  if ((rc == 124)); then
    result="timed out after $LIMIT s"
  elif grep -qE "^\[  FAILED  \]" "$OUT/${name}_${tool}_test.log"; then
    result="test FAILED (see ${name}_${tool}_test.log)"
  elif ((own > 0 || (reported > 0 && printed == 0))); then
    result="REPORTS in hyllm's code (see ${name}_$tool.log)"
  elif ((rc != 0 && rc != 99)); then
    result="test FAILED (rc $rc, see ${name}_${tool}_test.log)"
  elif ((lib > 0)); then
    result="clean in hyllm's code; $lib printed reports inside NVIDIA's libraries"
    # Past the print limit the reports are counted, not classified.
    ((printed < reported)) && result="$result, $((reported - printed)) more not printed: unclassified" &&
      touch "$row.failed"
  fi
  [[ $result == clean* ]] || touch "$row.failed"
  local tests
  tests=$(grep -oE "\[  PASSED  \] [0-9]+ tests?" "$OUT/${name}_${tool}_test.log" | grep -oE "[0-9]+" | head -1)
  echo "| $name | $tool | ${tests:-0} | $errors errors${hazards:+, $hazards hazards} | $secs s | $result |" > "$row.row"
  echo "== $name $tool: $result ($secs s)"
}

# Every run as "tool run [shard]", tool by tool in the order of
# HYLLM_SANITIZE_TOOLS (name the slowest first: racecheck, whose checks of
# cuBLASLt's kernels make it the longest), the parity run before the shards.
plan=()
for tool in $TOOLS; do
  [[ " $RUNS " == *" model_parity "* ]] && plan+=("$tool model_parity")
  if [[ " $RUNS " == *" op_harness "* ]]; then
    if [[ -n "$SHARDS" ]]; then
      for ((i = 0; i < SHARDS; ++i)); do plan+=("$tool op_harness $i/$SHARDS"); done
    else
      plan+=("$tool op_harness $SHARD")
    fi
  fi
done
for item in "${plan[@]}"; do
  read -r tool run shard <<< "$item"
  while (($(jobs -rp | wc -l) >= JOBS)); do wait -n; done
  if [[ $run == op_harness ]]; then
    check op_harness "$OPS_BIN" "$OPS_FILTER" "$tool" "$shard" &
  else
    check model_parity "$PARITY_BIN" "$PARITY_FILTER" "$tool" &
  fi
done
wait
failed=0
compgen -G "$ROWS/*.failed" > /dev/null && failed=1

echo
echo "================ compute-sanitizer ================"
cat "$OUT/gpu.txt"
echo "| run | tool | tests passed | reports | time | result |"
echo "|---|---|---:|---|---:|---|"
cat "$ROWS"/*.row | tee "$OUT/table.md"
for log in "$OUT"/*_{memcheck,racecheck,initcheck,synccheck}.log; do
  [[ -f "$log" ]] || continue
  if grep -qE "^========= (Invalid|Uninitialized|Race|Barrier|Leaked|Program hit|Error)" "$log"; then
    echo "--- first reports in $(basename "$log"):"
    grep -E "^=========" "$log" | head -30
  fi
done
# Every log in one archive, for callers that bring back only a few files.
tar -C "$OUT" -cJf "$OUT/logs.tar.xz" --exclude logs.tar.xz --exclude rows . 2>/dev/null
exit $failed
