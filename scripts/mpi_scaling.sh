#!/usr/bin/env bash
# The CPU simulation of ksol bench over MPI ranks (docs/results/2026-12-04-cpu-mpi-scaling.txt):
# mpirun -np R for R in RANKS, every rank with one scripted worker (tests/e2e/scripted_worker.py)
# that takes SLEEP seconds per evaluation (a GPU's time) and answers at once otherwise. Prints,
# per R, the evaluations (one baseline at all its sizes = one job), the wall time of rank 0's
# evaluation phase and the jobs per minute, beside R x the one-worker rate. With SLEEP=0 the rate is
# rank 0's own ceiling: what it spends per evaluation (store rows, JSON, the MPI hop).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/ksol}
TASKS=${TASKS:-relu_f32,copy_f32,axpy_f32,gelu_f32,sigmoid_f32,tanh_f32,leaky_relu_f32,broadcast_add_f32,silu_mul_bf16,softmax_f32}
SLEEP=${SLEEP:-0.5}
RANKS=${RANKS:-1 2 3 4 5 6 7 8}
export KSOL_CACHE_DIR=${KSOL_CACHE_DIR:-/tmp/ksol-mpi-scaling-cache} SCRIPTED_US=100000 SCRIPTED_SLEEP_S=$SLEEP
W=$PWD/tests/e2e/scripted_worker.py
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The compile cache first, so that every run times evaluation alone.
SCRIPTED_SLEEP_S=0 "$BIN" --store '' --worker "$W" bench --tasks "$TASKS" >/dev/null 2>&1 || true
printf "%5s %5s %5s %9s %10s %10s\n" ranks jobs rows wall_s jobs/min ideal/min
for r in $RANKS; do
  rm -f "$tmp"/s.db*
  mpirun "${root[@]}" --oversubscribe -np "$r" "$BIN" --store "$tmp/s.db" --worker "$W" bench --tasks "$TASKS" \
    --json-out "$tmp/b.json" --mpi >/dev/null 2>&1
  python3 - "$tmp/b.json" "$tmp/s.db" "$r" "$tmp/base" <<'PY'
import json, os, sqlite3, sys
j = json.load(open(sys.argv[1])); r = int(sys.argv[3])
rows = sqlite3.connect(sys.argv[2]).execute("select count(*) from evaluations").fetchone()[0]
jobs = len(j["results"]); wall = j["wall_seconds"]; rate = 60 * jobs / wall
if not os.path.exists(sys.argv[4]): open(sys.argv[4], "w").write(str(rate))
base = float(open(sys.argv[4]).read())
print(f"{r:5d} {jobs:5d} {rows:5d} {wall:9.2f} {rate:10.1f} {base * r:10.1f}")
PY
done
