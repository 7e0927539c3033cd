#!/usr/bin/env bash
# The GPU evidence issues 3, 4 and 5 still need, in steps (through scripts/device_run.sh, one
# device call per step or two). Results go to $OUT. Each step's command is what the issue's
# closing note will quote.
#   suite [RUN]   issue 3: every baseline of every task at every size, on every GPU of the host
#                 (resumable: pass the run id of an interrupted pass, with its store carried back
#                 as .carry/suite.db)
#   refcheck      issue 3: the GPU float64 references against the CPU ones
#   optimize      issue 5: the expert over the 20 tasks with seed programs, 60 s each, resumable
#   versus        issue 5: expert against random search at equal budget on 8 tasks
#   exchange      issue 5: an exchange-folder run answered by hand (examples/exchange)
#   reverify RUN  issue 5: each returned kernel through a fresh ksol eval
set -uo pipefail
OUT=${OUT:-/tmp/ksol-out}
mkdir -p "$OUT"
step=${1:-}; shift || true
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); [ "${GPUS:-0}" -ge 1 ] || GPUS=1
case "$step" in
  suite)
    DB=.carry/suite.db; [ -f "$DB" ] || DB=$OUT/suite.db
    resume=${1:+--resume $1}
    timeout ${SUITE_SECONDS:-540} ksol --store "$DB" bench --gpus "$GPUS" --timeout 150 $resume --json-out "$OUT/suite.json" > "$OUT/suite.txt" 2> "$OUT/suite.err"
    echo "rc=$?"; cp -f "$DB" "$OUT/suite.db" 2>/dev/null; grep -v "^\[" "$OUT/suite.err" | tail -20; tail -5 "$OUT/suite.txt" ;;
  refcheck)
    timeout 540 ksol --store "$OUT/refcheck.db" refcheck > "$OUT/refcheck.txt" 2>&1; echo "rc=$?"; tail -60 "$OUT/refcheck.txt" ;;
  optimize)
    timeout 560 ksol --store "$OUT/opt.db" optimize --gpus "$GPUS" --budget-seconds 60 --budget-candidates 40 ${1:+--resume $1} \
      --report "$OUT/report" --json-out "$OUT/optimize.json" 2> "$OUT/optimize.err"; echo "rc=$?"; tail -5 "$OUT/optimize.err" ;;
  versus)
    T=softmax_f32,rmsnorm_bf16,layernorm_f32,gelu_f32,relu_f32,axpy_f32,broadcast_add_f32,sigmoid_f32
    for agent in expert random; do
      timeout 270 ksol --store "$OUT/versus.db" optimize ${T//,/ } --gpus "$GPUS" --agent $agent --budget-candidates 16 --budget-seconds 30 \
        --report "$OUT/versus_$agent" > "$OUT/versus_$agent.txt" 2>&1; echo "$agent rc=$?"; tail -12 "$OUT/versus_$agent.txt"
    done ;;
  exchange)
    X=/tmp/exchange; rm -rf $X
    python3 scripts/exchange_answer.py $X examples/exchange/softmax_f32_answer.md --max 1 --timeout 300 &
    timeout 300 ksol --store "$OUT/exchange.db" optimize softmax_f32 --agent exchange:$X --budget-candidates 2 --llm-timeout 120 \
      --report "$OUT/exchange" 2>&1 | tail -25; wait ;;
  reverify)
    python3 - "$OUT/optimize.json" <<'PY' | while read -r task file; do timeout 120 ksol --store "$OUT/reverify.db" eval --task "$task" --candidate "$file" --compare all | tail -12; done
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    if "best" in r and not r.get("use_baseline"):
        p = f"/tmp/reverify_{r['task']}.ksol"; open(p, "w").write(r["best"]["program"]); print(r["task"], p)
PY
    ;;
  *) sed -n 2,12p "$0"; exit 2 ;;
esac
