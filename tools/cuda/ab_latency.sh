#!/usr/bin/env bash
# Decode-step latency of several hyllm binaries on the GPU machine, A/B: for
# each case, every binary runs `hyllm bench latency` (dummy weights) one
# after the other, repeated HYLLM_AB_REPS times in turn, so that the
# binaries share the GPU's state (clocks, temperature) as evenly as one call
# allows. Prints one markdown table last: the median decode step of every
# run, and each binary's change against the first one's (medians of runs).
#
#   HYLLM_AB_BINS="base=/tmp/ob/base/hyllm new=/tmp/sb/hyllm" tools/cuda/ab_latency.sh
#   HYLLM_AB_CASES="CONFIG:INPUT:BATCH:MAX_MODEL_LEN ..."  configs under tests/data/configs
#       (default: qwen3_5_35b_a3b_fp8:128:1:1024 qwen3_5_27b_fp8:128:1:1024)
#   HYLLM_AB_REPS=2   HYLLM_AB_OUTPUT_LEN=64   HYLLM_AB_ITERS=3   HYLLM_AB_ARGS="..." extra flags
#   HYLLM_AB_METRIC=prefill   the median prefill (time to every prompt's first token) instead of the
#       decode step (then e.g. HYLLM_AB_OUTPUT_LEN=2 HYLLM_AB_ITERS=5)
# Logs go to $OUT (default /tmp/hyllm-ab).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-/tmp/hyllm-ab}
mkdir -p "$OUT"
BINS=${HYLLM_AB_BINS:?HYLLM_AB_BINS="name=path ..." is required}
CASES=${HYLLM_AB_CASES:-qwen3_5_35b_a3b_fp8:128:1:1024 qwen3_5_27b_fp8:128:1:1024}
REPS=${HYLLM_AB_REPS:-2}
OUTPUT_LEN=${HYLLM_AB_OUTPUT_LEN:-64}
ITERS=${HYLLM_AB_ITERS:-3}
EXTRA=${HYLLM_AB_ARGS:-}
METRIC=${HYLLM_AB_METRIC:-decode}
case $METRIC in
  decode) PATTERN='s/^Decode step (batch [0-9]*): .*median \([0-9.]*\) ms.*/\1/p' ;;
  prefill) PATTERN='s/^Prefill (batch .*): .*median \([0-9.]*\) ms.*/\1/p' ;;
  *) echo "ab_latency: HYLLM_AB_METRIC must be decode or prefill" >&2; exit 2 ;;
esac

names=()
paths=()
for b in $BINS; do
  names+=("${b%%=*}")
  paths+=("${b#*=}")
  [[ -x ${b#*=} ]] || { echo "ab_latency: ${b#*=} is not an executable" >&2; exit 1; }
done

# median decode step (ms) of one run, or "fail"
run_one() {  # path config input batch max_model_len log
  local log=$6
  timeout 300 "$1" bench latency --model "tests/data/configs/$2" --load-format dummy --input-len "$3" \
    --output-len "$OUTPUT_LEN" --batch-size "$4" --max-model-len "$5" --num-iters-warmup 1 \
    --num-iters "$ITERS" $EXTRA > "$log" 2>&1  # EXTRA: flags, split on purpose
  local ms
  ms=$(sed -n "$PATTERN" "$log" | head -1)
  echo "${ms:-fail}"
}

median() { tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '{v[NR]=$1} END {if (NR==0) print "fail"; else if (NR%2) print v[(NR+1)/2]; else printf "%.3f\n", (v[NR/2]+v[NR/2+1])/2}'; }

table="| config ($METRIC) | input | batch | max-model-len |"
sep="|---|---:|---:|---:|"
for n in "${names[@]}"; do table+=" $n (ms) |"; sep+="---:|"; done
for n in "${names[@]:1}"; do table+=" $n vs ${names[0]} |"; sep+="---:|"; done
table+=$'\n'"$sep"

for c in $CASES; do
  IFS=: read -r cfg input batch mml <<< "$c"
  declare -A runs=()
  for r in $(seq 1 "$REPS"); do
    for i in "${!names[@]}"; do
      ms=$(run_one "${paths[$i]}" "$cfg" "$input" "$batch" "$mml" "$OUT/${cfg}_in${input}_b${batch}_${names[$i]}_r$r.log")
      echo "$cfg in $input b $batch mml $mml ${names[$i]} rep $r: $ms"
      runs[$i]="${runs[$i]:-} $ms"
    done
  done
  row="| $cfg | $input | $batch | $mml |"
  for i in "${!names[@]}"; do row+=" $(echo "${runs[$i]}" | xargs | sed 's/ / \/ /g') |"; done
  base=$(echo "${runs[0]}" | median)
  for i in "${!names[@]}"; do
    [[ $i == 0 ]] && continue
    m=$(echo "${runs[$i]}" | median)
    if [[ $base == fail || $m == fail ]]; then
      row+=" - |"
    else
      row+=" $(awk -v a="$base" -v b="$m" 'BEGIN {printf "%+.1f%%", 100 * (b - a) / a}') |"
    fi
  done
  table+=$'\n'"$row"
  unset runs
done
echo
echo "$table" | tee "$OUT/table.md"
