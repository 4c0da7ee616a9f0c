#!/usr/bin/env python3
"""Goldens and speed with HF tokenizers (the authority), run on the GPU machine.

For every tokenizer given as NAME=PATH (tokenizer.json) it encodes every
corpus document (add_special_tokens=False), and the edge-case documents also
with split_special_tokens (encode_special_tokens) and with
add_special_tokens=True; it decodes windows of those ids (cut anywhere, so
inside UTF-8 sequences too) with and without skip_special_tokens. Output:
OUT_DIR/golden_NAME.json.xz.

With --speed-bin it also times HF encode of one big text (one thread) and
runs hyllm's static speed binary on the same text, printing MB/s for both.

usage: hf_goldens.py --corpus corpus.jsonl.xz --out OUT_DIR [--speed-bin BIN] NAME=PATH...
"""
import argparse
import json
import lzma
import os
import subprocess
import sys
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["RAYON_RS_NUM_CPUS"] = "1"

import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_variant import load_variants, make_variant  # noqa: E402


def load_tokenizer(spec, variants_path):
    """PATH, or variant:NAME:PATH (a variants.json patch applied to PATH)."""
    if spec.startswith("variant:"):
        _, name, path = spec.split(":", 2)
        data = make_variant(json.load(open(path, encoding="utf-8")), load_variants(variants_path)[name])
        text = json.dumps(data, ensure_ascii=False)
        return Tokenizer.from_str(text), text
    text = open(spec, encoding="utf-8").read()
    return Tokenizer.from_str(text), text


def decode_windows(ids, k):
    """A few id windows with varied cut points (deterministic)."""
    n = len(ids)
    if n == 0:
        return [[]]
    out = [ids[: min(n, 40)]]
    for j in range(3):
        start = (k * 7 + j * 13) % n
        out.append(ids[start: start + 1 + (k + j * 5) % 23])
    return out


def goldens(name, tok, docs, sample):
    cases, decodes = [], []
    for k, d in enumerate(docs):
        if sample and not d["edge"] and k % 10:
            continue
        text = d["text"]
        tok.encode_special_tokens = False
        ids = tok.encode(text, add_special_tokens=False).ids
        cases.append({"doc": k, "add_special": False, "split_special": False, "ids": ids})
        if d["edge"]:
            with_special = tok.encode(text, add_special_tokens=True).ids
            cases.append({"doc": k, "add_special": True, "split_special": False, "ids": with_special})
            tok.encode_special_tokens = True
            split = tok.encode(text, add_special_tokens=False).ids
            tok.encode_special_tokens = False
            cases.append({"doc": k, "add_special": False, "split_special": True, "ids": split})
            decodes.append({"ids": ids, "skip_special": True, "text": tok.decode(ids, skip_special_tokens=True)})
        if k % 3 == 0 or d["edge"]:
            for w in decode_windows(ids, k):
                decodes.append({"ids": w, "skip_special": False, "text": tok.decode(w, skip_special_tokens=False)})
    # Single tokens: every byte token and the added tokens, alone.
    for i in list(range(0, 400)) + list(range(tok.get_vocab_size(with_added_tokens=False), tok.get_vocab_size())):
        decodes.append({"ids": [i], "skip_special": False, "text": tok.decode([i], skip_special_tokens=False)})
    return {"tokenizer": name, "hf_tokenizers_version": tokenizers.__version__,
            "vocab_size": tok.get_vocab_size(with_added_tokens=True), "cases": cases, "decodes": decodes}


DOC_SEPARATOR = "\x1e"  # speed texts encoded document by document are joined with this


def hf_speed(tok, text, repeats):
    tok.encode_special_tokens = False
    pieces = text.split(DOC_SEPARATOR)
    best, n = 1e30, 0
    for r in range(repeats + 1):  # the first run warms the BPE cache
        t = time.perf_counter()
        n = sum(len(tok.encode(p, add_special_tokens=False).ids) for p in pieces)
        dt = time.perf_counter() - t
        if r > 0:
            best = min(best, dt)
    size = sum(len(p.encode("utf-8")) for p in pieces)
    return {"bytes": size, "tokens": n, "best_s": best, "mb_per_s": size / best / 1e6}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--speed-bin")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--variants", help="variants.json (default: next to the corpus)")
    ap.add_argument("--sample", action="append", default=[],
                    help="tokenizer names encoded on edge cases and every 10th document only")
    ap.add_argument("--no-speed", action="append", default=[], help="tokenizer names not timed")
    ap.add_argument("--no-golden", action="append", default=[], help="tokenizer names only timed")
    ap.add_argument("tokenizers", nargs="+")
    args = ap.parse_args()
    docs = [json.loads(line) for line in lzma.open(args.corpus, "rt", encoding="utf-8") if line.strip()]
    os.makedirs(args.out, exist_ok=True)
    texts = {
        "mixed": "".join(d["text"] + "\n" for d in docs if not d["edge"]),
        "english": "".join(d["text"] + "\n" for d in docs if d["name"].startswith("python-docs")),
        "per-doc": DOC_SEPARATOR.join(d["text"] for d in docs if not d["edge"]),
    }
    for name, t in texts.items():
        open(os.path.join(args.out, f"speed_{name}.txt"), "w", encoding="utf-8").write(t)
    summary = []
    for spec in args.tokenizers:
        name, path = spec.split("=", 1)
        t0 = time.perf_counter()
        tok, json_text = load_tokenizer(path, args.variants or os.path.join(os.path.dirname(args.corpus), "variants.json"))
        hf_load = time.perf_counter() - t0
        if name not in args.no_golden:
            g = goldens(name, tok, docs, name in args.sample)
            data = lzma.compress(json.dumps(g, ensure_ascii=False, separators=(",", ":")).encode("utf-8"),
                                 preset=9 | lzma.PRESET_EXTREME)
            open(os.path.join(args.out, f"golden_{name}.json.xz"), "wb").write(data)
            print(f"{name}: {len(g['cases'])} cases, {len(g['decodes'])} decodes, {len(data) / 1e3:.0f} KB", flush=True)
        if args.speed_bin and name not in args.no_speed:
            json_path = os.path.join(args.out, f"{name}.tokenizer.json")
            open(json_path, "w", encoding="utf-8").write(json_text)
            for tname in texts:
                text_path = os.path.join(args.out, f"speed_{tname}.txt")
                hf = hf_speed(tok, texts[tname], args.repeats)
                mode = ["docs"] if tname == "per-doc" else []
                ours = json.loads(subprocess.run([args.speed_bin, json_path, text_path, str(args.repeats)] + mode,
                                                 check=True, capture_output=True, text=True).stdout)
                if ours["tokens"] != hf["tokens"]:
                    print(f"WARNING {name}/{tname}: token counts differ: hyllm {ours['tokens']} HF {hf['tokens']}")
                summary.append(f"{name:8s} {tname:8s} {hf['bytes'] / 1e6:5.2f} MB  HF tokenizers "
                               f"{hf['mb_per_s']:6.2f} MB/s  hyllm {ours['mb_per_s']:6.2f} MB/s  "
                               f"(load HF {hf_load:.3f} s, hyllm {ours['load_s']:.3f} s)")
            os.remove(json_path)
    for name in texts:
        os.remove(os.path.join(args.out, f"speed_{name}.txt"))
    print(f"tokenizers {tokenizers.__version__}, single thread, best of {args.repeats} after a warm-up run")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
