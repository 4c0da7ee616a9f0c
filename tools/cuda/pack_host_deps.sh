#!/usr/bin/env bash
# Packs this (Debian 12) machine's build dependencies of the CUDA targets into
# one archive that the GPU machine unpacks at /tmp/hyllm-deps: its image has
# nvcc, CMake and ninja but none of the Debian -dev packages. Headers, shared
# libraries, CMake package files, pkg-config files (their /usr paths rewritten
# to the unpack location) and pkgconf itself; OpenSSL, brotli and zlib too,
# which cpp-httplib needs, so that the `hyllm` app builds there as well.
#   tools/cuda/pack_host_deps.sh [OUT_ARCHIVE]   (default .carry/cuda/deps.tar.xz)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT_ARCHIVE=${1:-$ROOT/.carry/cuda/deps.tar.xz}
PREFIX=/tmp/hyllm-deps
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT

PACKAGES="libcli11-dev libcpp-httplib-dev libcpp-httplib0.11 libfmt-dev libfmt9 libgmock-dev libgtest-dev
  libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0 libpcre2-dev libpcre2-8-0
  libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libspdlog-dev libspdlog1.10 libutf8proc-dev libutf8proc2
  libxxhash-dev libxxhash0 nlohmann-json3-dev pkgconf pkgconf-bin libpkgconf3 libgfortran5 libquadmath0
  libssl-dev libssl3 libbrotli-dev libbrotli1 zlib1g-dev zlib1g"

for pkg in $PACKAGES; do
  dpkg -L "$pkg" | while read -r f; do
    [[ -f "$f" || -L "$f" ]] || continue
    case "$f" in
      /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/* | /usr/src/*) continue ;;
      *openblas*.a | */liblapack* | */libblas.a | */libcrypto.a | */libssl.a) continue ;;
    esac
    dst=$f
    [[ "$f" == /lib/* ]] && dst=/usr$f  # merged /usr: only usr/ is packed
    mkdir -p "$STAGE$(dirname "$dst")"
    cp -a "$f" "$STAGE$dst"
  done
done
# Debian's alternatives links point outside the tree: replace them by their targets.
find "$STAGE" -type l | while read -r l; do
  target=$(readlink "$l")
  if [[ "$target" == /* ]]; then
    rm "$l"
    cp -L "$target" "$l"
  fi
done
find "$STAGE" -name '*.pc' -exec sed -i "s#/usr#$PREFIX/usr#g" {} +
mkdir -p "$(dirname "$OUT_ARCHIVE")"
tar -C "$STAGE" -cf - usr | xz -T2 -6 > "$OUT_ARCHIVE"
ls -la "$OUT_ARCHIVE"
