#!/usr/bin/env bash
# The GPU machine's one script for the CUDA backend: builds the CUDA targets,
# runs the op harness (every CUDA op against the CPU reference), model parity
# when its test exists, and the real-scale step benchmarks; prints a short
# table last. Logs go to $OUT (or /tmp/hyllm-device-out).
#
#   tools/cuda/run_device_checks.sh            build here, then run everything
#   HYLLM_CHECKS=parity,generate tools/cuda/... only these stages (default
#                                              ops,parity,bench): ops = op
#                                              harness, parity = model parity and the
#                                              engine on CUDA through the real runner,
#                                              gemm = the linear's GEMM kernels timed
#                                              alone at 27B/35B shapes (bench_cuda_gemm),
#                                              generate = hyllm generate cuda vs cpu
#                                              (builds the app; its cpp-httplib needs
#                                              brotli, OpenSSL and zlib, which
#                                              pack_host_deps.sh packs), bench =
#                                              real-scale steps
#   HYLLM_PREBUILT=DIR tools/cuda/...          run binaries built elsewhere
#                                              (DIR/test_cuda_ops, DIR/bench_cuda_step,
#                                              DIR/bench_cuda_gemm),
#                                              building here in the background only to
#                                              check that the build works (skipped with
#                                              HYLLM_DEVICE_BUILD=0)
#   HYLLM_PARITY_BIN=FILE                      the model-parity binary built elsewhere
#
# The image has nvcc, CMake and ninja but not every Debian -dev package the
# build needs: tools/cuda/pack_host_deps.sh packs them (with the shared
# libraries the binaries load) into .carry/cuda/deps.tar.xz, unpacked here at
# /tmp/hyllm-deps. The serving benchmark at real scale is tools/cuda/serve_bench.sh.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/hyllm-device-out}
mkdir -p "$OUT"
BUILD=${HYLLM_BUILD_DIR:-$ROOT/build-cuda}
JOBS=${HYLLM_JOBS:-16}
CHECKS=${HYLLM_CHECKS:-ops,parity,bench}
has() { [[ ",$CHECKS," == *",$1,"* ]]; }
summary=()
note() { summary+=("$1"); echo "== $1"; }

source "$ROOT/tools/cuda/host_deps_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

TARGETS=()
has ops && TARGETS+=(test_cuda_ops)
has bench && TARGETS+=(bench_cuda_step)
has gemm && TARGETS+=(bench_cuda_gemm)
has parity && [[ -z "${HYLLM_PARITY_BIN:-}" ]] && TARGETS+=(test_golden_cuda)
has generate && TARGETS+=(hyllm)
# NCCL: with the CUDA toolkit, else the one PyTorch's wheels bring.
NCCL_ARGS=()
if [[ ! -f /usr/local/cuda/include/nccl.h ]]; then
  nccl_root=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null) &&
    NCCL_ARGS=(-DHYLLM_NCCL_ROOT="$nccl_root") && export LD_LIBRARY_PATH=$nccl_root/lib:${LD_LIBRARY_PATH:-}
fi
build() {
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHYLLM_ENABLE_CUDA=ON \
    -DHYLLM_BUILD_BENCHMARKS=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc "${NCCL_ARGS[@]}" &&
    cmake --build "$BUILD" -j"$JOBS" --target "${TARGETS[@]}"
}

build_pid=""
if [[ -n "${HYLLM_PREBUILT:-}" ]]; then
  BIN=$HYLLM_PREBUILT
  if [[ "${HYLLM_DEVICE_BUILD:-1}" != 0 ]]; then
    (build > "$OUT/build.log" 2>&1; echo "rc=$?" >> "$OUT/build.log") &
    build_pid=$!
  fi
else
  start=$(date +%s)
  if build > "$OUT/build.log" 2>&1; then note "build: ok in $(( $(date +%s) - start )) s"; else
    note "build: FAILED (see build.log)"; tail -30 "$OUT/build.log"; exit 1; fi
  BIN=$BUILD/tests/cuda
fi

# 1. Op harness.
if has ops; then
  start=$(date +%s)
  "$BIN/test_cuda_ops" --gtest_brief=1 > "$OUT/harness.log" 2>&1
  rc=$?
  note "op harness: $([[ $rc == 0 ]] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s ($(grep -c ' ok$' "$OUT/harness.log") outputs ok, $(grep -c 'FAIL$' "$OUT/harness.log") over threshold)"
fi

if [[ -n "$build_pid" ]]; then
  wait $build_pid
  note "device build (background): $(tail -1 "$OUT/build.log")"
fi

# 2. Model parity (tiny models and the default model against their goldens,
# greedy tokens from the GPU sampler of the real ModelRunner) and the engine on
# CUDA through its EngineClient, when the golden harness exists in this tree.
PARITY=${HYLLM_PARITY_BIN:-$BUILD/tests/golden_cuda/test_golden_cuda}
if has parity && [[ -z "${HYLLM_PARITY_BIN:-}" && -f tests/golden/harness.h && -n "${HYLLM_PREBUILT:-}" ]]; then
  cmake --build "$BUILD" -j"$JOBS" --target test_golden_cuda > "$OUT/parity_build.log" 2>&1 ||
    note "model parity: build FAILED (see parity_build.log)"
fi
if has parity && [[ -x "$PARITY" ]]; then
  start=$(date +%s)
  "$PARITY" > "$OUT/parity.log" 2>&1 && note "model parity + engine on cuda: passed in $(( $(date +%s) - start )) s" ||
    note "model parity + engine on cuda: FAILED (see parity.log: $(grep -c '^\[  FAILED' "$OUT/parity.log") lines)"
  grep -E "^\[.*(greedy|teacher-forced|engine on cuda|differs)|^\[  (FAILED|PASSED|SKIPPED)" "$OUT/parity.log" | sed 's/^/  /' | head -60 > "$OUT/parity_summary.txt"
elif has parity; then
  note "model parity: not run (no golden harness in this tree)"
fi

# 3. hyllm generate --device cuda vs cpu on the default model, greedy, from
# the prompts of its goldens (tokens printed; the golden rule is parity's).
if has generate && [[ -x "$BUILD/hyllm" ]]; then
  python3 - > "$OUT/generate_prompts.txt" <<'PY'
import json
for c in json.load(open("tests/data/default_model/goldens.json"))["cases"][:3]:
    print(",".join(map(str, c["prompt_ids"])), ",".join(map(str, c["output_ids"][:32])))
PY
  n=0; same=0
  while read -r ids golden; do
    n=$((n + 1))
    for dev in cpu cuda; do
      "$BUILD/hyllm" generate --model models/hyllm-tiny --prompt-ids "$ids" --max-tokens 32 --temperature 0 \
        --ignore-eos --device $dev --json < /dev/null > "$OUT/gen_$dev.json" 2>> "$OUT/generate.log" || echo "generate $dev failed" >> "$OUT/generate.log"
    done
    python3 - "$OUT/gen_cuda.json" "$OUT/gen_cpu.json" "$golden" >> "$OUT/generate.log" <<'PY' || true
import json, sys
def toks(f):
    try: return json.load(open(f))["token_ids"]
    except Exception: return []
c, h, g = toks(sys.argv[1]), toks(sys.argv[2]), [int(x) for x in sys.argv[3].split(",")]
def prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]: n += 1
    return n
print(f"case: cuda equals golden for {prefix(c, g)}/{len(g)} tokens, cpu for {prefix(h, g)}/{len(g)}, cuda vs cpu {prefix(c, h)}")
PY
    [[ -s "$OUT/gen_cuda.json" ]] && same=$((same + 1))
  done < "$OUT/generate_prompts.txt"
  grep "^case:" "$OUT/generate.log" | sed 's/^/  /' > "$OUT/generate_summary.txt"
  note "hyllm generate --device cuda: ran on $same/$n golden prompts (greedy, 32 tokens; prefixes equal to the golden below)"
fi

# The linear's GEMM kernels alone (weights from HBM, graph replays).
if has gemm; then
  GEMM_BIN=$BIN/bench_cuda_gemm
  [[ -x "$GEMM_BIN" ]] || GEMM_BIN=$BUILD/tests/cuda/bench_cuda_gemm
  "$GEMM_BIN" --iters 50 > "$OUT/gemm.md" 2>&1 && note "gemm kernels timed (gemm.md)" || note "gemm bench: FAILED"
fi

# 3. Real-scale steps (random weights, BF16).
for cfg in qwen3_5_27b qwen3_5_35b_a3b; do
  has bench || continue
  "$BIN/bench_cuda_step" "tests/data/configs/$cfg" --prefill 1024 --context 1024 --batches 1,8,32 --iters 20 \
    > "$OUT/bench_$cfg.log" 2>&1 || note "bench $cfg: FAILED"
done

echo
echo "================ summary ================"
cat "$OUT/gpu.txt"
for s in "${summary[@]}"; do echo "$s"; done
[[ -f "$OUT/parity_summary.txt" ]] && cat "$OUT/parity_summary.txt"
[[ -f "$OUT/generate_summary.txt" ]] && cat "$OUT/generate_summary.txt"
[[ -f "$OUT/harness.log" ]] && sed -n '/cuda op output/,$p' "$OUT/harness.log" | grep -E "cuda op output|FAIL|sampler|paged|delta|moe_experts|linear|fp8|quantize"
for cfg in qwen3_5_27b qwen3_5_35b_a3b; do [[ -f "$OUT/bench_$cfg.log" ]] && cat "$OUT/bench_$cfg.log"; done
[[ -f "$OUT/gemm.md" ]] && cat "$OUT/gemm.md"
true
