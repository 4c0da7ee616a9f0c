#!/usr/bin/env python3
"""Writes a copy of a peer file whose workload (and, optionally, matched
values) is overridden, for runs that cannot afford the pinned workload (a
CPU smoke test, a GPU session with minutes to spare). The launch lines,
pins and source stay those of the pinned file; the copy records what was
changed under "derived_from" and is written outside the repository.

  peer_workload.py bench/peers/llamacpp.json OUT.json concurrency=1,8,32 min_prompts=4 \
      prompts_per_concurrency=1 all_at_once_prompts=0 [matched.kv_cache_memory=2G]
"""
import json
import sys


def parse(value):
    if "," in value:
        return [int(v) for v in value.split(",") if v]
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    src, dst, overrides = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(src) as f:
        peer = json.load(f)
    changed = {}
    for item in overrides:
        key, _, value = item.partition("=")
        section, _, field = key.rpartition(".")
        section = section or "workload"
        if section not in ("workload", "matched"):
            sys.exit(f"{key}: only workload.* and matched.* may be overridden")
        changed[f"{section}.{field}"] = {"pinned": peer[section].get(field), "used": parse(value)}
        peer[section][field] = parse(value)
    peer["derived_from"] = {"file": src, "changed": changed}
    with open(dst, "w") as f:
        json.dump(peer, f, indent=2)
    print(f"wrote {dst}: " + ", ".join(f"{k} {v['pinned']} -> {v['used']}" for k, v in changed.items()))


if __name__ == "__main__":
    main()
