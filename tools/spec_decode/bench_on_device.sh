#!/usr/bin/env bash
# Speculative decoding on the GPU machine, in one call: builds hyllm and the
# op harness with CUDA, checks the speculative GDN state ops against the CPU
# reference, then times `hyllm bench latency` with dummy weights (whose MTP
# head is random, so almost every draft is rejected: each step emits one
# token and pays the verify step plus the draft passes) for k = 0..4 at batch
# 1, 8 and 32 on the 27B and 35B-A3B configs, and prints a table last: the
# per-token time of each k relative to k = 0, i.e. the cost of a verify step,
# and the TPOT it implies at draft acceptance rates 0.6 / 0.8 / 0.9 (a step
# of cost c emits (1 - a^(k+1)) / (1 - a) tokens on average when each draft is
# accepted with probability a).
#
#   tools/spec_decode/bench_on_device.sh      (OUT: where logs go; default /tmp/hyllm-spec-out)
#   HYLLM_SPEC_MODELS="qwen3_5_27b" HYLLM_SPEC_BATCHES="1 8" HYLLM_SPEC_KS="0 2" ... to narrow it
#   HYLLM_BIN=path/to/hyllm      a binary built elsewhere (no build, no op checks)
#   HYLLM_SPEC_ITERS=3           timed iterations per point
#   HYLLM_SPEC_INPUT_LEN=256 HYLLM_SPEC_OUTPUT_LEN=64   prompt and output tokens per sequence
#
# Uses the dependency archive of tools/cuda/run_device_checks.sh when present.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/hyllm-spec-out}
mkdir -p "$OUT"
BUILD=${HYLLM_BUILD_DIR:-$ROOT/build-cuda}
MODELS=${HYLLM_SPEC_MODELS:-"qwen3_5_27b qwen3_5_35b_a3b"}
BATCHES=${HYLLM_SPEC_BATCHES:-"1 8 32"}
KS=${HYLLM_SPEC_KS:-"0 1 2 3 4"}
source "$ROOT/tools/cuda/host_deps_env.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
BIN=${HYLLM_BIN:-$BUILD/hyllm}
ops_rc="not run (HYLLM_BIN given)"
if [[ -z ${HYLLM_BIN:-} ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1 &&
    cmake --build "$BUILD" -j "${HYLLM_JOBS:-16}" --target hyllm test_cuda_ops >"$OUT/build.log" 2>&1 ||
    { tail -30 "$OUT/build.log"; echo "build failed"; exit 1; }
  "$BUILD/tests/cuda/test_cuda_ops" --gtest_filter='*Speculative*:*GdnConv*:*DeltaRule*' >"$OUT/ops.log" 2>&1
  ops_rc=$?
  tail -3 "$OUT/ops.log"
fi

rows=()
for model in $MODELS; do
  for b in $BATCHES; do
    base=""
    for k in $KS; do
      spec=()
      [[ $k -gt 0 ]] && spec=(--speculative-config "{\"method\": \"mtp\", \"num_speculative_tokens\": $k}")
      log="$OUT/latency_${model}_b${b}_k${k}.log"
      "$BIN" bench latency --model "tests/data/configs/$model" --load-format dummy \
        --input-len ${HYLLM_SPEC_INPUT_LEN:-256} --output-len ${HYLLM_SPEC_OUTPUT_LEN:-64} --batch-size "$b" --num-iters-warmup 1 --num-iters "${HYLLM_SPEC_ITERS:-3}" \
        --max-model-len 4096 --max-num-seqs "$(( b > 8 ? b : 8 ))" --output-json "$log.json" "${spec[@]}" >"$log" 2>&1
      # Per-token decode time in ms: (batch latency - prefill) / (output tokens - 1).
      t=$(python3 -c "import json; j=json.load(open('$log.json')); print('%.3f' % ((1e3*j['avg_latency'] - j['prefill_ms_median']) / (j['output_len'] - 1)))" 2>/dev/null || echo "?")
      [[ $k -eq 0 ]] && base=$t
      # The runner's split of a generation step: target (verify) and MTP drafts.
      split=$(python3 -c "import json; j=json.load(open('$log.json')); print('%.3f %.3f' % (j['executor_target_ms_mean'], j['executor_draft_ms_mean']))" 2>/dev/null || echo "? ?")
      rows+=("$model b=$b k=$k per-token ${t} ms base ${base} ms $split")
    done
  done
done

echo
echo "== speculative decoding (dummy weights: drafts rejected; ops harness rc=$ops_rc)"
printf '%-18s %5s %3s %10s %8s %22s %9s %9s %10s\n' model batch k "ms/token" "x plain" "TPOT ms at a=.6/.8/.9" \
  "verify ms" "draft ms" "verify/k=0"
declare -A verify0
for r in "${rows[@]}"; do
  read -r model b k _ t _ _ base _ verify draft <<<"$r"
  [[ $k == k=0 ]] && verify0[$model$b]=$verify
  python3 - "$model" "$b" "$k" "$t" "$base" "$verify" "$draft" "${verify0[$model$b]:-?}" <<'PY'
import sys
model, b, k, t, base = sys.argv[1], sys.argv[2][2:], int(sys.argv[3][2:]), sys.argv[4], sys.argv[5]
verify, draft, verify0 = sys.argv[6], sys.argv[7], sys.argv[8]
try:
    ratio = '%.2f' % (float(verify) / float(verify0))
except ValueError:
    ratio = '?'
try:
    t, base = float(t), float(base)
except ValueError:
    print(f"{model:18s} {b:>5s} {k:3d} {'?':>10s}"); sys.exit()
tpot = []
for a in (0.6, 0.8, 0.9):
    tokens = (1 - a ** (k + 1)) / (1 - a) if k else 1.0
    tpot.append(t / tokens)
print(f"{model:18s} {b:>5s} {k:3d} {t:10.3f} {t / base:8.2f} {'/'.join('%.2f' % x for x in tpot):>22s} "
      f"{verify:>9s} {draft:>9s} {ratio:>10s}")
PY
done
