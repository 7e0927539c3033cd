#!/usr/bin/env bash
# The search's evidence on a GPU host in one call: `ksol optimize` over $TASKS, each task's search
# limited to $SECONDS_PER_TASK after its baselines (--verbose: where each task's seconds went),
# then every returned kernel beside the task's examples/tuned program in one `ksol eval` (the same
# run, the same sizes), and the harness phases of every evaluation. Output in $OUT/s, packed into
# s.tgz after every step, so a call cut by its limit still returns what finished. Carry
# .carry/bin (scripts/carry.sh) and third_party/cutlass:
#   run: TASKS="softmax_bf16 relu_f32" SECONDS_PER_TASK=60 timeout 590 bash scripts/gpu_search.sh
# MAIN=1 runs the main job instead (`ksol optimize` with no arguments) and then the comparison.
set -u
: "${OUT:=/tmp/ksol-search}" "${TASKS:=softmax_bf16 relu_f32}" "${SECONDS_PER_TASK:=60}" "${DEADLINE:=560}" "${MAIN:=0}"
export OUT
cd "$(dirname "$0")/.."
export KSOL_HOME=$PWD KSOL_CACHE_DIR=${KSOL_CACHE_DIR:-/tmp/ksol-cache} PATH=$PWD/.carry/bin:/usr/local/cuda/bin:$PATH
O=$OUT/s; mkdir -p $O; L=$O/log; T0=$(date +%s)
left(){ echo $(( DEADLINE - ($(date +%s) - T0) )); }
log(){ echo "$* at $(( $(date +%s) - T0 )) s" >> $L; (cd $OUT && tar czf s.tgz.part s && mv s.tgz.part s.tgz); }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv > $O/gpu.txt 2>&1
nproc >> $O/gpu.txt
if [ "$MAIN" = 1 ]; then
  timeout -s TERM -k 30 $(left) ksol --store $O/s.db optimize --verbose --report $O/rep --json-out $O/opt.json > $O/optimize.txt 2>&1
else
  timeout -s TERM -k 30 $(left) ksol --store $O/s.db optimize $TASKS --budget-total-seconds 0 --budget-seconds $SECONDS_PER_TASK \
    --verbose --report $O/rep --json-out $O/opt.json > $O/optimize.txt 2>&1
fi
log optimize rc $?
python3 scripts/harness_phases.py $O/s.db > $O/phases.txt 2>&1
# Each task with a tuned program: the returned kernel beside it (a task that returned a baseline:
# the tuned program beside the baselines, so the table says what the search missed).
for t in $(python3 -c "import json; print(' '.join(r['task'] for r in json.load(open('$O/opt.json'))['results']))" 2>/dev/null); do
  [ -f examples/tuned/$t.ksol ] || continue
  [ $(left) -gt 30 ] || break
  if [ -f $O/rep/$t/best.ksol ]; then cand="--candidate $O/rep/$t/best.ksol --compare none"; else cand="--compare all"; fi
  timeout $(( $(left) - 10 )) ksol --store $O/s.db eval --task $t $cand --candidate examples/tuned/$t.ksol > $O/vs_tuned_$t.txt 2>&1
  log vs_tuned $t rc $?
done
log end
[ -s $OUT/s.tgz ] && rm -rf $O
