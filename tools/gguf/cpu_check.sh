#!/usr/bin/env bash
# The llama.cpp peer checked end to end on the CPU, without a GPU:
#  1. builds the pinned llama.cpp (bench/peers/llamacpp.json: source archive
#     checked against its sha256, cpu_cmake_flags) in $WORK, unless
#     LLAMA_SERVER names a build already made;
#  2. writes GGUF files with `hyllm export-gguf`: the embedded model
#     (models/hyllm-tiny: trained weights, its tokenizer; 2 key / 4 value GDN
#     heads, so the value-head reorder is exercised), in BF16 and in Q8_0
#     (whose bytes are also checked against llama.cpp's gguf-py), the tiny MoE test
#     checkpoint tests/data/tiny_models/moe_flat_per_expert_tied (per-expert
#     tensors, byte vocabulary), and hyllm's dummy weights of a small MoE
#     config with 2 key / 4 value heads (BF16 and Q8_0);
#  3. greedy agreement of hyllm and llama.cpp on each (tools/gguf/greedy_agreement.py);
#  4. a small `hyllm bench compare` through bench/peers/llamacpp.json (its
#     workload shrunk by tools/gguf/peer_workload.py) to check the peer's
#     launch line, version and /props checks and the streaming client.
# Prints a summary table last. Needs build/hyllm. Runs the builds with nice.
#
#   tools/gguf/cpu_check.sh
#   HYLLM_LLAMA_ARCHIVE=/path/to/the/archive.tar[.xz]   the pinned source archive (tools/gguf/README.md)
#   LLAMA_SERVER=/path/to/llama-server                    skip the build
#   WORK=/tmp/hyllm-llamacpp-cpu   HYLLM_CPU_COMPARE=0 skips step 4
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
WORK=${WORK:-/tmp/hyllm-llamacpp-cpu}
mkdir -p "$WORK"
PEER=$ROOT/bench/peers/llamacpp.json
BIN=${HYLLM_BIN:-$ROOT/build/hyllm}
[[ -x $BIN ]] || { echo "no $BIN: build the hyllm target first" >&2; exit 1; }
peer() { python3 -c "import json,sys; v=json.load(open('$PEER'))
for k in sys.argv[1].split('.'): v=v[k]
print(' '.join(v) if isinstance(v, list) else v)" "$1"; }
rows=()
status=0

if [[ -z ${LLAMA_SERVER:-} ]]; then
  LLAMA_SERVER=$WORK/build/bin/llama-server
  if [[ ! -x $LLAMA_SERVER ]]; then
    ARCHIVE=${HYLLM_LLAMA_ARCHIVE:?set HYLLM_LLAMA_ARCHIVE to the llama.cpp source archive (tools/gguf/README.md)}
    src=$(tools/gguf/prepare_llamacpp_source.sh "$ARCHIVE" "$WORK") || exit 1
    # shellcheck disable=SC2046
    nice -n 15 cmake -S "$src" -B "$WORK/build" -G Ninja $(peer source.cpu_cmake_flags) > "$WORK/cmake.log" 2>&1 &&
      nice -n 15 cmake --build "$WORK/build" -j2 --target $(peer source.build_targets) > "$WORK/build.log" 2>&1 ||
      { echo "llama.cpp build failed (see $WORK/build.log)" >&2; exit 1; }
  fi
fi
version=$("$LLAMA_SERVER" --version 2>&1 | grep -m1 version)
rows+=("| llama-server | $version | |")

# A small MoE config whose GDN layers have twice as many value heads as key heads.
mkdir -p "$WORK/moe_dummy"
cat > "$WORK/moe_dummy/config.json" <<'JSON'
{"architectures": ["Qwen3_5MoeForCausalLM"], "model_type": "qwen3_5_moe_text",
 "hidden_size": 128, "num_hidden_layers": 4, "vocab_size": 512, "head_dim": 32,
 "num_attention_heads": 4, "num_key_value_heads": 2,
 "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 32, "linear_value_head_dim": 32,
 "linear_conv_kernel_dim": 4, "full_attention_interval": 4, "max_position_embeddings": 4096,
 "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64,
 "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                     "mrope_section": [2, 1, 1], "mrope_interleaved": true},
 "rms_norm_eps": 1e-6, "tie_word_embeddings": false, "dtype": "bfloat16"}
JSON

# llama.cpp's CPU matmuls round activations to BF16; for the random tiny test
# checkpoints that moves logits by more than their margins, so their tie
# margin is the one their golden file states for BF16-activation engines.
moe_ckpt=tests/data/tiny_models/moe_flat_per_expert_tied
bf16_margin=$(python3 -c "import json; print(json.load(open('$moe_ckpt/golden.json'))['bf16_margin_threshold'])")

# name | model dir | export args | agreement args
cases=(
  "hyllm-tiny|models/hyllm-tiny||--text-prompts --random-prompts 8 --vocab-limit 8000"
  "hyllm-tiny-q8_0|models/hyllm-tiny|--outtype q8_0|--text-prompts --random-prompts 8 --vocab-limit 8000"
  "moe-tiny-checkpoint|$moe_ckpt|--byte-vocab|--random-prompts 6 --vocab-limit 320 --tie-margin $bf16_margin"
  "moe-dummy-seed0|$WORK/moe_dummy|--byte-vocab --load-format dummy|--random-prompts 8 --vocab-limit 512 --load-format dummy"
  "moe-dummy-seed0-q8_0|$WORK/moe_dummy|--byte-vocab --load-format dummy --outtype q8_0|--random-prompts 8 --vocab-limit 512 --load-format dummy"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name dir export_args agree_args <<< "$c"
  gguf=$WORK/$name.gguf
  # shellcheck disable=SC2086
  if ! "$BIN" export-gguf --model "$dir" $export_args --out "$gguf" > "$WORK/export_$name.log" 2>&1; then
    rows+=("| $name | export-gguf failed: $(tail -1 "$WORK/export_$name.log") | |")
    status=1
    continue
  fi
  # shellcheck disable=SC2086
  python3 tools/gguf/greedy_agreement.py --hyllm "$BIN" --llama-server "$LLAMA_SERVER" --model "$dir" --gguf "$gguf" \
    --max-tokens 32 $agree_args --log "$WORK/llama_$name.log" > "$WORK/agree_$name.txt" 2>&1
  rc=$?
  [[ $rc == 0 ]] || status=1
  rows+=("| $name | $(grep '^| all' "$WORK/agree_$name.txt" | cut -d'|' -f4,5 | tr '|' ',' | tr -s ' ') | exit $rc, $(grep -o 'near-tie margin [0-9.]* nats' "$WORK/agree_$name.txt"), $WORK/agree_$name.txt |")
done

# The Q8_0 export byte for byte against llama.cpp's own quantiser (gguf-py
# from the pinned source; numpy from Debian's python3-numpy).
gguf_py=$(ls -d "$WORK"/src/*/gguf-py 2>/dev/null | head -1)
if [[ -n $gguf_py && -s $WORK/hyllm-tiny.gguf && -s $WORK/hyllm-tiny-q8_0.gguf ]]; then
  /usr/bin/python3 tools/gguf/q8_0_check.py --gguf-py "$gguf_py" --q8 "$WORK/hyllm-tiny-q8_0.gguf" \
    --bf16 "$WORK/hyllm-tiny.gguf" > "$WORK/q8_0_check.txt" 2>&1
  rc=$?
  [[ $rc == 0 ]] || status=1
  rows+=("| hyllm-tiny Q8_0 bytes vs gguf-py | exit $rc: $(tail -1 "$WORK/q8_0_check.txt") | |")
fi

if [[ ${HYLLM_CPU_COMPARE:-1} == 1 ]]; then
  python3 tools/gguf/peer_workload.py "$PEER" "$WORK/llamacpp-cpu.json" input_len=64 output_len=16 concurrency=1,2 \
    prompts_per_concurrency=2 min_prompts=4 all_at_once_prompts=8 startup_timeout_s=300 matched.max_num_seqs=2 \
    matched.max_model_len=512 matched.ctx_size_total=1024 matched.max_num_batched_tokens=256 \
    matched.kv_cache_memory=64M > /dev/null
  "$BIN" bench compare --peer "$WORK/llamacpp-cpu.json" --model models/hyllm-tiny --set "gguf=$WORK/hyllm-tiny.gguf" \
    --set "llama_server=$LLAMA_SERVER" --gpu-name "CPU" --out-dir "$WORK/compare" > "$WORK/compare.log" 2>&1
  rc=$?
  [[ $rc == 0 ]] || status=1
  rows+=("| bench compare (CPU smoke, hyllm-tiny) | exit $rc: $(grep -c '^| ' "$WORK/compare.log") table rows | $WORK/compare.log |")
fi

echo
echo "================ llama.cpp peer on the CPU ================"
echo "| check | result | details |"
echo "|---|---|---|"
for r in "${rows[@]}"; do echo "$r"; done
exit $status
