#!/usr/bin/env bash
# Longer GPU runs, one step per device call (through scripts/device_run.sh). Results go to $OUT
# (or /tmp/ksol-out); each step prints its return code and the tail of its output.
#   suite [RUN]   every baseline of every task at every size, on every GPU of the host (resumable:
#                 pass the run id of an interrupted pass, with its store carried as .carry/suite.db;
#                 SUITE_SECONDS caps the call)
#   refcheck      the GPU float64 references against the CPU ones at the small and odd sizes
#   optimize [RUN]  the expert over every task with a seed program (OPT_TASKS: some), OPT_SECONDS
#                 each (60), under OPT_TIMEOUT (560 s, then SIGTERM: the report is written);
#                 OPT_DB: the store (a copy of the suite's reuses its baseline timings with RUN)
#   mainjob [RUN] the main job as a newcomer runs it (`ksol optimize`, no arguments: every task with a
#                 seed program under the run-wide default budget) from a cold compile cache, cut by
#                 SIGTERM at MJ_TIMEOUT (560 s: the report is written); MJ_DB: the store, carried
#                 back as $OUT/mj.db, so that the next call resumes it with RUN (its run id)
#   versus        expert against random search at equal budget on 8 tasks (VS_TASKS, VS_SECONDS,
#                 VS_DB and VS_RESUME to reuse a store's baselines, AGENTS to run one)
#   exchange      the kernel loop on softmax_f32 through an exchange folder, answered by hand by
#                 role (examples/exchange/softmax_f32)
#   topk          the kernel loop on topk_f32 from its naive baseline, --answer either, answered by
#                 role from examples/exchange/topk_f32 (a DSL probe, the reviewer, a CUDA radix select);
#                 the report, the exchange folder and the progress output in $OUT/topk (TOPK_TIMEOUT, 500 s)
#   reverify [JSON]  each kernel an optimize JSON returned, through a fresh ksol eval (PART=i/n: a share)
#   compare [dense|rows]  each task's program against its baselines (both parts: about 10 minutes;
#                 one per call), with BEST=<optimize report folder> for its best.ksol per task (else
#                 examples/tuned, else the seed program): GEMM bf16 and fp32 (SIMT) at 4096^3 and
#                 8192^3 vs cuBLAS(Lt); GEMM+bias+GELU vs cuBLASLt's epilogue and the unfused
#                 GEMM+kernel; SpMV power-law and banded vs cuSPARSE; the 2D stencil vs its naive
#                 baseline; the DSL conv2d (f32 SIMT implicit GEMM) vs cuDNN (dense); softmax/RMSNorm/
#                 LayerNorm 8192^2 bf16 and fp32 vs eager and torch.compile (rows: examples/modules,
#                 ksol eval-module; ROWS: some)
#   hacks         the exploit suite in full (tests/hacks/run_hacks.py; hack 08 generated here first with
#                 `run_hacks.py --compile-only --only 08` and carried as .carry/hacks-gen), $OUT/hacks.{txt,json}
#   tuned         every examples/tuned program at every size, hidden ones included (--compare none; all
#                 compiled first, in parallel), then each status from the store: the
#                 "every tuned program still passes" check; $OUT/tuned.db and tuned.txt
#   gather        the conv family's two image gathers side by side on one KernelBench conv: the module's
#                 lowered program (what `ksol optimize` prints with no GPU visible), as lowered (gather =
#                 auto: tap masks) and with gather = decode, each through `ksol dsl cuda`, timed in one
#                 `ksol eval-module` run beside eager and torch.compile (GATHER_PROBLEM, GATHER_DIMS: the
#                 program's dims in order; level1/55 by default; GATHER_EXTRA: more .cu files timed in the
#                 same run); then the GPU tier's warp-level kernels test
#   kernelbench   ksol optimize FILE.py on the 40 KernelBench problems of docs/TORCH.md's rule
#                 (carry .cache/kernelbench), then the KernelBench-compatible summary
#   kbpaths       scripts/kernelbench_paths.py on the same 40 (both paths, --path best; carry .kb):
#                 KB_DONE (default docs/results/kernelbench-paths) holds earlier calls' JSONs, which
#                 are copied in first so their problems are skipped; KB_ONLY="level1-15,level2-40"
#                 runs those again, in that order; KB_DEADLINE, KB_MIN_LEFT, KB_SECONDS, KB_CANDIDATES; $OUT/kbp.tgz has it all;
#                 KB_SET=all takes the problems from every one of both levels (with KB_DONE
#                 docs/results/kernelbench-paths-more for the further problems' JSONs); KB_PRECISION
#                 (default, strict, tf32) is ksol optimize's --precision, its KB_DONE default
#                 docs/results/kernelbench-paths-<mode> for a mode other than default; KB_PATH=fx runs
#                 the fx lowering alone (--path fx: no Inductor path, e.g. for the strict pass)
#   simtgemm      examples/tuned/gemm_f32.ksol (SIMT f32 GEMM, one buffer) beside the same program with
#                 stages = 2 (two buffers, B by cp.async) and at tile K 16, and GEMM_EXTRA (.ksol or .cu
#                 bound to gemm_f32), against cuBLAS through every gate at the KernelBench GEMM shapes
#                 4096^3, 1024 x 8192 x 8192 (level2/70) and 16384 x 768 x 2048 (level1/10)
set -uo pipefail
OUT=${OUT:-/tmp/ksol-out}
mkdir -p "$OUT"
step=${1:-}; shift || true
GPUS=${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c "^GPU" || true)}; [ "${GPUS:-0}" -ge 1 ] || GPUS=1
case "$step" in
  suite)
    DB=.carry/suite.db; [ -f "$DB" ] || DB=$OUT/suite.db
    resume=${1:+--resume $1}
    timeout -k 90 ${SUITE_SECONDS:-540} ksol --store "$DB" bench --gpus "$GPUS" --timeout 150 $resume --json-out "$OUT/suite.json" > "$OUT/suite.txt" 2> "$OUT/suite.err"
    echo "rc=$?"; for f in "$DB" "$DB-wal" "$DB-shm"; do [ -f "$f" ] && cp -f "$f" "$OUT/suite.db${f#$DB}"; done; grep -v "^\[" "$OUT/suite.err" | tail -20; tail -5 "$OUT/suite.txt" ;;
  refcheck)
    timeout 540 ksol --store "$OUT/refcheck.db" refcheck --sizes small,odd > "$OUT/refcheck.txt" 2>&1; echo "rc=$?"; tail -60 "$OUT/refcheck.txt" ;;
  optimize)
    # OPT_DB: the store (a copy of the suite's store with RUN = its last run reuses the suite's
    # baseline timings instead of repeating them); OPT_TASKS: the tasks (default all with seeds).
    # SIGTERM at the cap: ksol finishes the evaluation in flight and writes its report (killed 90 s later).
    timeout -k 90 ${OPT_TIMEOUT:-560} ksol --store "${OPT_DB:-$OUT/opt.db}" optimize ${OPT_TASKS:-} --gpus "$GPUS" --budget-seconds ${OPT_SECONDS:-60} \
      --budget-candidates 40 ${1:+--resume $1} --report "$OUT/report" --json-out "$OUT/optimize.json" > "$OUT/optimize.txt" 2> "$OUT/optimize.err"
    echo "rc=$?"; D="${OPT_DB:-$OUT/opt.db}"; [ "$D" = "$OUT/opt.db" ] || for f in "$D" "$D-wal" "$D-shm"; do [ -f "$f" ] && cp -f "$f" "$OUT/opt.db${f#$D}"; done; tail -5 "$OUT/optimize.err"; cat "$OUT/optimize.txt" ;;
  mainjob)
    DB=${MJ_DB:-$OUT/mj.db}; export KSOL_CACHE_DIR=${KSOL_CACHE_DIR:-/tmp/ksol-mj-cache}
    [ -n "${1:-}" ] || rm -rf "$KSOL_CACHE_DIR"  # a fresh run starts from a cold compile cache
    ( time timeout -s TERM -k 60 ${MJ_TIMEOUT:-560} ksol --store "$DB" optimize ${1:+--resume $1} --report "$OUT/mj" --json-out "$OUT/mj.json" \
        > "$OUT/mj.txt" 2> "$OUT/mj.err" ) 2> "$OUT/mj.time"
    echo "rc=$?"; cat "$OUT/mj.time"; [ "$DB" = "$OUT/mj.db" ] || for f in "$DB" "$DB-wal" "$DB-shm"; do [ -f "$f" ] && cp -f "$f" "$OUT/mj.db${f#$DB}"; done
    grep -v "^\[" "$OUT/mj.err" | tail -40; cat "$OUT/mj.txt" ;;
  versus)
    T=${VS_TASKS:-softmax_f32,rmsnorm_bf16,layernorm_f32,gelu_f32,relu_f32,axpy_f32,broadcast_add_f32,sigmoid_f32}
    # VS_DB: a store to copy per agent (the suite's, with VS_RESUME = its last run, reuses the
    # baselines' timings, so the budget goes to the search).
    for agent in ${AGENTS:-expert random}; do
      [ -n "${VS_DB:-}" ] && cp -f "$VS_DB" "$OUT/versus_$agent.db"
      timeout ${VS_TIMEOUT:-270} ksol --store "$OUT/versus_$agent.db" optimize ${T//,/ } --gpus "$GPUS" --agent $agent --budget-candidates 16 --budget-seconds ${VS_SECONDS:-30} ${VS_RESUME:+--resume $VS_RESUME} \
        --report "$OUT/versus_$agent" > "$OUT/versus_$agent.txt" 2>&1; echo "$agent rc=$?"; tail -12 "$OUT/versus_$agent.txt"
    done ;;
  exchange)
    X=/tmp/exchange; rm -rf $X
    # The kernel loop's first branch: the planner's and the coder's requests, answered by role.
    python3 scripts/exchange_answer.py $X examples/exchange/softmax_f32 --max 2 --timeout 300 &
    timeout 300 ksol --store "$OUT/exchange.db" optimize softmax_f32 --agent exchange:$X --budget-candidates 1 --llm-timeout 120 \
      --report "$OUT/exchange" 2>&1 | tail -25; wait ;;
  topk)
    # The answerer plays the person at the folder, one answer per role (planner, coder, reviewer,
    # repairer; reviewer-2/repairer-2 only if the first CUDA kernel fails a gate). Everything the
    # results need stays in $OUT/topk: requests/ and answers/ are the transcript.
    T=$OUT/topk; rm -rf "$T"; mkdir -p "$T"
    python3 scripts/exchange_answer.py "$T/exchange" examples/exchange/topk_f32 --max 8 --timeout "${TOPK_TIMEOUT:-500}" > "$T/answerer.txt" 2>&1 &
    answerer=$!
    timeout -k 30 "${TOPK_TIMEOUT:-500}" ksol --store "$T/topk.db" optimize --task topk_f32 --from tasks/llm/topk_f32/naive.cu --answer either \
      --agent "exchange:$T/exchange" --budget-candidates 1 --llm-timeout 60 --no-profile --budget-total-seconds $(( ${TOPK_TIMEOUT:-500} - 60 )) \
      --report "$T/report" --json-out "$T/topk.json" > "$T/progress.txt" 2>&1
    echo "rc=$?"; kill "$answerer" 2>/dev/null; wait "$answerer" 2>/dev/null
    cat "$T/answerer.txt"; grep -v "^\[" "$T/progress.txt" | tail -40 ;;
  reverify)
    # PART=i/n: the i-th of n shares of the tasks (one per GPU, with CUDA_VISIBLE_DEVICES).
    python3 - "${1:-$OUT/optimize.json}" "${PART:-0/1}" <<'PY' | while read -r task file; do timeout 120 ksol --store "$OUT/reverify.db" eval --task "$task" --candidate "$file" --compare none | tail -9; done
import json, sys
i, n = map(int, sys.argv[2].split("/"))
todo = [r for r in json.load(open(sys.argv[1]))["results"] if "best" in r and not r.get("use_baseline")]
for r in todo[i::n]:
    p = f"/tmp/reverify_{r['task']}.ksol"; open(p, "w").write(r["best"]["program"]); print(r["task"], p)
PY
    ;;
  compare)
    # A task's program: BEST's best.ksol, else examples/tuned, else its seed.
    P() { local f="${BEST:+$BEST/$1/best.ksol}"; [ -n "$f" ] && [ -f "$f" ] || f=examples/tuned/$1.ksol; [ -f "$f" ] || f=$(ls tasks/*/"$1"/program.ksol); echo "$f"; }
    E() { timeout 300 ksol --store "$OUT/compare.db" eval --task "$1" --candidate "$(P "$1")" "${@:2}" --compare all 2>&1 | tail -12; }
    K=k4096:M=4096,N=4096,K=4096
    if [ "${1:-dense}" = dense ]; then
      E gemm_bf16 --sizes large --shape "$K"
      E gemm_f32 --sizes large --shape "$K"
      E gemm_bias_gelu_bf16 --sizes large,wide_k512 $([ -n "${BEST:-}" ] || echo --candidate examples/tuned/gemm_bias_gelu_bf16_square.ksol)
      E spmv_csr_f32 --sizes large_powerlaw,large_banded
      E stencil2d_f32 --sizes large
      E conv2d_f32 --sizes medium,large
    fi
    [ "${1:-rows}" = rows ] && for m in ${ROWS:-softmax_f32 softmax_bf16 rmsnorm_f32 rmsnorm_bf16 layernorm_f32 layernorm_bf16}; do
      timeout 300 ksol eval-module "examples/modules/$m.py" --candidate "$(P $m)" --task $m --dims 8192,8192 \
        --json-out "$OUT/module_$m.json" 2>&1 | tail -4
    done ;;
  hacks)
    timeout ${HACKS_TIMEOUT:-300} python3 tests/hacks/run_hacks.py --ksol "$(command -v ksol)" --build-dir .carry/bin \
      --generated .carry/hacks-gen --work /tmp/hacks --json-out "$OUT/hacks.json" > "$OUT/hacks.txt" 2>&1
    echo "rc=$?"; grep -v '^  \[ok\]' "$OUT/hacks.txt" | tail -40 ;;
  tuned)
    for f in examples/tuned/*.ksol; do
      b=$(basename "$f" .ksol); t=${b%_square}; t=${t%_banded}
      ksol eval --task "$t" --compile-only --candidate "$f" > "$OUT/compile_$b.txt" 2>&1 &
    done; wait
    for f in examples/tuned/*.ksol; do
      b=$(basename "$f" .ksol); t=${b%_square}; t=${t%_banded}
      timeout 200 ksol --store "$OUT/tuned.db" eval --task "$t" --compare none --candidate "$f" >> "$OUT/tuned.txt" 2>&1; echo "$b rc=$?"
    done
    python3 - "$OUT/tuned.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
q = ("select c.origin, count(*), sum(e.status = 'ok'), group_concat(case when e.status != 'ok' then e.size_name || ': ' || "
     "e.status || ' ' || coalesce(e.failed_gate, '') end, '; ') from evaluations e join candidates c on c.id = e.candidate_id group by c.id")
for origin, n, ok, bad in c.execute(q):
    print(f"{origin.rsplit('/', 1)[-1]:<36} {ok}/{n} ok" + (f"  {bad}" if bad else ""))
PY
    ;;
  gather)
    f=${GATHER_PROBLEM:-.kb/KernelBench/level1/55_conv_standard_2D__asymmetric_input__square_kernel.py}
    d=$OUT/gather; mkdir -p "$d"
    CUDA_VISIBLE_DEVICES= ksol --store '' optimize "$f" > "$d/lowered.txt" 2>&1
    awk '/^kernel /{p=1} p{print} p&&/^schedule \{/{s=1} s&&/^\}$/{exit}' "$d/lowered.txt" > "$d/taps.ksol"
    sed 's/^schedule {$/schedule {\n  gather = decode/' "$d/taps.ksol" > "$d/decode.ksol"
    for v in taps decode; do ksol dsl cuda "$d/$v.ksol" > "$d/$v.cu" || { echo "$v: no source"; cat "$d/lowered.txt"; exit 1; }; done
    # GATHER_EXTRA: more sources timed in the same run (e.g. the seed as an earlier commit generated it).
    extra=""; for x in ${GATHER_EXTRA:-}; do extra="$extra --candidate $x"; done
    timeout 500 ksol eval-module "$f" --candidate "$d/taps.cu" --candidate "$d/decode.cu" $extra \
      --dims "${GATHER_DIMS:-8,64,512,1024,128,510,1022}" --json-out "$d/gather.json" > "$d/gather.txt" 2>&1
    echo "rc=$?"; tail -12 "$d/gather.txt"
    KSOL_TEST_BIN_DIR=$PWD/.carry/bin timeout 300 .carry/bin/ksol_tests --gtest_filter='Gpu.WarpLevel*' 2>&1 | tail -4 ;;
  kernelbench)
    # ksol optimize on the 40 problems of docs/TORCH.md's rule (a KernelBench copy carried
    # as .cache/kernelbench), a fixed budget each (KB_SECONDS, 12 candidates). Several loops (one per
    # GPU, CUDA_VISIBLE_DEVICES) share KB_CLAIMS: each problem goes to the first loop that claims it.
    # KB_DONE: a folder of earlier calls' JSONs, whose problems are skipped (the run spread over calls).
    # KB_END (epoch seconds, else now + KB_DEADLINE): no problem starts with less than KB_MIN_LEFT
    # seconds left, and none runs past it; one cut short by KB_END writes nothing (the next call
    # runs it), one killed at its own KB_TIMEOUT is recorded as such. Then the KernelBench-compatible
    # summary of every JSON (this call's and KB_DONE's), and one archive (kb.tgz).
    KB=${KB:-.cache/kernelbench/KernelBench}; mkdir -p "$OUT/kb"; claims=${KB_CLAIMS:-$OUT/claims}; mkdir -p "$claims"
    end=${KB_END:-$(( $(date +%s) + ${KB_DEADLINE:-100000} ))}; lim=${KB_TIMEOUT:-240}
    for L in level1 level2; do for f in $(ls $KB/$L/*.py | sort -V); do k=$(basename "$f" | cut -d_ -f1); [ $((k % 5)) -eq 0 ] || continue
      if [ -n "${KB_ONLY:-}" ]; then  # KB_ONLY="level1-40 level2-5": those alone, run again whatever KB_DONE has
        [[ " $KB_ONLY " == *" $L-$k "* ]] || continue
      elif [ -n "${KB_DONE:-}" ] && [ -f "$KB_DONE/$L-$k.json" ]; then continue; fi
      mkdir "$claims/$L-$k" 2>/dev/null || continue  # another loop has it
      left=$(( end - $(date +%s) ))
      if [ "$left" -lt "$(( ${KB_MIN_LEFT:-60} > 10 ? ${KB_MIN_LEFT:-60} : 10 ))" ]; then
        echo "$L/$k not run (${left} s left before KB_END)"; rmdir "$claims/$L-$k"; continue; fi
      t=$(( left < lim ? left : lim )); t0=$(date +%s.%N)
      timeout -k 20 $t ksol optimize "$f" --budget-seconds ${KB_SECONDS:-30} --budget-candidates 12 \
        --json-out "$OUT/kb/$L-$k.json" --report "$OUT/kb/$L-$k" > /dev/null 2>> "$OUT/kb/log.txt"
      rc=$?; dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
      if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        if [ "$t" -lt "$lim" ]; then
          echo "$L/$k cut at KB_END after $dt s (not recorded: the next call runs it)"; rm -f "$OUT/kb/$L-$k.json"; rmdir "$claims/$L-$k"; continue
        fi
        # Past its own limit: a JSON that ksol wrote on the SIGTERM (the search stopped, the report written) is kept.
        [ -f "$OUT/kb/$L-$k.json" ] || printf '{"problem": "%s", "results": [{"stop_reason": "killed", "use_baseline": true, "baseline_us": {}, "reason": "ksol optimize ran past the per-problem limit of %s s and was killed"}]}\n' "$f" "$lim" > "$OUT/kb/$L-$k.json"
      fi
      echo "$L/$k rc=$rc $dt s"
    done; done
    # This call's JSONs, then KB_DONE's for the problems this call did not run (nullglob: none is no error).
    python3 -c 'import glob,json,os,sys; a=sorted(glob.glob(sys.argv[1]+"/*.json")); seen={os.path.basename(f) for f in a}
b=[f for f in sorted(glob.glob(sys.argv[2]+"/*.json")) if sys.argv[2] and os.path.basename(f) not in seen]
print(json.dumps([json.load(open(f)) for f in a+b]))' "$OUT/kb" "${KB_DONE:-}" > "$OUT/kb_all.json"
    PYTHONPATH=python python3 -m ksol_torch report "$OUT/kb_all.json"; tar czf "$OUT/kb.tgz" -C "$OUT" kb ;;
  simtgemm)
    d=$OUT/simtgemm; mkdir -p "$d"; cands=()
    for v in "s1 1 8" "s2 2 8" "s1k16 1 16" "s2k16 2 16"; do
      set -- $v
      sed -e "s/stages = 1/stages = $2/" -e "s/tile = \[128, 128, 8\]/tile = [128, 128, $3]/" examples/tuned/gemm_f32.ksol > "$d/$1.ksol"
      cands+=(--candidate "$d/$1.ksol")
    done
    for f in ${GEMM_EXTRA:-}; do cands+=(--candidate "$f"); done
    timeout 300 ksol --store "$d/g.db" eval --task gemm_f32 --shape sq4096:M=4096,N=4096,K=4096 \
      --shape kb70:M=1024,N=8192,K=8192 --shape kb10:M=16384,N=768,K=2048 --compare cublas "${cands[@]}" \
      > "$d/eval.txt" 2>&1; echo "rc=$?"; tail -25 "$d/eval.txt" ;;
  kbpaths)
    # KB_RUN (default /tmp/kbp, outside OUT: only the archive comes back) holds this call's problems
    # and the carried ones (the summary is over both); the archive, written after each problem, is
    # what comes back: copy its JSONs into KB_DONE's folder to carry them on.
    mode=${KB_PRECISION:-default}; suffix=""; [ "$mode" = default ] || suffix="-$mode"
    done_dir=${KB_DONE:-docs/results/kernelbench-paths$suffix}; run=${KB_RUN:-/tmp/kbp}; rm -rf "$run"; mkdir -p "$run"
    cp "$done_dir"/*.json "$run/" 2>/dev/null || true
    python3 scripts/kernelbench_paths.py --out "$run" --precision "$mode" --budget-seconds "${KB_SECONDS:-30}" --budget-candidates "${KB_CANDIDATES:-34}" --deadline "${KB_DEADLINE:-530}" \
      --min-left "${KB_MIN_LEFT:-100}" --set "${KB_SET:-rule}" ${KB_ONLY:+--only "$KB_ONLY"} --path "${KB_PATH:-best}" \
      --archive "$OUT/kbp.tgz" | grep -v " not run$" ;;
  *) sed -n '2,/^set /{/^set /d;p}' "$0"; exit 2 ;;
esac
