#!/usr/bin/env bash
# Checks these answers without a GPU: each repairer answer's block is its .cu file, both kernels
# pass gate 1 and nvcc, and the kernel loop takes the answers through every role (planner, coder,
# reviewer, repairer) against the scripted worker (tests/e2e/scripted_worker.py: every evaluation
# passes at SCRIPTED_US). With --answer cuda the coder's DSL probe is refused before evaluation,
# so the reviewer and the repairer are asked, as the GPU's correctness gate makes them be there.
# usage: examples/exchange/topk_f32/check_cpu.sh [KSOL]   (default build/ksol)
set -euo pipefail
cd "$(dirname "$0")/../../.."
KSOL=${1:-build/ksol}
D=$(mktemp -d); trap 'kill "${answerer:-}" 2>/dev/null || true; rm -rf "$D"' EXIT
export KSOL_HOME=$PWD KSOL_CACHE_DIR=$D/cache
E=examples/exchange/topk_f32
for n in 1 2; do
  f=$([ $n = 1 ] && echo radix_select.cu || echo radix_select_48k.cu)
  python3 - "$E/repairer-$n.md" "$E/$f" <<'PY'
import re, sys
block = re.search(r"```cuda\n(.*?)```", open(sys.argv[1]).read(), re.S).group(1)
sys.exit(0 if block == open(sys.argv[2]).read() else f"{sys.argv[1]}: its block is not {sys.argv[2]}")
PY
  "$KSOL" --store "" eval --task topk_f32 --candidate "$E/$f" --compile-only
done
python3 scripts/exchange_answer.py "$D/x" "$E" --max 4 --timeout 300 > "$D/answerer.txt" 2>&1 &
answerer=$!
SCRIPTED_US=5000 "$KSOL" --store "$D/t.db" --worker tests/e2e/scripted_worker.py optimize --task topk_f32 \
  --from tasks/llm/topk_f32/naive.cu --answer cuda --agent "exchange:$D/x" --budget-candidates 1 --llm-timeout 60 \
  --no-profile --report "$D/report" > "$D/progress.txt" 2>&1
wait "$answerer"
for want in "planner request 1: planner-1.md" "coder request 1: coder-1.md" "reviewer request 1: reviewer-1.md" \
            "repairer request 1: repairer-1.md"; do
  grep -qF "$want" "$D/answerer.txt" || { cat "$D/answerer.txt" "$D/progress.txt"; echo "missing: $want"; exit 1; }
done
grep -q "c1 (cuda, repairer) verified" "$D/progress.txt" || { cat "$D/progress.txt"; echo "the repairer's kernel was not evaluated"; exit 1; }
echo "topk_f32 answers: every role answered, the CUDA answer through gate 1 and nvcc"
