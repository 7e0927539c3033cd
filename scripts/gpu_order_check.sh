#!/usr/bin/env bash
# Does the position in a run move a power-capped comparison? The bf16 GEMM at 8192^3 (and 4096^3)
# against cuBLASLt, four ways in one call: candidates first or baselines first (--baselines-first),
# each with the default 0.25 s warm-up and with 3 s; nvidia-smi samples power and clock every 100 ms
# (power.csv; log has each step's wall time to match them). About 200 s on an H200. Carry .carry/bin
# (scripts/carry.sh) and third_party/cutlass:
#   run: timeout 400 bash scripts/gpu_order_check.sh      (carry [".carry/bin", "third_party/cutlass"])
# WARMUPS="0.25" times only the default warm-up (about 110 s).
# Output: $OUT/o.tgz (o/medians.txt: order, warm-up, size, origin, median, CI, clock, throttled, samples).
set -u
: "${OUT:=/tmp/ksol-order}"
export OUT
cd "$(dirname "$0")/.."
export KSOL_HOME=$PWD KSOL_CACHE_DIR=${KSOL_CACHE_DIR:-/tmp/ksol-cache} PATH=$PWD/.carry/bin:/usr/local/cuda/bin:$PATH
O=$OUT/o; mkdir -p $O; L=$O/log; T0=$(date +%s)
P=${PROGRAM:-examples/tuned/gemm_bf16.ksol}
pack(){ (cd $OUT && tar czf o.tgz.part o && mv o.tgz.part o.tgz); }
log(){ echo "$* at $(( $(date +%s) - T0 )) s ($(date +%T.%N))" >> $L; pack; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 100 > $O/power.csv 2>&1 &
PW=$!
ksol eval --task gemm_bf16 --compile-only --candidate $P > $O/compile.txt 2>&1; log compile rc $?
for w in ${WARMUPS:-0.25 3}; do
  for order in candidates baselines; do
    flag=""; [ $order = baselines ] && flag=--baselines-first
    timeout 120 ksol --warmup $w --store $O/$order-$w.db eval --task gemm_bf16 --sizes large --shape k4096:M=4096,N=4096,K=4096 \
      --compare cublaslt $flag --candidate $P > $O/$order-$w.txt 2>&1; log $order first, warm-up $w s, rc $?
  done
done
kill $PW
python3 - > $O/medians.txt <<'PY'
import sqlite3, os, glob
for db in sorted(glob.glob(os.environ["OUT"] + "/o/*.db")):
    c = sqlite3.connect(db)
    for r in c.execute("select e.size_name, c.origin, e.median_us, e.ci_low_us, e.ci_high_us, e.clock_mhz, e.throttled, (select count(*) from samples s where s.evaluation_id=e.id) from evaluations e join candidates c on c.id=e.candidate_id order by e.id"):
        print(os.path.basename(db)[:-3], *r)
PY
log end
[ -s $OUT/o.tgz ] && rm -rf $OUT/o
