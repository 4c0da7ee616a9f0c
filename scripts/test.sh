#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test,
# then the sanitizer build's tests and the fuzz targets (scripts/test-sanitizers.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/npm-deps.sh
bash scripts/build.sh
(cd build && ctest --output-on-failure -j "${HYLLM_TEST_JOBS:-$(nproc)}" --timeout 1800)
# The same tests under ASan + UBSan, and the fuzz targets (HYLLM_SANITIZERS=0 skips them).
if [[ ${HYLLM_SANITIZERS:-1} != 0 ]]; then
  bash scripts/test-sanitizers.sh
fi
