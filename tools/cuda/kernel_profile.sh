#!/usr/bin/env bash
# Where a decode step's GPU time goes, per kernel, on the GPU machine.
# For each config it runs `hyllm bench latency` twice under Nsight Compute
# (ncu, one metric: gpu__time_duration; clocks and caches left alone), once
# with 2 and once with 2+S output tokens; the difference of the two runs'
# per-kernel totals is S decode steps exactly (loading, warm-up and prefill
# cancel), whatever the kernel names are. It also runs the same command without
# ncu for the real step time: the step time minus the kernels' sum is what the
# step spends outside kernels (launch gaps, host work, syncs).
# Prints one table per config (kernel, launches per step, us per step, share).
# HYLLM_PROFILE_PREFILL=N profiles prefill instead: `batch` prompts of N
# tokens in one step (and one decode step after it, the fewest bench latency
# takes), in one run with one timed iteration and one with two; the
# difference is one prefill step plus one decode step (new prompts each
# iteration, so no prefix-cache hit).
#
#   HYLLM_BIN=path/to/hyllm tools/cuda/kernel_profile.sh
#   HYLLM_PROFILE_CONFIGS="qwen3_5_27b_fp8:1 qwen3_5_35b_a3b:32"   config:batch pairs
#   HYLLM_PROFILE_STEPS=8    HYLLM_PROFILE_ARGS="..." extra bench latency flags
#   HYLLM_PROFILE_PREFILL=1024   a prefill step of batch x that many tokens instead of decode steps
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/hyllm-kernel-profile}
mkdir -p "$OUT"
BIN=${HYLLM_BIN:-$ROOT/build-cuda/hyllm}
CONFIGS=${HYLLM_PROFILE_CONFIGS:-qwen3_5_27b_fp8:1 qwen3_5_35b_a3b:1}
STEPS=${HYLLM_PROFILE_STEPS:-8}
EXTRA=${HYLLM_PROFILE_ARGS:-}
NCU=${HYLLM_NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)}
[[ -x "$NCU" ]] || { echo "kernel_profile: ncu not found" >&2; exit 1; }

latency() {  # config batch output_len [json]
  local cfg=$1 batch=$2 out_len=$3
  "$BIN" bench latency --model "tests/data/configs/$cfg" --load-format dummy --input-len 128 \
    --output-len "$out_len" --batch-size "$batch" --max-model-len 1024 --num-iters-warmup 1 \
    --num-iters "${4:-1}" $EXTRA ${5:+--output-json "$5"}
}

prefill_profile() {  # config batch
  local cfg=$1 b=$2 n=$PREFILL tag="${1}_prefill${PREFILL}x${2}"
  local common=(bench latency --model "tests/data/configs/$cfg" --load-format dummy --input-len "$n" --output-len 2
    --batch-size "$b" --max-num-seqs "$b" --max-num-batched-tokens $((n * b)) --max-model-len $((n + 64))
    --num-iters-warmup 0)
  for iters in 1 2; do
    "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum \
      -k 'regex:^(?!fill)' --csv --page raw --print-units base --log-file "$OUT/$tag.ncu$iters.csv" \
      "$BIN" "${common[@]}" --num-iters "$iters" $EXTRA > "$OUT/$tag.ncu$iters.log" 2>&1 \
      || { echo "$tag: ncu run with $iters iterations failed"; tail -5 "$OUT/$tag.ncu$iters.log"; }
  done
  python3 tools/cuda/kernel_profile_table.py --steps 1 --what "one prefill step of $b x $n tokens + one decode step" --title "$tag" \
    "$OUT/$tag.ncu1.csv" "$OUT/$tag.ncu2.csv" | tee "$OUT/$tag.table.txt"
}
PREFILL=${HYLLM_PROFILE_PREFILL:-0}

for pair in $CONFIGS; do
  cfg=${pair%%:*} batch=${pair##*:}
  tag="${cfg}_b${batch}"
  if [[ $PREFILL != 0 ]]; then
    prefill_profile "$cfg" "$batch"
    continue
  fi
  latency "$cfg" "$batch" 64 3 "$OUT/$tag.latency.json" > "$OUT/$tag.latency.log" 2>&1 \
    || { echo "$tag: bench latency failed"; tail -5 "$OUT/$tag.latency.log"; continue; }
  for n in 2 $((2 + STEPS)); do
    # The dummy weights' fill kernels (one per tensor: tens of thousands for a
    # model with per-expert tensors) are not profiled; each profiled launch
    # costs ncu milliseconds.
    "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum \
      -k 'regex:^(?!fill)' --csv --page raw --print-units base --log-file "$OUT/$tag.ncu$n.csv" \
      "$BIN" bench latency --model "tests/data/configs/$cfg" --load-format dummy --input-len 128 \
      --output-len "$n" --batch-size "$batch" --max-model-len 1024 --num-iters-warmup 0 \
      --num-iters 1 $EXTRA > "$OUT/$tag.ncu$n.log" 2>&1 \
      || { echo "$tag: ncu run with $n tokens failed"; tail -5 "$OUT/$tag.ncu$n.log"; }
  done
  python3 tools/cuda/kernel_profile_table.py --steps "$STEPS" --latency "$OUT/$tag.latency.json" \
    --title "$tag" "$OUT/$tag.ncu2.csv" "$OUT/$tag.ncu$((2 + STEPS)).csv" | tee "$OUT/$tag.table.txt"
done
