#!/usr/bin/env bash
# Copies the built binaries into .carry/bin (ignored) for a GPU host that has no build tools'
# headers; scripts/device_run.sh runs them there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .carry/bin
cp build/ksol build/ksol-worker .carry/bin/
# ksol-mpi (ksol --mpi) links this machine's libmpi: the GPU host needs an MPI of the same ABI
# (OpenMPI 4.x or 5.x: libmpi.so.40) and runs it under that MPI's own mpirun.
if [ -x build/ksol-mpi ]; then cp build/ksol-mpi .carry/bin/; fi
# The test binary too, for the GPU tier on the host:
#   KSOL_TEST_BIN_DIR=$PWD/.carry/bin scripts/device_run.sh .carry/bin/ksol_tests --gtest_filter='Gpu.*'
if [ -x build/ksol_tests ]; then cp build/ksol_tests .carry/bin/; fi
