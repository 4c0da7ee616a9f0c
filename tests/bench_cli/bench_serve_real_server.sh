#!/usr/bin/env bash
# `hyllm bench serve` against the real `hyllm serve` on the CPU backend: every
# request succeeds and the token totals equal what was asked for, which holds
# only if the server's usage counts are exact; the prefix-cache workloads
# (prefix_repetition, multi_turn) run and report cached prompt tokens.
set -euo pipefail
hyllm=$1
tmp=$(mktemp -d)
# Port 0: the server binds a free port and logs it, so that tests running side
# by side never race for one.
"$hyllm" serve --device cpu --host 127.0.0.1 --port 0 --max-model-len 512 >"$tmp/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$tmp"' EXIT
port=
for _ in $(seq 1 240); do
  port=${port:-$(sed -n 's|.*listening on http://[^ :]*:\([0-9][0-9]*\).*|\1|p' "$tmp/server.log" | head -1)}
  [[ -n $port ]] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  kill -0 $server 2>/dev/null || { cat "$tmp/server.log"; exit 1; }
  sleep 0.5
done
[[ -n $port ]] || { echo "hyllm serve logged no port"; cat "$tmp/server.log"; exit 1; }
"$hyllm" bench serve --base-url "http://127.0.0.1:$port" --tokenizer models/hyllm-tiny \
  --num-prompts 8 --random-input-len 32 --random-output-len 8 --max-concurrency 4 \
  --ignore-eos --temperature 0 --num-warmups 2 --percentile-metrics ttft,tpot,itl,e2el \
  --metric-percentiles 50,99 --save-result --result-dir "$tmp" --result-filename r.json | tee "$tmp/out.txt"
grep -q "Successful requests:                     8" "$tmp/out.txt"
grep -q "Failed requests:                         0" "$tmp/out.txt"
grep -q "Total input tokens:                      256" "$tmp/out.txt"
grep -q "Total generated tokens:                  64" "$tmp/out.txt"
grep -q '"p99_e2el_ms"' "$tmp/r.json"
common=(--base-url "http://127.0.0.1:$port" --tokenizer models/hyllm-tiny --ignore-eos --temperature 0
        --save-result --result-dir "$tmp")
"$hyllm" bench serve "${common[@]}" --dataset-name prefix_repetition --prefix-repetition-prefix-len 64 \
  --prefix-repetition-suffix-len 16 --prefix-repetition-num-prefixes 2 --prefix-repetition-output-len 4 \
  --num-prompts 8 --max-concurrency 1 --result-filename p.json | tee "$tmp/p.txt"
grep -q "Successful requests:                     8" "$tmp/p.txt"
grep -q "Total generated tokens:                  32" "$tmp/p.txt"
grep -q "Prefix cache hit rate (%):" "$tmp/p.txt"
grep -q '"prefix_repetition_prefix_len": 64' "$tmp/p.json"
"$hyllm" bench serve "${common[@]}" --dataset-name multi_turn --multi-turn-num-turns 3 --multi-turn-prefix-len 20 \
  --multi-turn-input-len 24 --multi-turn-output-len 8 --num-prompts 2 --max-concurrency 2 \
  --result-filename m.json | tee "$tmp/m.txt"
grep -q "Successful requests:                     6" "$tmp/m.txt"
grep -q "Total generated tokens:                  48" "$tmp/m.txt"
grep -q "Prefix cache hit rate (%):" "$tmp/m.txt"
echo "bench serve against the real server: OK"
