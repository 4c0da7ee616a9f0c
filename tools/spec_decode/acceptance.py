#!/usr/bin/env python3
"""Measured acceptance of MTP drafts on a real model: starts `hyllm serve`
with speculative decoding, sends chat questions (greedy, one at a time) and
reads the spec-decode counters from /metrics. Prints the per-position
acceptance rate, the mean acceptance length and the tokens per second beside a
run without speculation.

  python3 tools/spec_decode/acceptance.py --hyllm build/hyllm --model models/hyllm-tiny [--k 1 2 3 4]
"""

import argparse
import http.client
import json
import re
import socket
import subprocess
import time

QUESTIONS = [
    "What does os.path.join() do?", "What is the json module?", "When is KeyError raised?",
    "What does str.split() do?", "What is the itertools module?", "Tell me about list comprehensions.",
    "What does enumerate() do?", "What is a generator?", "When is StopIteration raised?",
    "What is the collections module?", "What does sorted() do?", "What is the pathlib module?",
    "What does zip() do?", "What is a decorator?", "When is ValueError raised?", "What does range() do?",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(port, method, path, body=None, timeout=300):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request(method, path, json.dumps(body) if body is not None else None, {"Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, r.read()


def run(args, k):
    port = free_port()
    cmd = [args.hyllm, "serve", "--model", args.model, "--port", str(port), "--max-model-len", "2048"]
    if k:
        cmd += ["--speculative-config", json.dumps({"method": "mtp", "num_speculative_tokens": k})]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 120
        while True:
            try:
                if call(port, "GET", "/health", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            if server.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"the server did not start: {' '.join(cmd)}")
            time.sleep(0.2)
        tokens, start = 0, time.time()
        for q in QUESTIONS:
            status, body = call(port, "POST", "/v1/chat/completions",
                                {"messages": [{"role": "user", "content": q}], "max_tokens": args.max_tokens,
                                 "temperature": 0})
            if status != 200:
                raise RuntimeError(f"HTTP {status}: {body[:200]!r}")
            tokens += json.loads(body)["usage"]["completion_tokens"]
        seconds = time.time() - start
        text = call(port, "GET", "/metrics")[1].decode()

        def total(name, labels=""):
            m = re.search(r"^" + re.escape(name) + r"\{[^}]*" + re.escape(labels) + r"[^}]*\} ([0-9.eE+-]+)$", text, re.M)
            return float(m.group(1)) if m else 0.0

        drafts = total("vllm:spec_decode_num_drafts_total")
        per_pos = [total("vllm:spec_decode_num_accepted_tokens_per_pos_total", f'position="{i}"') / drafts
                   if drafts else 0.0 for i in range(k)]
        accepted = total("vllm:spec_decode_num_accepted_tokens_total")
        return dict(k=k, tokens=tokens, tok_s=tokens / seconds, per_pos=per_pos,
                    mean_len=1 + accepted / drafts if drafts else 1.0)
    finally:
        server.terminate()
        server.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hyllm", default="build/hyllm")
    ap.add_argument("--model", default="models/hyllm-tiny")
    ap.add_argument("--k", type=int, nargs="+", default=[1, 2, 3, 4])
    ap.add_argument("--max-tokens", type=int, default=128)
    args = ap.parse_args()
    rows = [run(args, 0)] + [run(args, k) for k in args.k]
    print(f"{len(QUESTIONS)} greedy chat answers of up to {args.max_tokens} tokens, one at a time")
    print("| k | acceptance per position | mean acceptance length | output tok/s | vs k=0 |")
    print("|---:|---|---:|---:|---:|")
    for r in rows:
        pos = " / ".join(f"{p:.2f}" for p in r["per_pos"]) or "-"
        print(f"| {r['k']} | {pos} | {r['mean_len']:.2f} | {r['tok_s']:.1f} | {r['tok_s'] / rows[0]['tok_s']:.2f}x |")


if __name__ == "__main__":
    main()
