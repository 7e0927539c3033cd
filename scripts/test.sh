#!/usr/bin/env bash
# The fast test tier: unit, golden, errors, hacks (compiled and checked up to the launch),
# e2e against a scripted worker. GPU cases skip with their reason where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
export KSOL_CACHE_DIR=${KSOL_CACHE_DIR:-$PWD/build/test-cache}
cmake --build build -j "$(nproc)" >/dev/null
cd build && ctest --output-on-failure -j "$(nproc)" "$@"
