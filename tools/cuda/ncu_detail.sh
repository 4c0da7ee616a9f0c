#!/usr/bin/env bash
# Nsight Compute's full section set for a few kernels of a decode step, on
# the GPU machine, cheaply: ncu replays each profiled kernel and must save and
# restore all device memory to do so, which takes minutes with a real-scale
# model's tens of GB of weights. So this runs bench_cuda_step (random
# weights, tests/cuda/bench) on a copy of a real config cut to 4 layers (3 GDN
# + 1 attention: every kernel kind of the model at its real shapes; fewer with
# HYLLM_NCU_LAYERS=N, e.g. 1 for the MoE kernels alone) with a small
# context, and profiles the launches matching a regex after the first
# HYLLM_NCU_SKIP of them (default 0; warm ones are more telling).
#
#   HYLLM_BENCH_STEP=path/to/bench_cuda_step tools/cuda/ncu_detail.sh CONFIG REGEX [COUNT] [-- bench args]
#   e.g. HYLLM_NCU_SKIP=24 tools/cuda/ncu_detail.sh qwen3_5_35b_a3b 'route_small|up_small|down_small' 3
# (default bench args: --prefill 1 --context 256 --batches 1 --moe-tokens 1 --iters 2)
# HYLLM_NCU_HYLLM=path/to/hyllm profiles `hyllm bench latency --load-format dummy` on the cut config
# instead (FP8 configs too, which bench_cuda_step does not make); the bench args are then bench
# latency's (default: --input-len 1024 --output-len 2 --batch-size 1 --max-model-len 2048
# --num-iters-warmup 1 --num-iters 1 --enforce-eager), e.g.
#   HYLLM_NCU_HYLLM=/tmp/sb/hyllm tools/cuda/ncu_detail.sh qwen3_5_35b_a3b_fp8 grouped_fp8 2
# HYLLM_NCU_WHAT="--metrics gpu__time_duration.sum,..." collects those instead of `--set full`
# (quicker, for comparing builds: the log then holds one line a metric).
# HYLLM_NCU_SOURCE=N keeps the report ($OUT/ncu_<config>.ncu-rep) and also prints, per profiled
# kernel, the N SASS instructions with the most warp-stall samples (ncu --page source), each with
# its share of the kernel's samples: which wait the warps spend their time in.
# Writes $OUT/ncu_<config>.txt and prints the headline rows per kernel.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/hyllm-ncu}
mkdir -p "$OUT"
CFG=$1 REGEX=$2 COUNT=${3:-3}
shift $(( $# >= 3 ? 3 : $# )); [[ ${1:-} == -- ]] && shift
ARGS=("$@")
HYLLM=${HYLLM_NCU_HYLLM:-}
if [[ -n $HYLLM ]]; then
  [[ ${#ARGS[@]} -gt 0 ]] || ARGS=(--input-len 1024 --output-len 2 --batch-size 1 --max-model-len 2048
                                   --num-iters-warmup 1 --num-iters 1 --enforce-eager)
else
  [[ ${#ARGS[@]} -gt 0 ]] || ARGS=(--prefill 1 --context 256 --batches 1 --moe-tokens 1 --iters 2)
fi
BENCH=${HYLLM_BENCH_STEP:-$ROOT/build-cuda/tests/cuda/bench_cuda_step}
CUT=$OUT/config_$CFG
mkdir -p "$CUT"
python3 - "tests/data/configs/$CFG/config.json" "$CUT/config.json" "${HYLLM_NCU_LAYERS:-4}" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
t = c.get("text_config", c)
n = int(sys.argv[3])
t["num_hidden_layers"] = n
if t.get("layer_types"):
    t["layer_types"] = t["layer_types"][:n]
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
if [[ -n $HYLLM ]]; then
  CMD=("$HYLLM" bench latency --model "$CUT" --load-format dummy "${ARGS[@]}")
else
  CMD=("$BENCH" "$CUT" "${ARGS[@]}")
fi
SOURCE=${HYLLM_NCU_SOURCE:-0}
REPORT=()
[[ $SOURCE != 0 ]] && REPORT=(-f -o "$OUT/ncu_$CFG")
ncu --clock-control none ${HYLLM_NCU_WHAT:---set full} -k "regex:$REGEX" --launch-skip "${HYLLM_NCU_SKIP:-0}" --launch-count "$COUNT" \
  --log-file "$OUT/ncu_$CFG.txt" "${REPORT[@]}" "${CMD[@]}" > "$OUT/bench_$CFG.log" 2>&1
echo "ncu rc=$?"
if [[ $SOURCE != 0 ]]; then
  # A report holds what --log-file would have: the details page comes from it.
  ncu --import "$OUT/ncu_$CFG.ncu-rep" --page details > "$OUT/ncu_$CFG.txt" 2>&1
  ncu --import "$OUT/ncu_$CFG.ncu-rep" --page source --csv --print-source sass > "$OUT/source_$CFG.csv" 2>&1
  echo "ncu source rc=$?"
  python3 - "$OUT/source_$CFG.csv" "$SOURCE" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
top = int(sys.argv[2])
# One table per kernel, each under its own header row (the row naming the source column).
tables, cur = [], None
for r in rows:
    if any(c == "Source" for c in r):
        cur = {"header": r, "rows": []}
        tables.append(cur)
    elif cur is not None and len(r) == len(cur["header"]):
        cur["rows"].append(r)
if not tables:
    print("  no source table in", sys.argv[1]); print("  " + "".join(open(sys.argv[1]).readlines()[:5]))
for k, t in enumerate(tables):
    h = t["header"]
    col = next((i for i, c in enumerate(h) if c.startswith("Warp Stall Sampling (All")), None)
    src = h.index("Source")
    addr = next((i for i, c in enumerate(h) if c == "Address"), None)
    if col is None:
        print("  kernel %d: no stall-sampling column among %s" % (k, h)); continue
    def num(v):
        try: return float(v.replace(",", ""))
        except ValueError: return 0.0
    total = sum(num(r[col]) for r in t["rows"]) or 1.0
    print("  kernel %d: %d stall samples; the top %d instructions:" % (k, total, top))
    for r in sorted(t["rows"], key=lambda r: -num(r[col]))[:top]:
        print("    %5.1f%%  %s  %s" % (100 * num(r[col]) / total, r[addr] if addr is not None else "", r[src].strip()[:90]))
PY
fi
grep -E "^  [a-zA-Z_].*\(|^    ([a-z]+__[a-z_.]+ |Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per Thread|One or More Eligible|L2 Hit Rate|Theoretical Occupancy|Warp Cycles Per Issued Instruction|Block Size|Grid Size) " \
  "$OUT/ncu_$CFG.txt" | head -${HYLLM_NCU_LINES:-80}
