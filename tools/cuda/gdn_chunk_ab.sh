#!/usr/bin/env bash
# Two hyllm builds' GDN chunk kernels side by side on the GPU machine, in one
# call: the new build's delta-rule op cases (fresh seeds, repeated) and model
# goldens, then every launch of chunk_prepare / chunk_state in one prefill
# under Nsight Compute (gpu__time_duration, mean per kernel and grid; ncu's
# default clock control, so these compare builds with each other only), then
# the prefill end to end (tools/cuda/ab_latency.sh). Builds come from
# tools/cuda/build_variants.sh and travel in tools/cuda/pack_serve_bundle.sh's
# archive; a short table per stage.
#
#   HYLLM_GDN_BASE=/tmp/sb/bin/hyllm_base HYLLM_GDN_NEW=/tmp/sb/bin/hyllm_new tools/cuda/gdn_chunk_ab.sh
#   HYLLM_GDN_OPS=path/to/test_cuda_ops      the new build's op harness (stage skipped if unset)
#   HYLLM_GDN_GOLDEN=path/to/test_golden_cuda   its model goldens (stage skipped if unset)
#   HYLLM_GDN_REPEAT=3                       repetitions of the op cases
#   HYLLM_GDN_PROFILE="qwen3_5_27b_fp8:1 qwen3_5_35b_a3b_fp8:8"   config:batch of the ncu stage
#       (1,024-token prompts; 27B at one prompt runs chunk_state<128, 32>, 35B-A3B at eight <128, 64>)
#   HYLLM_GDN_CASES="..."                    ab_latency cases (CONFIG:INPUT:BATCH:MAX_MODEL_LEN)
# Logs go to $OUT (default /tmp/hyllm-gdn-ab).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-/tmp/hyllm-gdn-ab}
mkdir -p "$OUT"
BASE=${HYLLM_GDN_BASE:?HYLLM_GDN_BASE=path/to/hyllm is required}
NEW=${HYLLM_GDN_NEW:?HYLLM_GDN_NEW=path/to/hyllm is required}
PROFILE=${HYLLM_GDN_PROFILE:-qwen3_5_27b_fp8:1 qwen3_5_35b_a3b_fp8:8}
CASES=${HYLLM_GDN_CASES:-qwen3_5_27b_fp8:1024:1:2048 qwen3_5_27b_fp8:1024:8:2048 qwen3_5_35b_a3b_fp8:1024:1:2048 qwen3_5_35b_a3b_fp8:1024:8:2048}
NCU=${HYLLM_NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)}

if [[ -n ${HYLLM_GDN_GOLDEN:-} ]]; then
  echo "== model goldens (new)"
  timeout 180 "$HYLLM_GDN_GOLDEN" --gtest_brief=1 > "$OUT/golden.log" 2>&1
  echo "rc=$?"; grep -E '^\[  (PASSED|FAILED)' "$OUT/golden.log"
fi

if [[ -n ${HYLLM_GDN_OPS:-} ]]; then
  echo "== delta-rule op cases (new), ${HYLLM_GDN_REPEAT:-3} repetitions of fresh seeds"
  timeout 300 "$HYLLM_GDN_OPS" --gtest_filter='*DeltaRule*:*PrefixCacheState*:*SpeculativeStates*:*Gdn*' \
    --gtest_repeat="${HYLLM_GDN_REPEAT:-3}" --gtest_brief=1 > "$OUT/ops.log" 2>&1
  echo "rc=$?"
  grep -E '^\[  (PASSED|FAILED)' "$OUT/ops.log" | sort | uniq -c
  # The error table: each check's largest error over the repetitions, beside its tolerance.
  grep -E '^(decode save |save |spec |select_state |)(gated_delta_rule|gdn_conv|select_state)' "$OUT/ops.log" | sort -u
  grep -B3 -A12 'Failure' "$OUT/ops.log" | head -60
fi

# Mean duration per chunk kernel and grid in one prefill of `batch` prompts of 1,024 tokens.
chunk_kernels() {  # bin config batch
  local bin=$1 cfg=$2 b=$3 n=1024
  timeout 240 "$NCU" --kernel-name regex:'chunk_(state|prepare)' --launch-count 400 \
    --metrics gpu__time_duration.sum --print-units base --csv \
    "$bin" bench latency --model "tests/data/configs/$cfg" --load-format dummy --input-len "$n" --output-len 2 \
    --batch-size "$b" --max-num-seqs "$b" --max-num-batched-tokens $((n * b)) --max-model-len $((n + 64)) \
    --num-iters-warmup 0 --num-iters 1 --enforce-eager 2>/dev/null |
    awk -F'","' '/chunk_/ && /gpu__time_duration/ { if (!match($5, /chunk_[a-z]+_kernel<[^>]*>/)) next;
        key = substr($5, RSTART, RLENGTH) " grid " $9; v = $NF; gsub(/[",]/, "", v); n[key]++; s[key] += v }
      END { for (k in n) printf "  %-50s launches %4d  mean %9.1f us\n", k, n[k], s[k] / n[k] / 1000 }' | sort
}
if [[ -x $NCU ]]; then
  for cb in $PROFILE; do
    for side in base new; do
      bin=$BASE; [[ $side == new ]] && bin=$NEW
      echo "== ncu ${cb%%:*} x ${cb##*:} prompts, $side"
      chunk_kernels "$bin" "${cb%%:*}" "${cb##*:}"
    done
  done
else
  echo "gdn_chunk_ab: no ncu, kernel stage skipped"
fi

echo "== prefill end to end"
OUT=$OUT/ab HYLLM_AB_BINS="base=$BASE new=$NEW" HYLLM_AB_METRIC=prefill HYLLM_AB_OUTPUT_LEN=2 HYLLM_AB_ITERS=5 \
  HYLLM_AB_ARGS="--enforce-eager --max-num-batched-tokens 8192" HYLLM_AB_CASES="$CASES" \
  timeout 400 tools/cuda/ab_latency.sh 2>&1 | tail -n "$(( $(wc -w <<< "$CASES") + 3 ))"
