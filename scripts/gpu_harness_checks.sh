#!/usr/bin/env bash
# Checks of the measurement core on a GPU host, in one command through scripts/device_run.sh.
# Steps (all by default, or those named as arguments):
#   calibrate   ksol device calibrate (bandwidth and FLOP rates, cached per GPU)
#   bench       every baseline of six tasks (GEMM, SpMV, softmax, RMSNorm, stencil, scan)
#   stability   five processes timing the same kernel: an HBM-bound softmax and the bf16 GEMM
#   overhead    100 candidates through one worker, cold compile cache then warm
#   robustness  a sticky CUDA error, a hang, and a plain C function through the generated shim
#   refcheck    the GPU float64 references against the CPU ones
# Results go to $OUT (or /tmp/ksol-out).
#   scripts/device_run.sh scripts/gpu_harness_checks.sh stability overhead
set -uo pipefail
# The GPU host has no /usr/bin/time: wall time of "$@" on stderr, as "<label> <seconds> s".
timed() { local label=$1 t0 rc; shift; t0=$(date +%s%N); "$@"; rc=$?; local ms=$((($(date +%s%N) - t0) / 1000000)); echo "$label $((ms / 1000)).$(printf %03d $((ms % 1000))) s" >&2; return $rc; }
OUT=${OUT:-/tmp/ksol-out}
mkdir -p "$OUT"
DB=$OUT/ksol.db
STEPS=${*:-"calibrate bench stability overhead robustness refcheck"}
want() { [[ " $STEPS " == *" $1 "* ]]; }
step() { echo; echo "=== $* ($(date +%T))"; }
step gpu
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
want calibrate && { step calibrate
ksol --store "$DB" device calibrate 2>&1 | tee "$OUT/calibrate.txt"; }
want bench && { step bench
timed "bench wall" ksol --store "$DB" bench --tasks gemm_bf16,spmv_csr_f32,softmax_f32,rmsnorm_bf16,stencil2d_f32,scan_f32 --json-out "$OUT/bench.json" > "$OUT/bench.txt" 2> "$OUT/bench.err"
cat "$OUT/bench.txt"; grep -E "wall|error|failed" "$OUT/bench.err" | head -20; }
want stability && { step stability
# An HBM-bound kernel of at least 100 us (the naive row softmax at large: 16384 x 4096 floats, ~190 us)
# and the bf16 GEMM at 8192^3.
for spec in "softmax_f32 tasks/llm/softmax_f32/naive.cu large" "gemm_bf16 tasks/dense/gemm_bf16/cublaslt.cu large"; do
  set -- $spec
  for i in 1 2 3 4 5; do
    timeout 120 ksol --json --store "$DB" eval --task "$1" --candidate "$2" --sizes "$3" --compare none > "$OUT/stab_${1}_$i.json" 2>/dev/null
  done
done
python3 scripts/stability.py "$OUT"/stab_*.json | tee "$OUT/stability.txt"; }
want overhead && { step overhead
python3 scripts/gen_variants.py /tmp/variants 100
for pass in cold warm; do
  timed "$pass: 100 candidates, wall" ksol --store "$DB" eval --task stencil2d_f32 $(for f in /tmp/variants/*.cu; do echo --candidate "$f"; done) \
    --sizes small --compare none --json > "$OUT/hundred_$pass.json" 2> "$OUT/hundred_$pass.err"
  tail -1 "$OUT/hundred_$pass.err"
  python3 - "$OUT/hundred_$pass.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
c = j["candidates"]
ok = sum(all(s["status"] == "ok" for s in x["sizes"]) for x in c)
import statistics
per = sorted(x["compile_seconds"] for x in c)
print(f"  per-candidate compile: median {statistics.median(per):.2f} s, max {per[-1]:.2f} s (16 in parallel)")
print(f"  {ok}/{len(c)} ok; compile {j['compile_seconds']:.1f} s (cache hits {sum(x['cache_hit'] for x in c)}), "
      f"evaluate {j['evaluate_seconds']:.1f} s = {j['evaluate_seconds'] / len(c):.3f} s per candidate on a warm worker")
PY
done
}
want robustness && { step robustness
# A sticky CUDA error and a hang, each recorded against its candidate, the worker restarted;
# then a user's plain C function through the generated shim.
ksol --store "$DB" eval --task scan_f32 --candidate tests/e2e/candidates/illegal_address.cu --sizes small --compare none 2>&1 | tail -4
ksol --store "$DB" eval --task scan_f32 --candidate tests/e2e/candidates/spin_forever.cu --sizes small --compare none --timeout 15 2>&1 | tail -4
ksol --store "$DB" eval --task spmv_csr_f32 --candidate examples/user_spmv.cu --sizes small,large_powerlaw --compare naive \
  --function "void spmv_csr(int M, const int* row_ptr, const int* col_idx, const float* values, const float* x, float* y)" 2>&1 | tail -6
}
want refcheck && { step refcheck
ksol --store "$DB" refcheck 2>&1 | tail -60; }
