#!/usr/bin/env bash
# The two Triton test kernels (tests/triton/softmax.py, tests/triton/layernorm.py, written as a
# user would) through `ksol optimize FILE --triton-fn NAME` on a GPU host, then one line per kernel:
# the kernel as given, what ksol returned, its speedup over the kernel as given and over the
# fastest baseline (eager and torch.compile of the reference included). Output in $OUT: each
# run's log, JSON and report folder, and the store. Carry .carry/bin (scripts/carry.sh); the
# PyTorch that runs the worker (KSOL_PYTHON, else python3) must have Triton, as a CUDA build of
# PyTorch 2 does:
#   run: timeout 590 bash scripts/gpu_triton.sh
# SECONDS_PER_KERNEL is each kernel's --budget-seconds (half for the DSL search of its reference,
# half for its configs); the baselines, compiles, verifications and the side-by-side timing of the
# contenders (torch.compile's compile among them) come on top, 150 s allowed for them.
set -u
: "${OUT:=/tmp/ksol-triton}" "${SECONDS_PER_KERNEL:=120}"
cd "$(dirname "$0")/.."
export KSOL_HOME=$PWD KSOL_CACHE_DIR=${KSOL_CACHE_DIR:-/tmp/ksol-cache} PATH=$PWD/.carry/bin:$PWD/build:/usr/local/cuda/bin:$PATH
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
${KSOL_PYTHON:-python3} -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/gpu.txt" 2>&1
for spec in softmax.py:softmax_kernel layernorm.py:layernorm_kernel; do
  file=${spec%%:*} fn=${spec##*:}
  timeout -s TERM -k 30 $((SECONDS_PER_KERNEL + 150)) ksol --store "$OUT/ksol.db" optimize "tests/triton/$file" --triton-fn "$fn" \
    --budget-seconds "$SECONDS_PER_KERNEL" --report "$OUT/$fn" --json-out "$OUT/$fn.json" > "$OUT/$fn.txt" 2>&1
  echo "$fn: ksol exit status $? (log $OUT/$fn.txt)"
done
python3 - "$OUT" <<'PY'
import json, os, sys

out = sys.argv[1]
print(f"{'kernel':18} {'as given us':>11} {'returned':40} {'us':>9} {'vs as given':>11} {'vs best baseline':>22}")
for fn in ("softmax_kernel", "layernorm_kernel"):
    try:
        r = json.load(open(os.path.join(out, fn + ".json")))["results"][0]
    except (OSError, ValueError, KeyError, IndexError) as e:
        print(f"{fn:18} no results ({type(e).__name__}: {e})")
        continue
    size = (r.get("sizes") or [{}])[0]
    us = size.get("returned_us") or size.get("best_baseline_us") or 0
    returned = r.get("returned") or "-"
    lang = (r.get("best") or {}).get("language", "baseline" if r.get("use_baseline") else "")
    vs_kernel = r.get("speedup_vs_kernel") or 0
    base = f"{r.get('speedup_vs_best_baseline', 0):.3f}x vs {r.get('best_baseline') or '-'}"
    print(f"{fn:18} {r.get('baseline_us', {}).get('triton', 0):11.2f} {returned + ' (' + lang + ')':40} {us:9.2f} "
          f"{vs_kernel:10.3f}x {base:>22}")
    if r.get("reason"):
        print(f"{'':18} {r['reason']}")
PY
