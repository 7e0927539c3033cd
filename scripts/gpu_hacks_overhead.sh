#!/usr/bin/env bash
# On the GPU host (through scripts/device_run.sh): the exploit suite's runtime checks, then the
# overhead of 100 candidates through one worker. Hack 08 is generated beforehand on a build
# machine (run_hacks.py --compile-only --work DIR leaves it in DIR/generated) and passed as $1.
set -uo pipefail
# The GPU host has no /usr/bin/time: wall time of "$@" on stderr, as "<label> <seconds> s".
timed() { local label=$1 t0 rc; shift; t0=$(date +%s%N); "$@"; rc=$?; local ms=$((($(date +%s%N) - t0) / 1000000)); echo "$label $((ms / 1000)).$(printf %03d $((ms % 1000))) s" >&2; return $rc; }
OUT=${OUT:-/tmp/ksol-out}
GEN=${1:-.carry/generated}
mkdir -p "$OUT"
echo "=== precompile ($(date +%T))"
ksol --store /tmp/pre.db eval --task tests/hacks/tasks/gemm_f32 --compile-only \
  $(for f in tests/hacks/*.cu "$GEN"/*.cu; do case $f in *03_alias*) ;; *) echo --candidate "$f";; esac; done) > /dev/null 2>&1 &
ksol --store /tmp/pre2.db eval --task tests/hacks/tasks/copy_f32 --compile-only --candidate tests/hacks/03_alias_output.cu > /dev/null 2>&1 &
wait
echo "=== hacks ($(date +%T))"
timeout "${HACKS_TIMEOUT:-220}" python3 tests/hacks/run_hacks.py --ksol "$(command -v ksol)" --generated "$GEN" \
  --work /tmp/hackwork --json-out "$OUT/hacks.json" > "$OUT/hacks.txt" 2>&1
echo "hacks rc=$?"
tail -30 "$OUT/hacks.txt"
echo "=== overhead ($(date +%T))"
python3 scripts/gen_variants.py /tmp/variants 100
for pass in cold warm; do
  timed "$pass: 100 candidates, wall" timeout 120 ksol --store "$OUT/overhead.db" eval --task stencil2d_f32 \
    $(for f in /tmp/variants/*.cu; do echo --candidate "$f"; done) --sizes small --compare none --json > "$OUT/hundred_$pass.json" 2> "$OUT/hundred_$pass.err"
  tail -1 "$OUT/hundred_$pass.err"
  python3 - "$OUT/hundred_$pass.json" <<'PY'
import json, statistics, sys
j = json.load(open(sys.argv[1]))
c = j["candidates"]
ok = sum(all(s["status"] == "ok" for s in x["sizes"]) for x in c)
per = sorted(x["compile_seconds"] for x in c)
print(f"  {ok}/{len(c)} ok; compile {j['compile_seconds']:.1f} s for all (per candidate median {statistics.median(per):.2f} s, "
      f"max {per[-1]:.2f} s, 16 in parallel; cache hits {sum(x['cache_hit'] for x in c)}); evaluate {j['evaluate_seconds']:.1f} s "
      f"= {j['evaluate_seconds'] / len(c):.3f} s per candidate on a warm worker")
PY
done
