#!/usr/bin/env bash
# How the cache budget's split between GDN state slots and KV blocks bounds the
# published throughput workload (random 1024 in / 128 out, all prompts at
# once). The cache plan gives the slots at most half of the budget
# (src/engine/kv/cache_plan.h); a sequence runs only with a slot, so on a
# card where half the budget holds fewer slots than prompts, the rest wait
# for finishing sequences and every step carries few prompts.
#
# For each config: `tools/cuda/serve_bench.sh`'s throughput workload alone,
# once with the default split ("half") and once with --num-gpu-blocks-override
# sized from the default run's startup log so that the budget holds a state
# slot and the KV of IN + OUT tokens for as many sequences as fit
# ("balanced"), the two in turn, HYLLM_SPLIT_REPS times. Prints a table last;
# logs under $OUT.
#
#   HYLLM_BIN=... HYLLM_TOKENIZER=... tools/cuda/cache_split_ab.sh
#   HYLLM_SPLIT_MODELS="qwen3_5_35b_a3b_fp8 qwen3_5_27b_fp8"   HYLLM_SPLIT_REPS=2
#   HYLLM_THROUGHPUT_PROMPTS=1000                                  prompts sent at once
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/hyllm-cache-split}
mkdir -p "$OUT"
MODELS=${HYLLM_SPLIT_MODELS:-qwen3_5_35b_a3b_fp8 qwen3_5_27b_fp8}
REPS=${HYLLM_SPLIT_REPS:-2}
PROMPTS=${HYLLM_THROUGHPUT_PROMPTS:-1000}
SEQ_TOKENS=$((1024 + 128))
table=("| model | split | GDN slots | KV tokens | engine steps | total tok/s | median TPOT ms |" "|---|---|---:|---:|---:|---:|---:|")

# run NAME CFG [SERVE ARGS]: the throughput workload alone on a fresh server; its directory is $OUT/NAME.
run() {
  local name=$1 cfg=$2
  shift 2
  OUT=$OUT/$name HYLLM_SERVE_MODELS=$cfg HYLLM_DECODE_BATCHES=" " HYLLM_THROUGHPUT_PROMPTS=$PROMPTS \
    HYLLM_SERVE_ARGS="$*" tools/cuda/serve_bench.sh > "$OUT/$name.log" 2>&1
}
# The startup log's numbers: "slots slot_MiB blocks kv_GiB".
plan_of() {
  python3 - "$1" <<'EOF'
import re, sys
log = open(sys.argv[1]).read()
kv = re.search(r"KV cache size: [\d,]+ tokens \(([\d,]+) blocks of 16 tokens, ([\d.]+) GiB\)", log)
st = re.search(r"GDN state slots: (\d+) \(([\d.]+) MiB each", log)
print(st.group(1), st.group(2), kv.group(1).replace(",", ""), kv.group(2)) if kv and st else print("")
EOF
}
row() {  # name cfg split
  local log=$OUT/$1.log plan steps tps tpot
  plan=$(plan_of "$log")
  steps=$(grep -oE "prompts at once: [0-9]+ engine steps" "$log" | grep -oE "[0-9]+ engine" | cut -d' ' -f1)
  tps=$(grep -E "^\| $2 \| random" "$log" | awk -F'|' '{print $4}' | awk '{print $1}')
  tpot=$(grep -E "^\| $2 \| random" "$log" | awk -F'|' '{print $4}' | sed -E 's/.*, ([0-9.]+)\).*/\1/')
  read -r slots _ blocks _ <<< "$plan"
  table+=("| $2 | $3 | ${slots:-?} | $(( ${blocks:-0} * 16 )) | ${steps:-?} | ${tps:-FAILED} | ${tpot:-} |")
}

for cfg in $MODELS; do
  balanced=""
  for rep in $(seq "$REPS"); do
    run "${cfg}_half_$rep" "$cfg"
    row "${cfg}_half_$rep" "$cfg" half
    if [[ -z $balanced ]]; then
      read -r slots slot_mib blocks kv_gib <<< "$(plan_of "$OUT/${cfg}_half_$rep.log")"
      [[ -n ${slots:-} ]] || { echo "$cfg: no cache plan in ${cfg}_half_$rep.log" >&2; break; }
      balanced=$(python3 -c "
import math, sys
slots, slot_mib, blocks, kv_gib, seq = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
block_mib = kv_gib * 1024 / blocks
budget_mib = slots * slot_mib + kv_gib * 1024
per_seq = math.ceil(seq / 16)
n = int(budget_mib // (slot_mib + per_seq * block_mib))
print(max(n * per_seq, 512))" "$slots" "$slot_mib" "$blocks" "$kv_gib" "$SEQ_TOKENS")
      echo "$cfg: default split $slots slots + $blocks blocks; balanced for $SEQ_TOKENS-token sequences: --num-gpu-blocks-override $balanced"
    fi
    run "${cfg}_balanced_$rep" "$cfg" --num-gpu-blocks-override "$balanced"
    row "${cfg}_balanced_$rep" "$cfg" "balanced ($balanced blocks)"
  done
done

echo
echo "================ cache split: GDN slots vs KV blocks, random 1024/128 x $PROMPTS at once ================"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
printf '%s\n' "${table[@]}" | tee "$OUT/table.md"
