#!/usr/bin/env bash
# Builds of the grouped FP8 expert GEMMs (moe_grouped_fp8.cu) side by side on
# the GPU machine in one device call, from a bundle of
# tools/cuda/pack_serve_bundle.sh unpacked at /tmp/sb whose bin/ holds
# test_cuda_ops and hyllm builds named hyllm_<name> (tools/cuda/build_variants.sh:
# main and a variant of the kernel, say). Stages:
#  ops  the MoE op cases (every grouped FP8 case) of bin/test_cuda_ops against the CPU
#       reference, or of bin/test_cuda_ops_<name> for each build HYLLM_FORMS_OPS names
#       (tools/cuda/build_variants.sh with tests/cuda/test_cuda_ops among its targets);
#       HYLLM_FORMS_OPS_FILTER widens or narrows the cases;
#  golden  the CUDA model goldens of bin/test_golden_cuda (the bundle's own build);
#  ncu  layer 0's gate_up and down launches of a prefill under Nsight Compute
#       (35B-A3B FP8 cut to 4 layers), one line per kernel: duration, DRAM
#       throughput, IPC and the main stall reasons per issued instruction;
#  ab   35B-A3B FP8 prefill end to end (tools/cuda/ab_latency.sh, steps of up
#       to 8,192 tokens as the server takes them on an H100/H200);
#  decode  35B-A3B FP8 decode steps of the same builds (ab_latency.sh's decode metric), at the
#       batches of HYLLM_FORMS_BATCHES.
# Every stage has a time limit, so that the call ends inside the device's
# 600 s, and prints as it goes; logs go to $OUT.
#
#   HYLLM_FORMS_BINS="base main"            builds for the ab stage
#   HYLLM_FORMS_NCU="base:1024 main:1024"   build:tokens pairs for the ncu stage
#   HYLLM_FORMS_TOKENS="1024 4096"          prompt lengths for the ab stage
#   HYLLM_FORMS_OPS="pipe"                  builds whose own test_cuda_ops_<name> the ops stage runs
#                                           (unset: bin/test_cuda_ops)
#   HYLLM_FORMS_OPS_FILTER='*Moe*'          the ops stage's gtest filter
#   HYLLM_FORMS_BATCHES="1 32"              batches for the decode stage
#   HYLLM_FORMS_STAGES="ops ncu ab"
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-/tmp/hyllm-moe-forms}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/tmp/sb/lib:${LD_LIBRARY_PATH:-/usr/local/cuda/lib64}
B=/tmp/sb/bin
STAGES=${HYLLM_FORMS_STAGES:-ops ncu ab}
BINS=${HYLLM_FORMS_BINS:-base main}
NCU_CASES=${HYLLM_FORMS_NCU:-base:1024 main:1024}
TOKENS=${HYLLM_FORMS_TOKENS:-1024 4096}
OPS=${HYLLM_FORMS_OPS:-}
OPS_FILTER=${HYLLM_FORMS_OPS_FILTER:-*Moe*}
BATCHES=${HYLLM_FORMS_BATCHES:-1 32}
has() { [[ " $STAGES " == *" $1 "* ]]; }
# Runs a gtest binary into a log and prints its summary and failures.
gtest_stage() {  # label limit_s log binary [args...]
  local label=$1 limit=$2 log=$3 t rc
  shift 3
  t=$(date +%s)
  timeout "$limit" "$@" > "$log" 2>&1
  rc=$?
  echo "$label rc=$rc in $(( $(date +%s) - t )) s: $(grep -E '^\[  (PASSED|FAILED)' "$log" | tr '\n' ' ')"
  [[ $rc == 124 ]] && echo "  timed out in: $(grep -E '^\[ RUN' "$log" | tail -1)"
  grep -E '^\[  FAILED|  FAIL' "$log" | head -12
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader

if has ops; then
  builds=($OPS)
  [[ ${#builds[@]} -gt 0 ]] || builds=("")  # bin/test_cuda_ops
  for v in "${builds[@]}"; do
    gtest_stage "moe ops ${v:-}" 240 "$OUT/moe_ops${v:+_$v}.log" "$B/test_cuda_ops${v:+_$v}" \
      --gtest_filter="$OPS_FILTER"
  done
fi

if has golden; then
  gtest_stage goldens 120 "$OUT/golden.log" "$B/test_golden_cuda"
fi

if has ncu; then
  M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__inst_executed.avg.per_cycle_active
  for r in long_scoreboard wait barrier lg_throttle; do M+=",smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
  for c in $NCU_CASES; do
    v=${c%%:*} n=${c#*:}
    A="--input-len $n --output-len 2 --batch-size 1 --max-model-len $((2 * n)) --max-num-batched-tokens 8192"
    A+=" --num-iters-warmup 1 --num-iters 1 --enforce-eager --gpu-memory-utilization 0.3"
    echo "== ncu $v, $n tokens"
    # The memory-profiling step and the warm-up come first: 8 launches each.
    OUT=$OUT/ncu_${v}_$n HYLLM_NCU_SKIP=8 HYLLM_NCU_HYLLM=$B/hyllm_$v HYLLM_NCU_WHAT="--metrics $M" timeout 90 \
      tools/cuda/ncu_detail.sh qwen3_5_35b_a3b_fp8 grouped_fp8 2 -- $A | grep -v '^ncu rc=0' \
      | sed -E 's/ +/ /g; s/^ void [^ ]*grouped_fp8_kernel/K/; s/\(CUtensorMap_st.*//;
                s/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio inst//;
                s/dram__throughput.avg.pct_of_peak_sustained_elapsed %/dram %/; s/gpu__time_duration.sum/time/;
                s/sm__inst_executed.avg.per_cycle_active inst.cycle/ipc/' \
      | tr '\n' ' ' | sed 's/ K</\nK</g'
    echo
  done
fi

# The ab and decode stages' builds, as ab_latency.sh names them.
ab_bins=()
for v in $BINS; do ab_bins+=("$v=$B/hyllm_$v"); done

if has ab; then
  cases=()
  for n in $TOKENS; do cases+=("qwen3_5_35b_a3b_fp8:$n:1:$((2 * n))"); done
  OUT=$OUT/ab HYLLM_AB_BINS="${ab_bins[*]}" HYLLM_AB_METRIC=prefill HYLLM_AB_OUTPUT_LEN=2 HYLLM_AB_ITERS=5 \
    HYLLM_AB_ARGS="--enforce-eager --max-num-batched-tokens 8192" HYLLM_AB_CASES="${cases[*]}" \
    timeout "${HYLLM_FORMS_AB_LIMIT:-300}" tools/cuda/ab_latency.sh > "$OUT/ab.log" 2>&1
  echo "ab rc=$?"
  grep -E '^\|' "$OUT/ab.log" || tail -5 "$OUT/ab.log"
fi

if has decode; then
  cases=()
  for b in $BATCHES; do cases+=("qwen3_5_35b_a3b_fp8:128:$b:1024"); done
  OUT=$OUT/decode HYLLM_AB_BINS="${ab_bins[*]}" HYLLM_AB_CASES="${cases[*]}" \
    timeout "${HYLLM_FORMS_DECODE_LIMIT:-240}" tools/cuda/ab_latency.sh > "$OUT/decode.log" 2>&1
  echo "decode rc=$?"
  grep -E '^\|' "$OUT/decode.log" || tail -5 "$OUT/decode.log"
fi
