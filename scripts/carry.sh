#!/usr/bin/env bash
# Copies the built binaries into .carry/bin (ignored) for a GPU host that has no build tools'
# headers; scripts/device_run.sh runs them there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .carry/bin
cp build/ksol build/ksol-worker .carry/bin/
