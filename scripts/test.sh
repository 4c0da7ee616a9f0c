#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/npm-deps.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j "${HYLLM_TEST_JOBS:-$(nproc)}" --timeout 1800
