#!/usr/bin/env bash
# Quick start: installs what is missing, builds, and starts `hyllm serve` on the
# embedded default model. Extra arguments go to `hyllm serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
exec build/hyllm serve "$@"
