#!/usr/bin/env bash
# Installs the Debian 12 packages hyllm builds and tests with. Idempotent: it
# calls apt only for what is missing. Run as root (or with sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libcpp-httplib-dev libssl-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev libcli11-dev
  libfmt-dev libspdlog-dev libxxhash-dev libopenblas-dev
  libgtest-dev libgmock-dev libbenchmark-dev liblzma-dev
  clang-14 libclang-rt-14-dev llvm-14  # sanitizer and libFuzzer build (scripts/test-sanitizers.sh)
  python3                              # the soak driver (tools/soak/soak.py)
  nodejs npm curl
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm may come from elsewhere than Debian; only their commands matter.
if command -v node >/dev/null && command -v npm >/dev/null; then
  filtered=()
  for p in "${missing[@]}"; do [[ $p == nodejs || $p == npm ]] || filtered+=("$p"); done
  missing=("${filtered[@]+"${filtered[@]}"}")
fi

if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
