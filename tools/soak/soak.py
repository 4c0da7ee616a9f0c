#!/usr/bin/env python3
"""A soak under faults for `hyllm serve`.

Starts the server (the command after `--`), drives it with many concurrent
clients for a while, stops it with SIGTERM, and checks that it held up:
  - every request was answered or cleanly refused (no 5xx, no broken stream,
    no reset the client did not cause);
  - the server is healthy after the load;
  - host RSS and GPU memory are flat after warm-up;
  - vllm:num_requests_running/waiting, the KV-cache usage and the GDN
    state-slot usage are back to 0 once the clients are done;
  - SIGTERM drains: in-flight streams finish, new work is refused, and the
    process exits 0 (the command needs --shutdown-timeout long enough).
The traffic mixes streaming and non-streaming chat and completions, n > 1,
clients that disconnect mid-stream or while waiting, requests with hostile
parameters and prompts at the context limit. It prints a table last and
exits 1 when a check fails.

  python3 tools/soak/soak.py --duration 300 --clients 64 -- build/hyllm serve MODEL --port 0 --shutdown-timeout 60

Python's standard library only (it runs on the GPU machine's image too).
Every request goes to the loopback address; every loop ends with --duration.
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

MiB = 1 << 20


# ---- the server process ------------------------------------------------------

class Server:
    def __init__(self, command):
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.log = []
        self.port = None
        ready = threading.Event()

        def pump():
            for raw in self.proc.stdout:
                line = raw.decode("utf-8", "replace")
                self.log.append(line)
                del self.log[:-2000]
                m = re.search(r"listening on http://[^\s:]+:(\d+)", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        ready.wait()
        if self.port is None:
            raise RuntimeError("the server exited before listening:\n" + self.tail())
        deadline = time.time() + 1800
        while True:
            try:
                if get(self.port, "/health")[0] == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("the server exited while loading:\n" + self.tail())
            if time.time() > deadline:
                raise RuntimeError("the server was not healthy within 30 min:\n" + self.tail())
            time.sleep(0.2)

    def tail(self, n=60):
        return "".join(self.log[-n:])


def get(port, path, timeout=30):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def post_json(port, path, body, timeout=60):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        m = re.search(r"VmRSS:\s+(\d+) kB", f.read())
    return int(m.group(1)) * 1024 if m else None


def gpu_bytes(pid):
    """GPU memory the process holds (nvidia-smi), or None without a GPU."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    total = None
    for line in out.strip().splitlines():
        p, mib = (x.strip() for x in line.split(","))
        if p.isdigit() and int(p) == pid:
            total = (total or 0) + int(mib) * MiB
    return total


def metrics(port):
    status, body = get(port, "/metrics")
    if status != 200:
        raise RuntimeError(f"/metrics answered {status}")
    text = body.decode()

    def value(name):
        m = re.search(r"^" + re.escape(name) + r"\{[^}]*\} ([0-9.eE+-]+)$", text, re.M)
        return float(m.group(1)) if m else None

    return {"running": value("vllm:num_requests_running"), "waiting": value("vllm:num_requests_waiting"),
            "kv": value("vllm:kv_cache_usage_perc"), "state": value("hyllm:state_slot_usage_perc"),
            "graphs": value("hyllm:recorded_graphs")}


# ---- one request -------------------------------------------------------------

class Failed(Exception):
    pass


def check_finished(payloads, choices):
    """Every choice 0..choices-1 ended with stop or length, and no error came."""
    finished = set()
    for p in payloads:
        if "error" in p:
            raise Failed(f"error event: {json.dumps(p['error'])[:300]}")
        for c in p.get("choices") or []:
            reason = c.get("finish_reason")
            if reason:
                if reason not in ("stop", "length"):
                    raise Failed(f"finish_reason {reason}")
                finished.add(c["index"])
    if len(finished) != choices:
        raise Failed(f"{len(finished)} of {choices} choices finished")


def request(port, spec, timeout):
    """One request. Returns 'ok', 'refused' or 'dropped'; raises Failed for
    anything a healthy server must not do."""
    path = spec["path"]
    raw = spec.get("raw")
    data = raw.encode() if raw is not None else json.dumps(spec["body"]).encode()
    expect = spec.get("expect", "ok")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, data, {"Content-Type": spec.get("content_type", "application/json")})
        if spec.get("drop_after_s"):
            # The client gives up while the server works on it.
            time.sleep(spec["drop_after_s"])
            conn.sock.shutdown(socket.SHUT_RDWR)
            return "dropped"
        r = conn.getresponse()
        if r.status >= 500:
            raise Failed(f"HTTP {r.status}: {r.read()[:300]!r}")
        if r.status != 200:
            text = r.read()
            try:
                err = json.loads(text)["error"]
            except (ValueError, KeyError, TypeError):
                raise Failed(f"HTTP {r.status} without an OpenAI error body: {text[:200]!r}")
            if err.get("code") != r.status or not isinstance(err.get("message"), str):
                raise Failed(f"HTTP {r.status} with a malformed error: {text[:200]!r}")
            if expect == "ok":
                raise Failed(f"refused a valid request: {r.status} {err['message'][:200]}")
            if spec.get("must_mention") and spec["must_mention"] not in err["message"]:
                raise Failed(f"refused without \"{spec['must_mention']}\": {err['message'][:200]}")
            return "refused"
        if expect == "refuse":
            raise Failed(f"accepted a request that must be refused: {path} {data[:200]!r}")
        if not spec.get("stream"):
            check_finished([json.loads(r.read())], spec.get("choices", 1))
            return "ok"
        events, done = [], False
        while True:
            line = r.readline()
            if not line:
                break
            line = line.rstrip(b"\r\n")
            if not line:
                continue
            if not line.startswith(b"data: "):
                raise Failed(f"not an SSE line: {line[:200]!r}")
            payload = line[6:]
            if payload == b"[DONE]":
                done = True
                continue
            if done:
                raise Failed("an event after [DONE]")
            events.append(json.loads(payload))
            if len(events) == 1 and spec.get("on_first_event"):
                spec["on_first_event"]()
            if spec.get("drop_after_events") and len(events) >= spec["drop_after_events"]:
                conn.sock.shutdown(socket.SHUT_RDWR)
                return "dropped"
        if not done:
            raise Failed("the stream ended without [DONE]")
        check_finished(events, spec.get("choices", 1))
        return "ok"
    except Failed:
        raise
    except (OSError, http.client.HTTPException, ValueError) as e:
        raise Failed(f"{type(e).__name__}: {e}")
    finally:
        conn.close()


def raw_status(port, data):
    """Sends bytes no HTTP client would send; returns the status code or None."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        got = b""
        while b"\r\n" not in got:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    m = re.match(rb"HTTP/1\.1 (\d{3})", got)
    return int(m.group(1)) if m else None


# ---- the traffic -------------------------------------------------------------

WORDS = ("the a json module returns dumps loads value object list of in python file data error string function "
         "class method you can use this to with for from").split()


def text(r, words):
    return " ".join(r.choice(WORDS) for _ in range(words))


def hostile_cases(vocab_guess):
    deep = "[" * 5000 + "]" * 5000
    msgs = [{"role": "user", "content": "hi"}]
    chat, cmpl = "/v1/chat/completions", "/v1/completions"
    cases = [
        (chat, {"messages": msgs, "temperature": -1}),
        (chat, {"messages": msgs, "top_p": 0}),
        (chat, {"messages": msgs, "n": 100000}),
        (chat, {"messages": msgs, "max_tokens": -5}),
        (chat, {"messages": msgs, "max_tokens": 2 ** 53}, "maximum context length"),
        (chat, {"messages": msgs, "max_tokens": 9223372036854775807}, "maximum context length"),
        (chat, {"messages": msgs, "max_tokens": 1e300}),
        (chat, {"messages": msgs, "logprobs": True, "top_logprobs": 1000}),
        (chat, {"messages": msgs, "stop": [f"s{i}" for i in range(1000)]}),
        (chat, {"messages": "not a list"}),
        (chat, {"messages": []}),
        (chat, {"messages": msgs, "model": "no-such-model"}),
        (chat, {"messages": msgs, "stream_options": {"include_usage": True}}),
        (chat, {"messages": msgs, "repetition_penalty": 0}),
        (chat, {"messages": msgs, "min_tokens": 10, "max_tokens": 2}),
        (chat, {"messages": msgs, "logit_bias": {"x": 5}}),
        (chat, {"messages": msgs, "logit_bias": {str(vocab_guess): 5}}, "out of vocabulary"),
        (chat, {"messages": msgs, "allowed_token_ids": []}),
        (cmpl, {"prompt": "x", "cache_salt": ""}),
        (cmpl, {"prompt": "x", "use_beam_search": True}),
        (chat, {"messages": msgs, "tools": [{"type": "function"}]}),
        (chat, {"messages": msgs, "n": 2, "best_of": 3}),
        (chat, {"messages": msgs, "seed": "x"}),
        (cmpl, {"prompt": "x", "logprobs": 1000}),
        (cmpl, {"prompt": [vocab_guess]}),
        (cmpl, {"prompt": [[]]}),
        (cmpl, {"prompt": [-1, 2]}),
        (cmpl, {"prompt": "x", "suffix": "y"}),
        (cmpl, {"prompt": "x" * (1 << 20)}, "maximum context length"),
        (cmpl, {"prompt": "x", "stop": [""]}),
        ("/tokenize", {"messages": msgs, "add_generation_prompt": True, "continue_final_message": True}),
        ("/detokenize", {"tokens": [vocab_guess]}),
    ]
    specs = []
    for c in cases:
        spec = {"path": c[0], "body": c[1], "expect": "refuse"}
        if len(c) > 2:
            spec["must_mention"] = c[2]
        specs.append(spec)
    specs += [
        # An unknown role is the chat template's to judge, as in vLLM: Qwen3's
        # template drops the message (and the request runs), Qwen3.5's raises.
        {"path": chat, "body": {"messages": [{"role": "wizard", "content": "x"}], "max_tokens": 16}, "expect": "any"},
        {"path": cmpl, "raw": '{"prompt": "x", ', "expect": "refuse"},
        {"path": cmpl, "raw": '{"prompt": ' + deep + "}", "expect": "refuse"},
        {"path": cmpl, "raw": "[1, 2]", "expect": "refuse"},
        {"path": cmpl, "raw": '{"prompt": "x"}', "content_type": "text/plain", "expect": "refuse"},
    ]
    return specs


def pick_scenario(ctx, r):
    o = ctx["opt"]
    x = r.random()
    max_tokens = r.randint(1, o.max_tokens)
    n = r.randint(2, 4) if r.random() < 0.25 else 1
    messages = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": text(r, r.randint(3, 40))}]
    if x < 0.30:
        body = {"messages": messages, "max_tokens": max_tokens, "n": n, "stream": True, "temperature": r.random(),
                "seed": r.randint(0, 10 ** 6), "stream_options": {"include_usage": True}}
        if r.random() < 0.2:
            body.update(logprobs=True, top_logprobs=2)
        return ("chat stream n>1" if n > 1 else "chat stream"), {
            "path": "/v1/chat/completions", "stream": True, "choices": n, "body": body}
    if x < 0.50:
        body = {"messages": messages, "max_tokens": max_tokens, "n": n, "temperature": 0.7, "top_p": 0.9}
        if r.random() < 0.3:
            body["stop"] = ["\n\n", " the"]
        return ("chat n>1" if n > 1 else "chat"), {"path": "/v1/chat/completions", "choices": n, "body": body}
    if x < 0.62:
        stream = r.random() < 0.5
        body = {"prompt": text(r, r.randint(2, 60)), "max_tokens": max_tokens, "n": n, "stream": stream,
                "ignore_eos": r.random() < 0.5}
        if r.random() < 0.3:
            body["echo"] = True
        if r.random() < 0.3:
            body["logprobs"] = 3  # with echo: the prompt is scored too
        return ("completion stream" if stream else "completion"), {
            "path": "/v1/completions", "stream": stream, "choices": n, "body": body}
    if x < 0.74:
        if r.random() < 0.5:
            path, body = "/v1/chat/completions", {"messages": messages}
        else:
            path, body = "/v1/completions", {"prompt": text(r, 20)}
        body.update(max_tokens=o.max_tokens * 2, n=n, stream=True, ignore_eos=True)
        return "dropped mid-stream", {"path": path, "stream": True, "choices": n, "body": body,
                                      "drop_after_events": r.randint(1, 6)}
    if x < 0.80:
        return "dropped while waiting", {"path": "/v1/chat/completions", "choices": n,
                                         "drop_after_s": r.uniform(0.005, 0.4),
                                         "body": {"messages": messages, "max_tokens": o.max_tokens * 2, "n": n,
                                                  "ignore_eos": True}}
    if x < 0.92:
        return "hostile", r.choice(ctx["hostile"])
    # At the context limit: exactly fitting (answered) or one token over (refused).
    over = r.random() < 0.5
    out_tokens = r.randint(1, 4)
    ids = ctx["token_ids"]
    prompt = [ids[i % len(ids)] for i in range(ctx["max_model_len"] - out_tokens)]
    spec = {"path": "/v1/completions", "expect": "refuse" if over else "ok",
            "body": {"prompt": prompt, "max_tokens": out_tokens + (1 if over else 0), "ignore_eos": True}}
    if over:
        spec["must_mention"] = "maximum context length"
    return ("context limit + 1" if over else "context limit"), spec


def client(ctx, index, end_time):
    r = random.Random(ctx["opt"].seed * 1000 + index)
    time.sleep(r.uniform(0, 1))
    while time.time() < end_time:
        kind, spec = pick_scenario(ctx, r)
        t0 = time.time()
        with ctx["lock"]:
            ctx["in_flight"][index] = (kind, t0)
        try:
            result = request(ctx["port"], spec, ctx["opt"].request_timeout)
        except Failed as e:
            result = "failed"
            with ctx["lock"]:
                if len(ctx["failures"]) < 20:
                    ctx["failures"].append(f"{kind}: {e}")
        with ctx["lock"]:
            del ctx["in_flight"][index]
            c = ctx["counts"].setdefault(kind, {"sent": 0, "ok": 0, "refused": 0, "dropped": 0, "failed": 0,
                                                "ms": []})
            c["sent"] += 1
            c[result] += 1
            if result == "ok":
                c["ms"].append((time.time() - t0) * 1000)


def percentile(xs, q):
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


# ---- the run -----------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=60, help="seconds of load")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", type=float, default=0.25, help="share of the load counted as warm-up")
    ap.add_argument("--max-tokens", type=int, default=64, help="largest max_tokens of ordinary requests")
    ap.add_argument("--request-timeout", type=float, default=600)
    ap.add_argument("--drain-streams", type=int, default=4)
    ap.add_argument("--drain-max-tokens", type=int, default=32)
    ap.add_argument("--rss-slack-mib", type=float, default=64)
    ap.add_argument("--rss-slack-pct", type=float, default=5)
    ap.add_argument("--gpu-slack-mib", type=float, default=64)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- the hyllm serve command")
    opt = ap.parse_args()
    command = opt.command[1:] if opt.command[:1] == ["--"] else opt.command
    if not command:
        ap.error("give the server command after --")

    t_start = time.time()
    server = Server(command)
    pid, port = server.proc.pid, server.port
    models = json.loads(get(port, "/v1/models")[1])
    tok = json.loads(post_json(port, "/tokenize", {"prompt": text(random.Random(7), 64)})[1])
    ctx = {"opt": opt, "port": port, "max_model_len": models["data"][0]["max_model_len"], "token_ids": tok["tokens"],
           "counts": {}, "failures": [], "in_flight": {}, "lock": threading.Lock()}
    ctx["hostile"] = hostile_cases(max(tok["tokens"]) + 10 ** 7)
    print(f"soak: {opt.clients} clients for {opt.duration:.0f} s against {models['data'][0]['id']} "
          f"(max_model_len {ctx['max_model_len']}), server pid {pid}, ready in {time.time() - t_start:.1f} s",
          flush=True)

    samples = []
    load_start = time.time()
    load_end = load_start + opt.duration
    warm_end = load_start + opt.duration * opt.warmup
    stop_sampling = threading.Event()

    def progress():  # a line every 30 s, so that a run cut short still shows where it was
        with ctx["lock"]:
            sent = sum(c["sent"] for c in ctx["counts"].values())
            oldest = sorted(ctx["in_flight"].values(), key=lambda kt: kt[1])[:3]
        try:
            m = metrics(port)
            engine = f"running {m['running']:.0f}, waiting {m['waiting']:.0f}, graphs {m['graphs'] or 0:.0f}"
        except Exception as e:  # noqa: BLE001 - progress only
            engine = f"/metrics: {e}"
        late = ", ".join(f"{k} for {time.time() - t0:.0f} s" for k, t0 in oldest)
        memory = f"RSS {samples[-1]['rss'] / MiB:.0f} MiB" if samples else "RSS ?"
        if samples and samples[-1]["gpu"] is not None:
            memory += f", GPU {samples[-1]['gpu'] / MiB:.0f} MiB"
        print(f"soak: {time.time() - load_start:.0f} s: {sent} requests finished, {engine}, {memory}; oldest in flight: "
              f"{late or 'none'}", flush=True)

    latest = {"graphs": None}  # the scraper's last reading of the recorded-graph count

    def sampler():
        next_progress = load_start + 30
        while not stop_sampling.is_set():
            samples.append({"phase": "warmup" if time.time() < warm_end else "load", "rss": rss_bytes(pid),
                            "gpu": gpu_bytes(pid), "graphs": latest["graphs"]})
            if time.time() >= next_progress:
                progress()
                next_progress += 30
            stop_sampling.wait(2)

    def scraper():  # what Prometheus would do while the load runs
        while time.time() < load_end:
            try:
                latest["graphs"] = metrics(port)["graphs"]
            except Exception as e:  # noqa: BLE001 - any failure is a finding
                with ctx["lock"]:
                    ctx["failures"].append(f"/metrics during load: {e}")
            time.sleep(1)

    threads = [threading.Thread(target=sampler), threading.Thread(target=scraper)]
    threads += [threading.Thread(target=client, args=(ctx, i, load_end)) for i in range(opt.clients)]
    for t in threads:
        t.start()
    head_status = raw_status(port, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n")
    for t in threads[1:]:
        t.join()
    stop_sampling.set()
    threads[0].join()

    # Idle: every request has finished; the engine must have let go of everything.
    after = {}
    deadline = time.time() + 60
    while time.time() < deadline:
        after = metrics(port)
        if after["running"] == 0 and after["waiting"] == 0 and after["kv"] == 0 and not after["state"]:
            break
        time.sleep(0.5)
    time.sleep(1)
    samples.append({"phase": "idle", "rss": rss_bytes(pid), "gpu": gpu_bytes(pid), "graphs": after.get("graphs")})
    health = get(port, "/health")[0]

    # SIGTERM while streams are in flight.
    drain_results = []
    streaming = []
    drain_lock = threading.Lock()

    def drain_stream(i):
        spec = {"path": "/v1/completions", "stream": True, "choices": 1,
                "on_first_event": lambda: streaming.append(i),
                "body": {"prompt": f"drain {i}", "max_tokens": opt.drain_max_tokens, "ignore_eos": True,
                         "stream": True}}
        try:
            res = request(port, spec, opt.request_timeout)
        except Failed as e:
            res = f"failed: {e}"
        with drain_lock:
            drain_results.append(res)

    drains = [threading.Thread(target=drain_stream, args=(i,)) for i in range(opt.drain_streams)]
    for t in drains:
        t.start()
    deadline = time.time() + 120
    while len(streaming) + len(drain_results) < opt.drain_streams and time.time() < deadline:
        time.sleep(0.002)
    with drain_lock:
        running_at_signal = len(streaming) - len(drain_results)
    t_sig = time.time()
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.1)
    try:
        status = post_json(port, "/v1/completions", {"prompt": "late", "max_tokens": 2}, timeout=30)[0]
        late = "503" if status == 503 else f"HTTP {status}"
    except OSError:
        late = "connection refused"
    for t in drains:
        t.join()
    try:
        code = server.proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        code = "timeout"
    drain_seconds = time.time() - t_sig

    # ---- checks and the tables -------------------------------------------------
    total = {k: 0 for k in ("sent", "ok", "refused", "dropped", "failed")}
    for c in ctx["counts"].values():
        for k in total:
            total[k] += c[k]
    warm = [s for s in samples if s["phase"] == "warmup"][-3:] or samples[:1]
    idle = samples[-1]
    warm_rss = max(s["rss"] for s in warm)
    peak_rss = max(s["rss"] for s in samples)
    rss_growth = idle["rss"] - warm_rss
    rss_ok = rss_growth <= max(opt.rss_slack_mib * MiB, warm_rss * opt.rss_slack_pct / 100)
    have_gpu = idle["gpu"] is not None
    warm_gpu = max(s["gpu"] or 0 for s in warm) if have_gpu else None
    gpu_ok = not have_gpu or idle["gpu"] - warm_gpu <= opt.gpu_slack_mib * MiB
    drain_ok = (len(drain_results) == opt.drain_streams and all(d == "ok" for d in drain_results)
                and running_at_signal > 0 and late != "HTTP 200" and code == 0)
    # Recorded decode graphs hold host and device memory and grow in number
    # until every step shape has been seen: the detail lines say how many were
    # added after warm-up and the memory per added graph, to tell that growth
    # from a leak (a leak grows with no new graphs).
    warm_graphs = max((s.get("graphs") or 0) for s in warm)
    new_graphs = (idle.get("graphs") or 0) - warm_graphs
    per_graph = (lambda growth: f"; {new_graphs:.0f} graphs recorded after warm-up, "
                 f"{growth / MiB / new_graphs:.2f} MiB each" if new_graphs > 0 else "; no graphs recorded after warm-up")
    idle_ok = (after.get("running") == 0 and after.get("waiting") == 0 and after.get("kv") == 0
               and after.get("state") == 0)
    checks = [
        ("requests answered or cleanly refused",
         f"{total['sent']} sent: {total['ok']} answered, {total['refused']} refused, {total['dropped']} dropped by "
         f"the client, {total['failed']} failed", total["failed"] == 0 and total["ok"] > 0),
        ("request head over the cap", f"HTTP {head_status}", head_status == 431),
        ("healthy after the load", f"/health {health}", health == 200),
        ("engine idle after the load", f"running {after.get('running')}, waiting {after.get('waiting')}, "
         f"KV usage {after.get('kv')}, state-slot usage {after.get('state')}", idle_ok),
        ("host RSS flat after warm-up", f"{warm_rss / MiB:.0f} MiB after warm-up, peak {peak_rss / MiB:.0f}, "
         f"{idle['rss'] / MiB:.0f} MiB at the end ({rss_growth / MiB:+.1f} MiB){per_graph(rss_growth)}", rss_ok),
        ("GPU memory flat after warm-up", f"{warm_gpu / MiB:.0f} MiB after warm-up, {idle['gpu'] / MiB:.0f} MiB at "
         f"the end{per_graph(idle['gpu'] - warm_gpu)}" if have_gpu else "no GPU", gpu_ok),
        ("SIGTERM drain", f"{running_at_signal} streams running at the signal; "
         f"{sum(d == 'ok' for d in drain_results)}/{opt.drain_streams} finished; new request: {late}; "
         f"exit {code} after {drain_seconds:.1f} s", drain_ok),
    ]

    print("\n| kind | sent | answered | refused | dropped | failed | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for kind, c in sorted(ctx["counts"].items()):
        print(f"| {kind} | {c['sent']} | {c['ok']} | {c['refused']} | {c['dropped']} | {c['failed']} | "
              f"{percentile(c['ms'], 0.5):.0f} | {percentile(c['ms'], 0.99):.0f} |")
    if ctx["failures"]:
        print("\nfirst failures:")
        for f in ctx["failures"]:
            print(f"  {f}")
    if any(d != "ok" for d in drain_results):
        print(f"\ndrain streams: {'; '.join(drain_results)}")
    print("\n| check | measured | result |")
    print("|---|---|---|")
    for name, value, ok in checks:
        print(f"| {name} | {value} | {'PASS' if ok else 'FAIL'} |")
    passed = sum(ok for _, _, ok in checks)
    print(f"\nsoak: {passed} passed, {len(checks) - passed} failed")
    if passed != len(checks):
        print("\nserver log (tail):\n" + server.tail())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
