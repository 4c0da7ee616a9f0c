#!/usr/bin/env bash
# Installs the Debian 12 packages hyllm builds and tests with. Idempotent: it
# calls apt only for what is missing. Run as root (or with sudo).
#   install-deps.sh          everything: building, the tests and their browser
#   install-deps.sh build    only what building and running `hyllm` needs
set -euo pipefail

build_packages=(
  build-essential cmake ninja-build pkg-config git
  libcpp-httplib-dev libssl-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev libcli11-dev
  libfmt-dev libspdlog-dev libxxhash-dev libopenblas-dev
  curl
)
# The test suite: gtest and Google Benchmark, node and npm for the e2e
# drivers, headless Chromium (with its driver) for the chat page test.
test_packages=(
  libgtest-dev libgmock-dev libbenchmark-dev liblzma-dev
  clang-14 libclang-rt-14-dev llvm-14  # sanitizer and libFuzzer build (scripts/test-sanitizers.sh)
  python3                              # the soak driver (tools/soak/soak.py)
  nodejs npm chromium chromium-driver
)

case "${1:-all}" in
  build) packages=("${build_packages[@]}") ;;
  all) packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  *) echo "usage: $0 [build|all]" >&2; exit 2 ;;
esac

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
