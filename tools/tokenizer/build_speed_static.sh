#!/usr/bin/env bash
# Builds tools/tokenizer/speed_main.cpp with hyllm's tokenizer sources into a
# static binary (no shared libraries needed where it runs): OUT_PATH.
# Same optimisation flags as the CMake Release build (-O3 -DNDEBUG).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/build/tokenizer_speed}"
g++ -std=c++20 -O3 -DNDEBUG -DFMT_HEADER_ONLY -static -I "$root/src" \
  "$root/tools/tokenizer/speed_main.cpp" "$root"/src/text/tokenizer/*.cpp "$root/src/util/status.cpp" \
  -lpcre2-8 -lutf8proc -lxxhash -o "$out"
echo "$out"
