#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test,
# then a short run of the fuzz targets on the sanitizer build (scripts/test-sanitizers.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/npm-deps.sh
bash scripts/build.sh
(cd build && ctest --output-on-failure -j "${HYLLM_TEST_JOBS:-$(nproc)}" --timeout 1800)
# A short run of every libFuzzer target, under ASan + UBSan (HYLLM_TEST_FUZZ=0 skips it).
if [[ ${HYLLM_TEST_FUZZ:-1} != 0 ]]; then
  bash scripts/test-sanitizers.sh --fuzz-only
fi
