#!/usr/bin/env bash
# Copies the built binaries into .carry/bin (ignored) for a GPU host that has no build tools'
# headers; scripts/device_run.sh runs them there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .carry/bin
cp build/ksol build/ksol-worker .carry/bin/
# The test binary too, for the GPU tier on the host:
#   KSOL_TEST_BIN_DIR=$PWD/.carry/bin scripts/device_run.sh .carry/bin/ksol_tests --gtest_filter='Gpu.*'
if [ -x build/ksol_tests ]; then cp build/ksol_tests .carry/bin/; fi
