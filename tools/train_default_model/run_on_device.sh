#!/bin/bash
# Trains and exports hyllm-tiny on a GPU machine (torch, transformers 5.17,
# tokenizers 0.23). Expects data.tar.xz (the output of prepare_corpus.py, as
# "data/") next to this script and writes log.txt, summary.json and
# hyllm-tiny.tar.part* into $OUT. Extra arguments go to train.py.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${OUT:?set OUT to the directory for the results}"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
work=/tmp/hyllm-tiny-work
rm -rf "$work"
mkdir -p "$work"
tar -xJf "$here/data.tar.xz" -C "$work"
python3 "$here/train.py" --data "$work/data" --work "$work" --out "$OUT" "$@" 2>&1 \
    | grep --line-buffered -v "fast path is not available" | tee "$OUT/log.txt"
