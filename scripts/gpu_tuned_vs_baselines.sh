#!/usr/bin/env bash
# The tuned DSL programs (examples/tuned) against their baselines in one call on a GPU host: the six
# row modules through eval-module (against eager and torch.compile), the SIMT and bf16 GEMMs,
# GEMM + bias + GELU against cuBLASLt and the unfused pair, SpMV, the 2D stencil and the six row
# tasks through eval. The CUTLASS programs compile in the background first. GTEST=1 adds
# Gpu.TunedRowProgramsPassTheGatesAtEverySize (about 30 s more; off by default to stay inside a
# 600 s call). About 380 s on an H200 (docs/results/2026-12-02-h200-issue4-s20.txt, call 3, is its
# output). Figures go to $OUT/m, with medians.txt from the store, packed into m.tgz after every
# step (a killed run still returns what it finished). Carry .carry/bin (scripts/carry.sh) and
# third_party/cutlass:
#   run: timeout 575 bash scripts/gpu_tuned_vs_baselines.sh      (carry [".carry/bin", "third_party/cutlass"])
set -u
: "${OUT:=/tmp/ksol-tuned}"
export OUT
cd "$(dirname "$0")/.."
export KSOL_HOME=$PWD KSOL_CACHE_DIR=${KSOL_CACHE_DIR:-/tmp/ksol-cache} PATH=$PWD/.carry/bin:/usr/local/cuda/bin:$PATH
O=$OUT/m; mkdir -p $O; L=$O/log; T0=$(date +%s)
# Each step's log line also re-packs $OUT/m into m.tgz, so a run killed by a time limit still
# returns every finished step's output in one file (a device call returns only a few loose files).
log(){ echo "$* at $(( $(date +%s) - T0 )) s" >> $L; medians; (cd $OUT && tar czf m.tgz.part m && mv m.tgz.part m.tgz); }
medians(){ python3 - > $O/medians.txt <<'PY'
import sqlite3, os
p = os.environ["OUT"] + "/m/g.db"
if os.path.exists(p):
    c = sqlite3.connect(p)
    for r in c.execute("select t.name, e.size_name, c.origin, e.median_us, e.ci_low_us, e.ci_high_us, e.clock_mhz, e.throttled from evaluations e join tasks t on t.id=e.task_id join candidates c on c.id=e.candidate_id order by e.id"):
        print(*r)
PY
}
T=examples/tuned; K=k4096:M=4096,N=4096,K=4096; R=r8192:R=8192,C=8192
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv > $O/gpu.txt
ksol eval --task gemm_bias_gelu_bf16 --compile-only --candidate $T/gemm_bias_gelu_bf16.ksol > $O/compile_k512.txt 2>&1 &
ksol eval --task gemm_bias_gelu_bf16 --compile-only --candidate $T/gemm_bias_gelu_bf16_square.ksol > $O/compile_square.txt 2>&1 &
ksol eval --task gemm_bf16 --compile-only --candidate $T/gemm_bf16.ksol > $O/compile_gemm_bf16.txt 2>&1 &
for m in softmax_bf16 rmsnorm_bf16 layernorm_bf16 softmax_f32 rmsnorm_f32 layernorm_f32; do
  timeout 150 ksol eval-module examples/modules/$m.py --candidate $T/$m.ksol --task $m --dims 8192,8192 > $O/module_$m.txt 2>&1
  log module $m rc $?
done
timeout 200 ksol --store $O/g.db eval --task gemm_f32 --sizes large --shape $K --compare cublas --candidate $T/gemm_f32.ksol > $O/gemm_f32.txt 2>&1; log gemm_f32 rc $?
wait; log CUTLASS compiles done
timeout 200 ksol --store $O/g.db eval --task gemm_bf16 --sizes large --shape $K --compare cublaslt --candidate $T/gemm_bf16.ksol > $O/gemm_bf16.txt 2>&1; log gemm_bf16 rc $?
timeout 200 ksol --store $O/g.db eval --task gemm_bias_gelu_bf16 --sizes large,wide_k512 --compare cublaslt,cublas_unfused \
  --candidate $T/gemm_bias_gelu_bf16.ksol --candidate $T/gemm_bias_gelu_bf16_square.ksol > $O/gelu.txt 2>&1; log gelu rc $?
timeout 200 ksol --store $O/g.db eval --task spmv_csr_f32 --sizes large_powerlaw,large_banded --compare cusparse \
  --candidate $T/spmv_csr_f32.ksol --candidate $T/spmv_csr_f32_banded.ksol > $O/spmv.txt 2>&1; log spmv rc $?
timeout 200 ksol --store $O/g.db eval --task stencil2d_f32 --sizes large --compare all --candidate $T/stencil2d_f32.ksol > $O/stencil.txt 2>&1; log stencil rc $?
for m in softmax_bf16 rmsnorm_bf16 layernorm_bf16 softmax_f32 rmsnorm_f32 layernorm_f32; do
  timeout 100 ksol --store $O/g.db eval --task $m --shape $R --compare none --candidate $T/$m.ksol > $O/rows_$m.txt 2>&1; log rows $m rc $?
done
if [ "${GTEST:-0}" = 1 ]; then
  KSOL_TEST_BIN_DIR=$PWD/.carry/bin timeout 150 .carry/bin/ksol_tests --gtest_filter=Gpu.TunedRowProgramsPassTheGatesAtEverySize > $O/gtest.txt 2>&1; log gtest rc $?
fi
log end
[ -s $OUT/m.tgz ] && rm -rf $OUT/m
