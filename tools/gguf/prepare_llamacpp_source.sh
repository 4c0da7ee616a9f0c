#!/usr/bin/env bash
# Unpacks the pinned llama.cpp source for a build, as bench/peers/llamacpp.json
# pins it: the archive's sha256 must match source.archive.sha256, each patch of
# source.patches its sha256; prints the source directory. Used by
# tools/gguf/cpu_check.sh and tools/cuda/llamacpp_compare.sh.
#
#   tools/gguf/prepare_llamacpp_source.sh ARCHIVE(.tar or .tar.xz) DEST_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ARCHIVE=$1
DEST=$2
PEER=$ROOT/bench/peers/llamacpp.json
field() { python3 -c "import json,sys; v=json.load(open('$PEER'))
for k in sys.argv[1].split('.'): v=v[k]
print(v)" "$1"; }
mkdir -p "$DEST"
tar_file=$DEST/$(field source.archive.file)
case $ARCHIVE in *.xz) xz -dc "$ARCHIVE" > "$tar_file" ;; *) cp "$ARCHIVE" "$tar_file" ;; esac
got=$(sha256sum "$tar_file" | cut -d' ' -f1)
if [[ $got != "$(field source.archive.sha256)" ]]; then
  echo "llama.cpp archive sha256 $got differs from the pinned $(field source.archive.sha256): refusing to build" >&2
  exit 1
fi
rm -rf "$DEST/src" && mkdir -p "$DEST/src" && tar -xf "$tar_file" -C "$DEST/src" && rm -f "$tar_file"
src=$(ls -d "$DEST"/src/*/ | head -1)
python3 -c "import json; [print(p['file'], p['sha256']) for p in json.load(open('$PEER'))['source'].get('patches', [])]" |
  while read -r file sha; do
    [[ $(sha256sum "$ROOT/$file" | cut -d' ' -f1) == "$sha" ]] || { echo "$file: sha256 differs from the pin" >&2; exit 1; }
    patch -s -p1 -d "$src" < "$ROOT/$file" >&2
  done
echo "${src%/}"
