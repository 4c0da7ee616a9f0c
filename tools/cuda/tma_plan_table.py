#!/usr/bin/env python3
"""Turns the log of `bench_cuda_gemm --sweep-tma LOG` (run on the GPU) into
the rows of fp8_gemv_tma.cu's table of measured launch plans.

Each log line is one launch of the TMA decode linear:
  N=16384 K=5120 M=1 C=2 per_sm=2 headroom=24 pad=101.0KiB 21.07us 92.9% 27B gdn qkv|z
For every (N, K, token tiles) it picks the cluster size and padding whose
times summed over the logged row counts of that tile count are least, among
the unpadded launches and those padded with 24 KiB of headroom (padding that
fills an SM leaves no room for the kernels launched programmatically beside
the linear). Prints the C++ rows, each with its gain over the fastest
unpadded launch of any cluster size; with --token-tiles, only the rows of
those tile counts (the others keep the kernel's capacity rule).

  tools/cuda/tma_plan_table.py sweep.log [--token-tiles 1,2]
"""
import argparse
import re
import sys
from collections import defaultdict

LINE = re.compile(r"^N=(\d+) K=(\d+) M=(\d+) C=(\d+) per_sm=(\d+) headroom=(\d+) pad=[\d.]+KiB ([\d.]+)us [\d.]+% (.*)$")


def token_tiles(m: int) -> int:
    return (min(m, 32) + 7) // 8


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", help="the log of bench_cuda_gemm --sweep-tma")
    ap.add_argument("--token-tiles", help="comma-separated tile counts to keep (default: all)")
    args = ap.parse_args()
    keep = {int(v) for v in args.token_tiles.split(",")} if args.token_tiles else None
    # (N, K, NT) -> (C, per_sm) -> {M: us}
    times = defaultdict(lambda: defaultdict(dict))
    names = {}
    with open(args.log) as f:
        for raw in f:
            m = LINE.match(raw.strip())
            if not m:
                continue
            n, k, rows, c, per_sm, headroom = (int(v) for v in m.groups()[:6])
            us, name = float(m.group(7)), m.group(8)
            if per_sm != 0 and headroom != 24:
                continue
            key = (n, k, token_tiles(rows))
            times[key][(c, per_sm)][rows] = us
            names[(n, k)] = name
    if not times:
        print("tma_plan_table: no sweep lines in the log", file=sys.stderr)
        return 1
    for (n, k, nt), plans in sorted(times.items()):
        if keep is not None and nt not in keep:
            continue
        rows_seen = set().union(*(set(v) for v in plans.values()))
        complete = {p: v for p, v in plans.items() if set(v) == rows_seen}
        total = {p: sum(v.values()) for p, v in complete.items()}
        best = min(total, key=total.get)
        unpadded = min((t, p) for p, t in total.items() if p[1] == 0)
        gain = 100.0 * (unpadded[0] - total[best]) / unpadded[0]
        print(f"    {{{n}, {k}, {nt}, {best[0]}, {best[1]}}},  // {names[(n, k)]}: {gain:.1f}% under the best unpadded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
