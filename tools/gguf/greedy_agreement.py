#!/usr/bin/env python3
"""Greedy agreement between hyllm and llama.cpp on the same weights.

hyllm runs `hyllm generate --prompt-ids ... --temperature 0 --ignore-eos
--json` on a model directory; llama.cpp runs llama-server (POST /completion,
temperature 0) on the GGUF that `hyllm export-gguf` wrote from the same
directory (and seed). For each prompt the tokens must be equal up to the
first step where they differ, and there llama.cpp's log-probabilities (asked
for again after the common prefix) of its own choice and of hyllm's choice
must differ by less than --tie-margin nats: a near-tie, where the engines'
different rounding may legitimately pick differently. A divergence at a
larger gap is a mismatch: the writer or one of the engines computes a
different function. Where llama.cpp gives no log-probabilities (it leaves
out tokens that end inside a multi-byte UTF-8 character) the divergence is
reported as unclassified.

Prints one line per prompt and a summary table last; exits 1 on a mismatch.

  greedy_agreement.py --hyllm build/hyllm --llama-server /tmp/llama/build/bin/llama-server \
      --model models/hyllm-tiny --gguf /tmp/hyllm-tiny.gguf [--load-format dummy] \
      [--text-prompts | --random-prompts N] [--max-tokens 32] [--tie-margin 0.1]
"""
import argparse
import json
import random
import socket
import subprocess
import sys
import time
import urllib.request

TEXT_PROMPTS = [
    "The json module",
    "def fibonacci(n):\n    ",
    "Python's asyncio event loop",
    "To open a file for reading, use",
    "A list comprehension is",
    "import os\nimport sys\n\n",
    "The difference between a tuple and a list",
    "Exceptions are raised with",
]


def post(url, body, timeout=600):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_llama(binary, gguf, port, log_path, threads, extra):
    log = open(log_path, "w")
    argv = [binary, "--model", gguf, "--host", "127.0.0.1", "--port", str(port), "--parallel", "1",
            "--ctx-size", "4096", "--no-cache-prompt", "--cache-ram", "0", "--ctx-checkpoints", "0",
            "--fit", "off", "--no-ui", "--seed", "0", "--threads", str(threads)] + extra
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"llama-server exited ({proc.returncode}); see {log_path}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except Exception:
            time.sleep(0.5)
    proc.kill()
    sys.exit(f"llama-server did not become healthy; see {log_path}")


# Neither engine ignores the end of sequence: llama.cpp's ignore_eos bans the
# end-of-generation tokens (their logits become -inf) where hyllm's, like
# vLLM's, only keeps going, so with it the two would choose differently.
def llama_greedy(base, prompt_ids, n):
    r = post(f"{base}/completion", {"prompt": prompt_ids, "n_predict": n, "temperature": 0.0,
                                    "return_tokens": True, "cache_prompt": False, "seed": 0})
    return r["tokens"], r.get("stop_type") == "eos"


def llama_next_logprobs(base, prefix_ids, top):
    """llama.cpp's log-probabilities of the token after prefix_ids: {id: logprob}
    for its top `top` tokens, or None when the server reports none (it leaves
    out the tokens that end inside a multi-byte UTF-8 character)."""
    r = post(f"{base}/completion", {"prompt": prefix_ids, "n_predict": 1, "temperature": 0.0,
                                    "n_probs": top, "cache_prompt": False, "seed": 0})
    steps = r.get("completion_probabilities") or []
    if not steps:
        return None
    return {t["id"]: t["logprob"] for t in steps[0]["top_logprobs"]}


def hyllm_greedy(args, prompt_ids, n):
    argv = [args.hyllm, "generate", "--model", args.model, "--prompt-ids", ",".join(map(str, prompt_ids)),
            "--max-tokens", str(n), "--temperature", "0", "--json",
            "--load-format", args.load_format, "--seed", str(args.seed), "--device", args.device]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"hyllm generate failed: {out.stderr[-2000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return r["token_ids"], r["finish_reason"] == "stop"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hyllm", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--model", required=True, help="the model directory hyllm reads")
    ap.add_argument("--gguf", required=True, help="what `hyllm export-gguf` wrote from --model")
    ap.add_argument("--load-format", default="auto")
    ap.add_argument("--seed", type=int, default=0, help="dummy weight seed (as given to export-gguf)")
    ap.add_argument("--text-prompts", action="store_true", help="tokenize built-in English/code prompts (needs a tokenizer)")
    ap.add_argument("--random-prompts", type=int, default=0, help="this many prompts of random token ids")
    ap.add_argument("--prompt-len", type=int, default=24, help="tokens per random prompt")
    ap.add_argument("--vocab-limit", type=int, default=256, help="random ids are drawn below this")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--tie-margin", type=float, default=0.1, help="near-tie: log-prob gap below this (nats)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="hyllm generate --device (cpu or cuda)")
    ap.add_argument("--llama-arg", action="append", default=[],
                    help="extra llama-server argument (repeat), e.g. --llama-arg=-ngl --llama-arg=all")
    ap.add_argument("--log", default="/tmp/greedy_agreement_llama.log")
    args = ap.parse_args()

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_llama(args.llama_server, args.gguf, port, args.log, args.threads, args.llama_arg)
    try:
        prompts = []
        if args.text_prompts:
            for text in TEXT_PROMPTS:
                prompts.append(post(f"{base}/tokenize", {"content": text, "add_special": False})["tokens"])
        rng = random.Random(1234)
        for _ in range(args.random_prompts):
            prompts.append([rng.randrange(args.vocab_limit) for _ in range(args.prompt_len)])
        if not prompts:
            sys.exit("no prompts: give --text-prompts and/or --random-prompts N")
        build = json.loads(urllib.request.urlopen(f"{base}/props", timeout=10).read()).get("build_info", "?")
        rows, mismatches, unclassified, total_equal, total_steps = [], 0, 0, 0, 0
        for i, p in enumerate(prompts):
            ours, ours_eos = hyllm_greedy(args, p, args.max_tokens)
            theirs, theirs_eos = llama_greedy(base, p, args.max_tokens)
            if ours_eos and theirs_eos and len(ours) == len(theirs) + 1:
                theirs = theirs + ours[-1:]  # llama.cpp leaves the end-of-sequence token out of "tokens"
            n = min(len(ours), len(theirs))
            k = next((j for j in range(n) if ours[j] != theirs[j]), None)
            if k is None and len(ours) != len(theirs):
                k = n  # one engine ended where the other went on
                theirs = theirs + [-1] if len(theirs) == n else theirs
                ours = ours + [-1] if len(ours) == n else ours
            if k is None:
                verdict, equal = ("equal (both ended)" if ours_eos else "equal"), n
            else:
                equal = k
                lp = llama_next_logprobs(base, p + ours[:k], 20)
                if not lp:
                    verdict = f"unclassified at step {k} (llama.cpp gives no log-probs there)"
                    unclassified += 1
                else:
                    # How far hyllm's choice is below llama.cpp's best; an
                    # ending (-1) on hyllm's side has no log-prob to compare.
                    gap = max(lp.values()) - lp[ours[k]] if ours[k] in lp else float("inf")
                    name = lambda t: "end" if t == -1 else str(t)
                    what = f"hyllm {name(ours[k])}, llama.cpp {name(theirs[k])}"
                    if gap < args.tie_margin:
                        verdict = f"near-tie at step {k} (gap {gap:.3f}: {what})"
                    else:
                        verdict = f"MISMATCH at step {k} (gap {gap:.3f}: {what})"
                        mismatches += 1
            total_equal += equal
            total_steps += args.max_tokens
            rows.append((i, len(p), equal, verdict))
            print(f"prompt {i} ({len(p)} tokens): {equal}/{args.max_tokens} equal, {verdict}", flush=True)
        print()
        print(f"greedy agreement: {args.model} ({args.load_format}) vs {args.gguf} on llama.cpp {build}, "
              f"tie margin {args.tie_margin} nats")
        print("| prompt | prompt tokens | equal tokens | first divergence |")
        print("|---|---|---|---|")
        for i, n, equal, verdict in rows:
            print(f"| {i} | {n} | {equal}/{args.max_tokens} | {verdict} |")
        print(f"| all | | {total_equal}/{total_steps} | {mismatches} mismatches, {unclassified} unclassified |")
        return 1 if mismatches else 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
