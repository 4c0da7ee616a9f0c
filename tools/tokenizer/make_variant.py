#!/usr/bin/env python3
"""Builds a test tokenizer variant from a real tokenizer.json, as described by
tests/data/tokenizer/variants.json (the C++ tests apply the same patch):
top-level fields replaced, added tokens appended.

"qwen35" is the Qwen3.5-style tokenizer: Qwen3.5's pre-tokenizer regex
(letter runs admit combining marks \\p{M}) and NFC on Qwen3's vocabulary,
since the Qwen3.5 vocabulary itself is not available here.

usage: make_variant.py VARIANT BASE_TOKENIZER_JSON OUT_JSON [VARIANTS_JSON]
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_VARIANTS = os.path.join(ROOT, "tests/data/tokenizer/variants.json")


def load_variants(path=None):
    return json.load(open(path or DEFAULT_VARIANTS, encoding="utf-8"))


def make_variant(tokenizer, variant):
    for key, value in variant["set"].items():
        tokenizer[key] = value
    tokenizer["added_tokens"] = list(tokenizer.get("added_tokens") or []) + list(variant.get("add_tokens", []))
    return tokenizer


if __name__ == "__main__":
    name, src, dst = sys.argv[1], sys.argv[2], sys.argv[3]
    variants = load_variants(sys.argv[4] if len(sys.argv) > 4 else None)
    t = make_variant(json.load(open(src, encoding="utf-8")), variants[name])
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(t, f, ensure_ascii=False)
