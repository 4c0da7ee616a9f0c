#!/usr/bin/env python3
"""Greedy agreement between hyllm and llama.cpp on the same weights.

hyllm runs `hyllm serve` on a model directory (--skip-tokenizer-init: token
ids in and out); llama.cpp runs llama-server on the GGUF that `hyllm
export-gguf` wrote from the same directory (and seed). Both generate greedily
from each prompt and give their top-20 log-probabilities at every step (hyllm
through vLLM's return_tokens_as_token_ids, so that tokens are ids).

For each prompt the tokens must be equal up to the first step k where they
differ. Up to k both engines saw the same context, so their log-probabilities
at those steps measure how far two correct implementations drift apart by
rounding alone: for every pair of tokens in both top-20 lists of a step, the
difference of the two engines' log-prob gaps (the noise; its 99th percentile
over all prompts is reported). At k, each engine's gap between its own choice
and the other's, g_llama and g_hyllm, add up to their discrepancy d. The
divergence is a near-tie when d is below the tie margin: max(--tie-margin,
--noise-factor x the noise's 99th percentile); a larger d is a mismatch (the
writer or one of the engines computes a different function). Where one of the
two tokens is outside an engine's top-20 list, its log-prob there is at most
the list's lowest, which bounds d from below: a bound at or above the margin
is a mismatch, a smaller one leaves the divergence unclassified (as does an
ended sequence, which has no log-prob).

On random (dummy) weights the logits are nearly flat over the whole
vocabulary, so near-ties come early; real checkpoints run much longer.

Prints one line per prompt and a summary table last; exits 1 on a mismatch.

  greedy_agreement.py --hyllm build/hyllm --llama-server /tmp/llama/build/bin/llama-server \
      --model models/hyllm-tiny --gguf /tmp/hyllm-tiny.gguf [--load-format dummy] [--device cuda] \
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


def wait_healthy(proc, port, log_path, what, timeout=900):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{what} exited ({proc.returncode}); see {log_path}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except Exception:
            time.sleep(0.5)
    proc.kill()
    sys.exit(f"{what} did not become healthy; see {log_path}")


def start_llama(binary, gguf, port, log_path, threads, extra):
    argv = [binary, "--model", gguf, "--host", "127.0.0.1", "--port", str(port), "--parallel", "1",
            "--ctx-size", "4096", "--no-cache-prompt", "--cache-ram", "0", "--ctx-checkpoints", "0",
            "--fit", "off", "--no-ui", "--seed", "0", "--threads", str(threads)] + extra
    proc = subprocess.Popen(argv, stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    return wait_healthy(proc, port, log_path, "llama-server")


def start_hyllm(args, port, log_path):
    argv = [args.hyllm, "serve", args.model, "--host", "127.0.0.1", "--port", str(port), "--skip-tokenizer-init",
            "--load-format", args.load_format, "--seed", str(args.seed), "--device", args.device,
            "--max-num-seqs", "1", "--no-enable-prefix-caching"] + args.hyllm_arg
    proc = subprocess.Popen(argv, stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    return wait_healthy(proc, port, log_path, "hyllm serve")


TOP = 20  # the most log-probabilities either server gives per step


# Neither engine ignores the end of sequence: llama.cpp's ignore_eos bans the
# end-of-generation tokens (their logits become -inf) where hyllm's, like
# vLLM's, only keeps going, so with it the two would choose differently.
def llama_greedy(base, prompt_ids, n):
    """(tokens, ended at eos, per step {id: logprob} of its top TOP or None)"""
    r = post(f"{base}/completion", {"prompt": prompt_ids, "n_predict": n, "temperature": 0.0, "n_probs": TOP,
                                    "return_tokens": True, "cache_prompt": False, "seed": 0})
    tokens = r["tokens"]
    return tokens, r.get("stop_type") == "eos", align_entries(tokens, r.get("completion_probabilities") or [])


def align_entries(tokens, entries):
    """llama-server's log-prob entries as one per step: {id: logprob} or None.
    The server leaves out the entries of tokens that end inside a multi-byte
    UTF-8 character, so entries are matched to steps by their token ids, in
    order (a left-out step whose token equals the next entry's would take
    that entry: equal tokens in a row, whose contexts differ by one token;
    accepted)."""
    steps, e = [], 0
    for t in tokens:
        if e < len(entries) and entries[e]["id"] == t:
            steps.append({x["id"]: x["logprob"] for x in entries[e]["top_logprobs"]})
            e += 1
        else:
            steps.append(None)
    return steps


def hyllm_greedy(base, prompt_ids, n):
    model = json.loads(urllib.request.urlopen(f"{base}/v1/models", timeout=10).read())["data"][0]["id"]
    r = post(f"{base}/v1/completions", {"model": model, "prompt": prompt_ids, "max_tokens": n, "temperature": 0.0,
                                       "logprobs": TOP, "return_token_ids": True, "return_tokens_as_token_ids": True})
    c = r["choices"][0]
    steps = [{int(k.split(":")[1]): v for k, v in top.items()} for top in c["logprobs"]["top_logprobs"]]
    return c["token_ids"], c["finish_reason"] == "stop", steps


def pair_noise(hy, ll):
    """|(hy[a] - hy[b]) - (ll[a] - ll[b])| over the pairs of tokens both steps list."""
    common = sorted(set(hy) & set(ll))
    diff = [hy[t] - ll[t] for t in common]
    return [abs(diff[i] - diff[j]) for i in range(len(diff)) for j in range(i + 1, len(diff))]


def percentile(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def first_divergence(ours, ours_eos, theirs, theirs_eos):
    """(ours, theirs, k, n): the first step k where the two differ (None if
    none) over n common steps; an ending where the other went on counts as
    a step whose token is -1."""
    if ours_eos and theirs_eos and len(ours) == len(theirs) + 1:
        theirs = theirs + ours[-1:]  # llama.cpp leaves the end-of-sequence token out of "tokens"
    n = min(len(ours), len(theirs))
    k = next((j for j in range(n) if ours[j] != theirs[j]), None)
    if k is None and len(ours) != len(theirs):
        k = n
        theirs = theirs + [-1] if len(theirs) == n else theirs
        ours = ours + [-1] if len(ours) == n else ours
    return ours, theirs, k, n


def run_noise(run, our_lp, their_lp):
    """pair_noise over the steps before the divergence that both engines scored."""
    _, _, k, n = run
    noise = []
    for j in range(min(k if k is not None else n, len(our_lp), len(their_lp))):
        if our_lp[j] is not None and their_lp[j] is not None:
            noise += pair_noise(our_lp[j], their_lp[j])
    return noise


def classify(ours, theirs, our_lp, their_lp, k, margin):
    """("near-tie" | "mismatch" | "unclassified", verdict text) of the divergence at step k."""
    name = lambda t: "end" if t == -1 else str(t)
    what = f"hyllm {name(ours[k])}, llama.cpp {name(theirs[k])}"
    ll = (their_lp[k] if k < len(their_lp) else None) or {}
    hy = (our_lp[k] if k < len(our_lp) else None) or {}
    a, b = ours[k], theirs[k]
    if a in ll and b in ll and a in hy and b in hy:
        g_llama, g_hyllm = ll[b] - ll[a], hy[a] - hy[b]
        d = g_llama + g_hyllm
        gaps = f"d {d:.3f} = g_llama {g_llama:.3f} + g_hyllm {g_hyllm:.3f}"
        if d < margin:
            return "near-tie", f"near-tie at step {k} ({gaps}: {what})"
        return "mismatch", f"MISMATCH at step {k} ({gaps}: {what})"
    if ll and hy and b in ll and a in hy:
        # A choice outside the other engine's top list scores at most that
        # list's lowest log-prob: d is at least this bound.
        d = (ll[b] - ll.get(a, min(ll.values()))) + (hy[a] - hy.get(b, min(hy.values())))
        if d >= margin:
            return "mismatch", f"MISMATCH at step {k} (d >= {d:.3f}, a choice outside a top-{TOP}: {what})"
        return "unclassified", f"unclassified at step {k} (d >= {d:.3f}, a choice outside a top-{TOP}: {what})"
    return "unclassified", f"unclassified at step {k} (no log-probs for a choice: {what})"


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
    ap.add_argument("--tie-margin", type=float, default=0.1, help="smallest near-tie margin (nats)")
    ap.add_argument("--noise-factor", type=float, default=2.0,
                    help="near-tie margin as a multiple of the measured noise's 99th percentile")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="hyllm serve --device (cpu or cuda)")
    ap.add_argument("--llama-arg", action="append", default=[],
                    help="extra llama-server argument (repeat), e.g. --llama-arg=-ngl --llama-arg=all")
    ap.add_argument("--hyllm-arg", action="append", default=[], help="extra hyllm serve argument (repeat)")
    ap.add_argument("--log", default="/tmp/greedy_agreement_llama.log", help="llama-server's log (hyllm's: .hyllm.log)")
    args = ap.parse_args()

    # One engine at a time: on one GPU both would hold a real-scale model.
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
        theirs_all = [llama_greedy(base, p, args.max_tokens) for p in prompts]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_hyllm(args, port, args.log + ".hyllm.log")
    try:
        ours_all = [hyllm_greedy(base, p, args.max_tokens) for p in prompts]
    finally:
        proc.terminate()
        proc.wait(timeout=60)

    # The noise: every step both engines took from the same context.
    noise, runs = [], []
    for (ours, ours_eos, our_lp), (theirs, theirs_eos, their_lp) in zip(ours_all, theirs_all):
        run = first_divergence(ours, ours_eos, theirs, theirs_eos)
        noise += run_noise(run, our_lp, their_lp)
        runs.append((run, our_lp, their_lp, ours_eos))
    p99 = percentile(noise, 0.99)
    margin = max(args.tie_margin, args.noise_factor * p99) if noise else args.tie_margin

    rows, mismatches, unclassified, total_equal, total_steps = [], 0, 0, 0, 0
    for i, (p, (run, our_lp, their_lp, ours_eos)) in enumerate(zip(prompts, runs)):
        ours, theirs, k, n = run
        if k is None:
            verdict, equal = ("equal (both ended)" if ours_eos else "equal"), n
        else:
            equal = k
            kind, verdict = classify(ours, theirs, our_lp, their_lp, k, margin)
            mismatches += kind == "mismatch"
            unclassified += kind == "unclassified"
        total_equal += equal
        total_steps += args.max_tokens
        rows.append((i, len(p), equal, verdict))
        print(f"prompt {i} ({len(p)} tokens): {equal}/{args.max_tokens} equal, {verdict}", flush=True)
    print()
    print(f"greedy agreement: {args.model} ({args.load_format}, hyllm on {args.device}) vs {args.gguf} on llama.cpp "
          f"{build}; noise over {len(noise)} token pairs of agreeing steps: median {percentile(noise, 0.5):.4f}, "
          f"99th percentile {p99:.4f}, max {max(noise) if noise else float('nan'):.4f} nats; "
          f"near-tie margin {margin:.3f} nats")
    print("| prompt | prompt tokens | equal tokens | first divergence |")
    print("|---|---|---|---|")
    for i, n, equal, verdict in rows:
        print(f"| {i} | {n} | {equal}/{args.max_tokens} | {verdict} |")
    print(f"| all | | {total_equal}/{total_steps} | {mismatches} mismatches, {unclassified} unclassified |")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
