#!/bin/bash
# Trains the MTP head of the embedded model (models/hyllm-tiny) on a GPU
# machine, as run_on_device.sh trains the model: expects data.tar.xz (the
# output of prepare_corpus.py, as "data/") next to this script and writes
# log_mtp.txt, mtp_report.json and hyllm-tiny/ (the model with mtp.* added)
# into $OUT. Extra arguments go to train_mtp.py (--smoke checks the pipeline
# in seconds first).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${OUT:?set OUT to the directory for the results}"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
work=/tmp/hyllm-mtp-work
rm -rf "$work"
mkdir -p "$work"
tar -xJf "$here/data.tar.xz" -C "$work"
python3 "$here/train_mtp.py" --model "$here/../../models/hyllm-tiny" --data "$work/data" --out "$OUT" "$@" 2>&1 \
    | grep --line-buffered -v "fast path is not available" | tee "$OUT/log_mtp.txt"
