#!/usr/bin/env python3
"""Per-kernel time of S decode steps from two ncu CSV logs (see kernel_profile.sh).

The second log ran S more decode steps than the first; per kernel name, the
difference of the two runs' launch counts and summed durations divided by S is
that kernel's share of one step. Names are shortened to the function name
(template arguments and parameters dropped) so instances group together.
"""
import argparse
import csv
import io
import json
import re
from collections import defaultdict


def read_ncu(path):
    """{short kernel name: [launches, total ns]} from an ncu --csv --page raw log."""
    text = open(path, encoding="utf-8", errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        raise SystemExit(f"{path}: no ncu CSV table in it")
    rows = list(csv.reader(io.StringIO(text[start:])))
    header = rows[0]
    name_col = header.index("Kernel Name")
    time_col = header.index("gpu__time_duration.sum")
    totals = defaultdict(lambda: [0, 0.0])
    for row in rows[1:]:
        if len(row) <= max(name_col, time_col):
            continue
        try:
            ns = float(row[time_col].replace(",", ""))
        except ValueError:
            continue  # the units row
        entry = totals[short_name(row[name_col])]
        entry[0] += 1
        entry[1] += ns
    return totals


def short_name(name):
    name = re.sub(r"\(.*$", "", name)          # parameters
    depth, out = 0, []
    for ch in name:                              # template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    name = "".join(out).strip()
    name = re.sub(r"^(void|static)\s+", "", name)
    return name.split("::")[-1] if "nvjet" not in name else name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--latency", help="bench latency --output-json of the same config")
    ap.add_argument("--title", default="")
    ap.add_argument("--what", default="", help="what the runs' difference is (default: STEPS decode steps)")
    ap.add_argument("short_log")
    ap.add_argument("long_log")
    args = ap.parse_args()
    a, b = read_ncu(args.short_log), read_ncu(args.long_log)
    per_step = []
    for name in set(a) | set(b):
        launches = (b[name][0] - a[name][0]) / args.steps
        us = (b[name][1] - a[name][1]) / args.steps / 1e3
        if launches > 0 or abs(us) > 0.5:
            per_step.append((us, launches, name))
    per_step.sort(reverse=True)
    total_us = sum(us for us, _, _ in per_step)
    total_launches = sum(n for _, n, _ in per_step)
    print(f"== {args.title}: {args.what or f'{args.steps} decode steps'}")
    if args.latency:
        try:
            step_ms = json.load(open(args.latency))["decode_step_ms_median"]
            print(f"decode step (no ncu, median): {step_ms:.3f} ms; kernels sum {total_us / 1e3:.3f} ms; "
                  f"outside kernels {step_ms - total_us / 1e3:.3f} ms; {total_launches:.0f} launches per step")
        except (OSError, KeyError, ValueError) as err:
            print(f"(no latency result: {err})")
    print(f"{'us/step':>9} {'share':>6} {'launch':>7}  kernel")
    for us, n, name in per_step[:40]:
        print(f"{us:9.1f} {100 * us / total_us:5.1f}% {n:7.1f}  {name[:110]}")
    rest = per_step[40:]
    if rest:
        print(f"{sum(u for u, _, _ in rest):9.1f}        {sum(n for _, n, _ in rest):7.1f}  ({len(rest)} more kernels)")


if __name__ == "__main__":
    main()
