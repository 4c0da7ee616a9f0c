#!/usr/bin/env bash
# The MoE kernels on the GPU machine, from test and bench binaries built on the
# development machine (one device call): the MoE op harness (every MoE kernel
# against the CPU reference, both regimes), model parity and the engine test
# (32 concurrent requests = each alone) on CUDA, a SASS check of the
# register-fed kernels, and the real-scale 35B-A3B step benchmark with the MoE
# blocks timed alone. Prints a short table last; logs go to $OUT.
#
# Here:   tools/cuda/moe_device_checks.sh --pack BUILD_DIR CARRY_DIR
#         (copies the binaries, this script and the compiled-in source path)
# There:  bash CARRY_DIR/moe_device_checks.sh [stages]   (from the repo root;
#         stages: ops,parity,sass,bench,bench_skew,stream,serve; default all but
#         stream and serve)
#         stream: the small regime timed at T = 1, 2, 4, 8, 16, 32 over all 40
#         layers' distinct experts (weights from memory, not L2); its table is last
#         serve: serve_bench.sh for 35B-A3B with the hyllm of CARRY_DIR/serve.tar.xz
#         (tools/cuda/pack_serve_bundle.sh BUILD_DIR CARRY_DIR/serve.tar.xz), vLLM's
#         1000-prompt workload included; MOE_SERVE_ARGS adds serve flags
#         (e.g. "--dummy-router-skew 0.5")
set -uo pipefail
if [[ "${1:-}" == "--pack" ]]; then
  BUILD=$2 CARRY=$3
  STAGE=$(mktemp -d)
  mkdir -p "$CARRY"
  for b in tests/cuda/test_cuda_ops tests/golden_cuda/test_golden_cuda; do
    strip -o "$STAGE/$(basename $b)" "$BUILD/$b"
  done
  cp "$BUILD/tests/cuda/bench_cuda_step" "$STAGE/"  # with symbols, for a backtrace
  tar -C "$STAGE" -cf - . | xz -T2 -6 > "$CARRY/bins.tar.xz"
  rm -rf "$STAGE"
  cp "$0" "$CARRY/moe_device_checks.sh"
  cp "$(dirname "$0")/serve_bench.sh" "$CARRY/serve_bench.sh"  # this branch's (run from CARRY, it finds the repo root)
  sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" > "$CARRY/source_dir"
  ls -la "$CARRY"
  exit 0
fi
ROOT=$(pwd)
CARRY=$(cd "$(dirname "$0")" && pwd)
BIN=/tmp/moe-bin
mkdir -p $BIN && tar -xJf "$CARRY/bins.tar.xz" -C $BIN
OUT=${OUT:-/tmp/moe-device-out}
STAGES=${1:-ops,parity,sass,bench,bench_skew}
has() { [[ ",$STAGES," == *",$1,"* ]]; }
mkdir -p "$OUT"
D=/tmp/hyllm-deps
[[ -d $D/usr ]] || { mkdir -p $D && tar -xJf "$ROOT/.carry/cuda/deps.tar.xz" -C $D; }
export LD_LIBRARY_PATH=$D/usr/lib/x86_64-linux-gnu:$D/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/local/cuda/lib64
# The test binaries find tests/data through the source path compiled into them.
SRC=$(cat "$CARRY/source_dir")
if [[ -n "$SRC" && ! -e "$SRC" ]]; then mkdir -p "$(dirname "$SRC")" && ln -s "$ROOT" "$SRC"; fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
summary=()
note() { summary+=("$1"); echo "== $1"; }
timed() { local s=$(date +%s); "$@"; local rc=$?; echo "$(( $(date +%s) - s ))s rc=$rc"; return $rc; }

if has ops; then
  r=$(timed timeout ${MOE_OPS_TIMEOUT:-90} "$BIN/test_cuda_ops" --gtest_filter='*Moe*:*Linear*:*Swiglu*' > "$OUT/harness.log" 2>&1)
  note "op harness (MoE, linear, swiglu): $r, $(grep -c '^\[       OK' "$OUT/harness.log") ok, $(grep -c '^\[  FAILED' "$OUT/harness.log") failed lines"
fi
if has parity; then
  r=$(timed timeout ${MOE_PARITY_TIMEOUT:-60} "$BIN/test_golden_cuda" > "$OUT/parity.log" 2>&1)
  note "model parity + engine on cuda: $r, $(grep -c '^\[       OK' "$OUT/parity.log") ok, $(grep -c '^\[  FAILED' "$OUT/parity.log") failed lines"
fi
if has sass; then
  # The register-fed kernels must issue a window batch of loads before their MMAs.
  cuobjdump -sass "$BIN/test_cuda_ops" 2>/dev/null | awk '
    /Function : .*(up_small|down_small|down_split|route_small|grouped_gemm)/ { name=$3; n[name]=0; first[name]=-1; hg[name]=0 }
    name != "" && /LDG/ { n[name]++ }
    name != "" && /HMMA|HGMMA/ { if (first[name] < 0) first[name] = n[name]; if ($0 ~ /HGMMA/) hg[name]++ }
    END { for (k in n) printf "  %s: %d LDG, %d before the first MMA, %d HGMMA\n", substr(k, 1, 90), n[k], first[k], hg[k] }' \
    > "$OUT/sass.txt"
  note "sass: $(wc -l < "$OUT/sass.txt") kernels listed"
fi
if has bench; then
  args=(tests/data/configs/qwen3_5_35b_a3b --prefill 1024 --context 1024 --batches 1,8,32 --iters ${MOE_ITERS:-20}
        --moe-tokens ${MOE_TOKENS:-1,8,32,64,256,1024,8192})
  r=$(timed timeout ${MOE_BENCH_TIMEOUT:-120} stdbuf -oL "$BIN/bench_cuda_step" "${args[@]}" > "$OUT/bench_35b.log" 2>&1)
  note "bench 35B-A3B: $r"
  if [[ "$r" == *rc=139* ]]; then
    timeout 60 cuda-gdb -batch -ex run -ex bt --args "$BIN/bench_cuda_step" "${args[@]}" --batches 1 --iters 1 \
      --moe-tokens 1 > "$OUT/bench_bt.log" 2>&1
    note "bench backtrace: $(grep -c '^#' "$OUT/bench_bt.log") frames"
  fi
fi
if has bench_skew; then
  r=$(timed timeout ${MOE_BENCH_TIMEOUT:-120} "$BIN/bench_cuda_step" tests/data/configs/qwen3_5_35b_a3b --prefill 1024 --context 1024 \
      --batches 1,32 --iters 10 --router-skew 0.5 --moe-tokens 1,32,1024,8192 > "$OUT/bench_35b_skew.log" 2>&1)
  note "bench 35B-A3B, router skew 0.5: $r"
fi
if has stream; then
  r=$(timed timeout ${MOE_BENCH_TIMEOUT:-120} stdbuf -oL "$BIN/bench_cuda_step" tests/data/configs/qwen3_5_35b_a3b \
      --prefill 16 --context 16 --batches 1 --iters ${MOE_ITERS:-20} --moe-only 1 --moe-tokens 1,2,4,8,16,32 \
      --moe-stream 1 > "$OUT/stream_bench.log" 2>&1)
  note "small regime streaming 35B-A3B experts: $r"
fi
if has serve; then
  mkdir -p /tmp/sb && tar -xJf "$CARRY/serve.tar.xz" -C /tmp/sb
  LD_LIBRARY_PATH=/tmp/sb/lib:/usr/local/cuda/lib64 HYLLM_BIN=/tmp/sb/hyllm HYLLM_TOKENIZER=/tmp/sb/tokenizer \
    OUT=$OUT/serve HYLLM_SERVE_MODELS=qwen3_5_35b_a3b HYLLM_THROUGHPUT_PROMPTS=${HYLLM_THROUGHPUT_PROMPTS:-1000} \
    HYLLM_SERVE_ARGS="${MOE_SERVE_ARGS:-}" \
    bash "$CARRY/serve_bench.sh" > /tmp/moe-serve.log 2>&1
  note "serve bench 35B-A3B: rc=$?"
  # At most 8 files come back: keep the table and the logs' archive.
  mv "$OUT/serve/table.md" "$OUT/serve_table.md" 2>/dev/null
  mv "$OUT/serve/logs.tgz" "$OUT/serve_logs.tgz" 2>/dev/null
  rm -rf "$OUT/serve"
fi

echo
echo "================ summary ================"
cat "$OUT/gpu.txt"
for s in "${summary[@]}"; do echo "$s"; done
[[ -f "$OUT/harness.log" ]] && grep -E "FAILED|Failure|moe|error" "$OUT/harness.log" | grep -v "^\[ RUN" | head -40
[[ -f "$OUT/parity.log" ]] && grep -E "^\[  FAILED|differs|Failure" "$OUT/parity.log" | head -20
[[ -f "$OUT/sass.txt" ]] && cat "$OUT/sass.txt"
[[ -f "$OUT/bench_bt.log" ]] && grep -E "^#|SIG" "$OUT/bench_bt.log" | cut -c1-200 | head -30
for f in bench_35b bench_35b_skew; do
  [[ -f "$OUT/$f.log" ]] && { echo "--- $f"; grep -vE "^    per op" "$OUT/$f.log"; grep -E "^    per op" "$OUT/$f.log" | cut -c1-400; }
done
[[ -f "$OUT/serve_table.md" ]] && cat "$OUT/serve_table.md"
[[ -f "$OUT/stream_bench.log" ]] && { echo "--- small regime streaming"; sed -n '/streaming its experts/,$p' "$OUT/stream_bench.log"; }
true
