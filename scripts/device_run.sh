#!/usr/bin/env bash
# Runs ksol on a GPU host from binaries built elsewhere and carried in .carry/ (see
# docs/GPU.md): sets KSOL_HOME to this tree and a local compile cache, then runs "$@".
set -uo pipefail
cd "$(dirname "$0")/.."
export KSOL_HOME=$PWD KSOL_CACHE_DIR=${KSOL_CACHE_DIR:-/tmp/ksol-cache}
export PATH=$PWD/.carry/bin:/usr/local/cuda/bin:$PATH
"$@"
