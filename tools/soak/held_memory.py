#!/usr/bin/env python3
"""Memory `hyllm serve` keeps after requests end, per connection thread.

The server handles each connection on a thread of its own and keeps those
threads for reuse, so whatever a request leaves behind on its thread (a
per-thread cache, a scratch buffer grown by a big input, allocator arenas
holding freed blocks) is multiplied by the number of threads, and grows in
a soak as more threads see big requests. This check measures it directly,
in seconds, where the soak (soak.py) needs minutes to show it:
  1. after a warm-up on one connection, C connections are opened and held,
     each tokenizes a short text: the RSS added per connection thread must
     stay under --per-thread-kib;
  2. on B of those connections at once (default: all of them), a prompt of
     a megabyte (refused: over the context length, after tokenizing), R
     rounds: RSS after they end may exceed RSS before them by at most
     --big-slack-mib. Each such request leaves a few megabytes free at the
     top of its thread's malloc arena, so what this measures grows with the
     number of arenas: run it with as many arenas as a many-core GPU host
     has (GLIBC_TUNABLES=glibc.malloc.arena_max=128, glibc's default for 16
     cores), where a server that leaves the arena count to glibc keeps about
     3 MiB per connection thread (about 96 MiB over the default 32
     connections). A server with the arena cap of src/util/malloc_config.h
     keeps a few MiB per arena whatever the connection count, but how much
     depends on which threads shared an arena and the order they freed in:
     26-49 MiB over repeated runs on the 2-core CI machine, with 24 or 32
     connections. The default bound (64 MiB) sits between the two.
Prints a table and exits 1 when a check fails.

  python3 tools/soak/held_memory.py -- build/hyllm serve --device cpu --port 0 ...
"""
import argparse
import http.client
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import soak  # noqa: E402  (the soak's server process and RSS helpers)

MiB = 1 << 20


def post(conn, path, body):
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, r.read()


def settled_rss(pid):
    """RSS once the server has let go of the requests just answered."""
    time.sleep(1.0)
    return soak.rss_bytes(pid)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--big", type=int, default=0, help="concurrent megabyte prompts per round (0: one per connection)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--per-thread-kib", type=float, default=1024)
    ap.add_argument("--big-slack-mib", type=float, default=64)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- the hyllm serve command")
    opt = ap.parse_args()
    command = opt.command[1:] if opt.command[:1] == ["--"] else opt.command
    if not command:
        ap.error("give the server command after --")
    if opt.big <= 0 or opt.big > opt.connections:
        opt.big = opt.connections

    server = soak.Server(command)
    pid, port = server.proc.pid, server.port
    text = soak.text(random.Random(3), 200)
    failures = []
    try:
        # Warm-up: the tokenizer, the engine and the first connection thread.
        warm = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        for _ in range(3):
            post(warm, "/tokenize", {"prompt": text})
        post(warm, "/v1/completions", {"prompt": text, "max_tokens": 4})
        warm.close()
        rss_warm = settled_rss(pid)

        # C connections held open at once: C connection threads, each of which tokenizes.
        conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=120) for _ in range(opt.connections)]
        for c in conns:
            c.connect()

        def run_on(cs, path, body, expect):
            def one(c):
                try:
                    status, data = post(c, path, body)
                    if status != expect:
                        failures.append(f"{path}: HTTP {status} (expected {expect}): {data[:200]!r}")
                except (OSError, http.client.HTTPException) as e:
                    failures.append(f"{path}: {type(e).__name__}: {e}")
            threads = [threading.Thread(target=one, args=(c,)) for c in cs]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        run_on(conns, "/tokenize", {"prompt": text}, 200)
        rss_threads = settled_rss(pid)
        per_thread = (rss_threads - rss_warm) / opt.connections

        big = {"prompt": "x" * MiB, "max_tokens": 4}
        t0 = time.time()
        for _ in range(opt.rounds):
            run_on(conns[:opt.big], "/v1/completions", big, 400)
        big_seconds = time.time() - t0
        rss_big = settled_rss(pid)
        for c in conns:
            c.close()
    finally:
        server.proc.terminate()
        try:
            server.proc.wait(timeout=60)
        except Exception:  # noqa: BLE001 - a stuck server is killed
            server.proc.kill()

    checks = [
        ("requests answered as expected", f"{len(failures)} unexpected answers", not failures),
        (f"RSS per connection thread ({opt.connections} held, each tokenized)",
         f"{per_thread / 1024:.0f} KiB ({rss_warm / MiB:.0f} -> {rss_threads / MiB:.0f} MiB)",
         per_thread <= opt.per_thread_kib * 1024),
        (f"RSS kept after {opt.rounds} x {opt.big} concurrent 1 MiB prompts",
         f"{(rss_big - rss_threads) / MiB:+.1f} MiB ({rss_threads / MiB:.0f} -> {rss_big / MiB:.0f} MiB; "
         f"{big_seconds:.1f} s)", rss_big - rss_threads <= opt.big_slack_mib * MiB),
    ]
    print("| check | measured | result |")
    print("|---|---|---|")
    for name, value, ok in checks:
        print(f"| {name} | {value} | {'PASS' if ok else 'FAIL'} |")
    for f in failures[:10]:
        print(f"  {f}")
    if not all(ok for _, _, ok in checks):
        print("\nserver log (tail):\n" + server.tail(20))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
