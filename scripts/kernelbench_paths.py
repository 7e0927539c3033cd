#!/usr/bin/env python3
"""The 40 KernelBench problems of docs/TORCH.md's rule through both paths of `ksol optimize FILE.py`
(the fx lowering and the Inductor path, `--path best`), then per problem and in geomean: each
path's speedup over torch.compile as that path measured it, and the path returned.

    python3 scripts/kernelbench_paths.py --out runs/kb-paths [--kb DIR] [--gpus N] [--deadline S] [--precision MODE] [--path fx]

The problems: level 1 and level 2 of a KernelBench copy (`--kb`, default .kb/KernelBench, else
.cache/kernelbench/KernelBench: never committed), every problem whose number is a multiple of 5
(`--set all`: every problem of the two levels, for the further ones; `--only` picks some).
Each runs as

    ksol optimize FILE --path best --budget-seconds S --budget-candidates N --precision MODE --report OUT/<id> --json-out OUT/<id>.json

(`--precision`, default `default`: the contract eager, torch.compile and the candidates all run
under; one OUT holds one mode, and a call refuses an OUT whose results were made under another.
`--path fx` runs the fx lowering alone, for a comparison of contracts that needs no Inductor path:
the table then shows that path as not run.)

Each problem's output goes to OUT/<id>.log, every line behind the seconds since the problem
started. `--archive FILE` also writes OUT as one .tar.gz after each problem and at the end (a
call killed before the end still returns what finished). Resumable: a problem whose
OUT/<id>.json exists is not run again (nor one recorded as timed out in OUT/<id>.timeout.json,
unless --retry); a run cut short by --deadline or a signal leaves no result, so the next call runs
it, after the problems not yet tried (OUT/<id>.cut.json says how long it had run): one problem
that outlasts a call's deadline does not keep the others from starting. With --deadline, a problem
starts only where the seconds left cover what it is expected to need: --min-left, the wall time
an earlier call took to finish it (recorded in its result as kbpaths_wall_s) or else the median
wall time of the problems the call has finished, and an earlier cut's time (one the deadline would
cut only costs device time). --gpus N runs N problems at once, one per GPU
(CUDA_VISIBLE_DEVICES). --table-only prints the table of what OUT holds. The table also goes to
OUT/summary.txt.
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def problems(kb: str, every: bool = False):
    """(id, path) of the rule's 40 problems (`every`: all problems of both levels), level1 then
    level2, by number."""
    out = []
    for level in ("level1", "level2"):
        d = os.path.join(kb, level)
        if not os.path.isdir(d):
            sys.exit(f"error: {d} is not a folder: --kb names a KernelBench copy with level1/ and level2/")
        for f in os.listdir(d):
            m = re.match(r"(\d+)_.*\.py$", f)
            if m and (every or int(m.group(1)) % 5 == 0):
                out.append((level, int(m.group(1)), os.path.join(d, f)))
    out.sort()
    return [(f"{level}-{n}", path) for level, n, path in out]


def default_kb() -> str:
    for d in (os.path.join(ROOT, ".kb", "KernelBench"), os.path.join(ROOT, ".cache", "kernelbench", "KernelBench")):
        if os.path.isdir(d):
            return d
    return os.path.join(ROOT, ".kb", "KernelBench")


def default_ksol() -> str:
    for p in (os.path.join(ROOT, "build", "ksol"), os.path.join(ROOT, ".carry", "bin", "ksol"), shutil.which("ksol") or ""):
        if p and os.path.isfile(p):
            return p
    sys.exit("error: no ksol binary (build/ksol, .carry/bin/ksol, PATH): --ksol names one")


# --- one problem ----------------------------------------------------------------------------------------
def command(a, pid: str, path: str):
    return [a.ksol, "optimize", path, "--path", a.path, "--budget-seconds", str(a.budget_seconds), "--budget-candidates",
            str(a.budget_candidates), "--precision", a.precision, "--report", os.path.join(a.out, pid), "--json-out",
            os.path.join(a.out, pid + ".json")]


def other_modes(a, ids):
    """The results in OUT (a problem's JSON, or its record of a timeout or a cut) made under another
    precision mode than --precision: (id, mode) each."""
    found = []
    for pid in ids:
        for suffix in (".json", ".timeout.json", ".cut.json"):
            jp = os.path.join(a.out, pid + suffix)
            if not os.path.exists(jp):
                continue
            with open(jp) as fh:
                mode = (json.load(fh).get("precision") or {}).get("mode", "default")
            if mode != a.precision:
                found.append((pid, mode))
                break
    return found


class Log:
    """A problem's output into OUT/<id>.log, each line behind the seconds since its start: where
    a problem's time went, phase by phase."""

    def __init__(self, path: str, stream, t0: float):
        self.fh, self.stream, self.t0 = open(path, "w"), stream, t0
        self.thread = threading.Thread(target=self._copy, daemon=True)
        self.thread.start()

    def _copy(self):
        for line in iter(self.stream.readline, b""):
            self.fh.write(f"{time.time() - self.t0:7.1f}s {line.decode(errors='replace')}")
            self.fh.flush()

    def close(self):
        self.thread.join(timeout=10)
        self.fh.close()


def start(a, pid, path, gpu):
    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    t0 = time.time()
    p = subprocess.Popen(command(a, pid, path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return {"pid": pid, "path": path, "proc": p, "log": Log(os.path.join(a.out, pid + ".log"), p.stdout, t0), "t0": t0, "gpu": gpu}


def stop(job):
    try:
        os.killpg(job["proc"].pid, signal.SIGTERM)
        job["proc"].wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(job["proc"].pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    job["log"].close()


def needed(a, pid, took):
    """The seconds `pid` is expected to need, and why: --min-left at least; the wall time an earlier
    call took to finish it (its result's `kbpaths_wall_s`), or where it has none, the median wall
    time of the problems this call finished (each one cut at the deadline is that time lost); and
    at least as long as an earlier call ran it before cutting it (OUT/<id>.cut.json)."""
    need, why = a.min_left, "--min-left"
    own = wall_s(a, pid)
    if own is not None:
        if own > need:
            need, why = own, "an earlier call finished it in that long"
    elif took:
        med = statistics.median(took)
        if med > need:
            need, why = med, f"the median of the {len(took)} problem(s) this call finished"
    cut = cut_s(a, pid)
    if cut is not None and cut > need:
        need, why = cut, "an earlier call cut it after that long"
    return need, why


def run_all(a, todo):
    free = list(range(a.gpus)) if a.gpus > 1 else [None]
    jobs, end = [], a.deadline
    took = []  # the wall seconds of the problems this call finished
    interrupted = []
    signal.signal(signal.SIGTERM, lambda *_: interrupted.append(1))
    try:
        while todo or jobs:
            while todo and free and not interrupted:
                left = end - time.time() if end else math.inf
                # A problem the deadline would cut leaves no result: only one expected to finish starts.
                fits = [t for t in todo if left >= needed(a, t[0], took)[0]]
                if not fits:
                    need, why = needed(a, todo[0][0], took)
                    print(f"{len(todo)} problem(s) not started: {left:.0f} s left before the deadline, "
                          f"{todo[0][0]} needs about {need:.0f} s ({why})", flush=True)
                    todo = []
                    break
                pid, path = fits[0]
                todo.remove(fits[0])
                jobs.append(start(a, pid, path, free.pop(0)))
                print(f"{pid}: started{'' if jobs[-1]['gpu'] is None else ' on GPU ' + str(jobs[-1]['gpu'])}", flush=True)
            time.sleep(1)
            for job in list(jobs):
                rc = job["proc"].poll()
                spent = time.time() - job["t0"]
                cut = (end and time.time() > end) or interrupted
                if rc is None and not cut and spent <= a.timeout:
                    continue
                if rc is None:
                    stop(job)
                    if cut:  # the next call runs it, after the problems not yet tried: no result left behind
                        for f in (job["pid"] + ".json",):
                            if os.path.exists(os.path.join(a.out, f)):
                                os.remove(os.path.join(a.out, f))
                        with open(os.path.join(a.out, job["pid"] + ".cut.json"), "w") as fh:
                            json.dump({"problem": job["path"], "cut_after_s": round(spent, 1), "precision": {"mode": a.precision}}, fh)
                        print(f"{job['pid']}: cut after {spent:.0f} s (not recorded: the next call runs it, last)", flush=True)
                    else:
                        with open(os.path.join(a.out, job["pid"] + ".timeout.json"), "w") as fh:
                            json.dump({"problem": job["path"], "timeout_s": a.timeout, "precision": {"mode": a.precision}}, fh)
                        print(f"{job['pid']}: timed out after {spent:.0f} s (recorded)", flush=True)
                else:
                    job["log"].close()
                    took.append(spent)
                    ok = os.path.exists(os.path.join(a.out, job["pid"] + ".json"))
                    if ok:
                        note_wall(a, job["pid"], spent)
                    if ok and os.path.exists(os.path.join(a.out, job["pid"] + ".cut.json")):
                        os.remove(os.path.join(a.out, job["pid"] + ".cut.json"))
                    print(f"{job['pid']}: exit status {rc} after {spent:.0f} s{'' if ok else ' (no JSON: see its .log)'}", flush=True)
                jobs.remove(job)
                free.append(job["gpu"])
                if a.archive:  # what has finished comes back even if the call is killed before the end
                    write_archive(a)
            if interrupted and not jobs:
                break
    except KeyboardInterrupt:
        for job in jobs:
            stop(job)
            if os.path.exists(os.path.join(a.out, job["pid"] + ".json")):
                os.remove(os.path.join(a.out, job["pid"] + ".json"))
        raise


def wall_s(a, pid):
    """The wall seconds an earlier call took to finish `pid` (OUT/<id>.json's kbpaths_wall_s), or None."""
    try:
        with open(os.path.join(a.out, pid + ".json")) as fh:
            v = json.load(fh).get("kbpaths_wall_s")
        return float(v) if v is not None else None
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def note_wall(a, pid, spent):
    """Records in `pid`'s result how long the problem took here, for a later call's deadline rule."""
    f = os.path.join(a.out, pid + ".json")
    try:
        with open(f) as fh:
            d = json.load(fh)
        if not isinstance(d, dict):
            return
        d["kbpaths_wall_s"] = round(spent, 1)
        with open(f + ".tmp", "w") as fh:
            json.dump(d, fh, indent=2)  # as ksol writes it
        os.replace(f + ".tmp", f)
    except (OSError, ValueError):
        pass


def cut_s(a, pid):
    """How long an earlier call ran `pid` before its deadline cut it (OUT/<id>.cut.json), or None."""
    try:
        with open(os.path.join(a.out, pid + ".cut.json")) as fh:
            return float(json.load(fh).get("cut_after_s", 0.0))
    except (OSError, ValueError):
        return None


def order(a, todo):
    """`todo` in the rule's order, the problems an earlier call cut short (OUT/<id>.cut.json) last,
    the shortest cut first; a problem that finishes loses its marker."""
    fresh = [t for t in todo if cut_s(a, t[0]) is None]
    cut = sorted((t for t in todo if cut_s(a, t[0]) is not None), key=lambda t: cut_s(a, t[0]))
    return fresh + cut


def write_archive(a):
    """OUT as one .tar.gz at --archive, replaced whole (written beside it, then renamed)."""
    tmp = a.archive + ".tmp"
    with tarfile.open(tmp, "w:gz") as tf:
        tf.add(a.out, arcname=os.path.basename(os.path.normpath(a.out)))
    os.replace(tmp, a.archive)


# --- the table ------------------------------------------------------------------------------------------
def row_of(a, pid):
    """One problem's figures from OUT/<id>.json (with its "path"), or why there are none."""
    jp = os.path.join(a.out, pid + ".json")
    if not os.path.exists(jp):
        if os.path.exists(os.path.join(a.out, pid + ".timeout.json")):
            return {"id": pid, "note": f"timed out ({a.timeout} s)"}
        return {"id": pid, "note": "not run"}
    with open(jp) as fh:
        doc = json.load(fh)
    item = (doc.get("results") or [{}])[0]
    compile_us = float((item.get("baseline_us") or {}).get("compile", 0.0) or 0.0)
    path = doc.get("path") or {}
    fx = path.get("fx") or {}
    ind = path.get("inductor") or {}
    if not fx:  # no choice recorded (the Inductor path did not run): the fx answer from the item
        sys.path.insert(0, os.path.join(ROOT, "python"))
        from ksol.inductor_choice import fx_result
        r = fx_result(item)
        fx = {"ok": r.ok, "answer": r.answer, "answer_us": r.answer_us, "compile_us": r.compile_us, "speedup_vs_compile": r.speedup,
              "reason": r.reason}
    if not ind:
        ipath = os.path.join(a.out, pid, "inductor", "inductor.json")
        reason = "not run"
        if os.path.exists(ipath):
            with open(ipath) as fh:
                reason = json.load(fh).get("reason", "?")
        ind = {"ok": False, "reason": reason}
    chosen = path.get("chosen", "fx" if fx.get("ok") else "")
    sp = {"fx": fx.get("speedup_vs_compile", 0.0) if fx.get("ok") else 0.0,
          "inductor": ind.get("speedup_vs_compile", 0.0) if ind.get("ok") else 0.0}
    degenerate = bool((item.get("screen") or {}).get("degenerate"))
    # The fx path's two plans (--plan auto): the other plan's figure, where both were tried.
    plans = ""
    if item.get("plan") == "vendor":
        own = item.get("own_plan") or {}
        plans = f"vendor-call plan returned (own plan {own.get('answer_us', 0.0):.2f} us); "
    elif isinstance(item.get("vendor_plan"), dict):
        v = item["vendor_plan"]
        plans = (f"vendor-call plan {v.get('median_us', 0.0):.2f} us, not returned; " if v.get("status") == "ok"
                 else "vendor-call plan failed; ")
    return {"id": pid, "compile_us": compile_us, "fx": fx, "inductor": ind, "chosen": chosen, "sp": sp,
            "delivered": sp.get(chosen, 0.0) or (1.0 if chosen else 0.0), "degenerate": degenerate,
            "plans": plans, "vendor_tried": bool(plans), "vendor_returned": item.get("plan") == "vendor",
            "note": (path.get("why") or "")[:160]}


def geomean(xs):
    xs = [x for x in xs if x > 0]
    return (math.exp(sum(math.log(x) for x in xs) / len(xs)), len(xs)) if xs else (0.0, 0)


def time_lines(pid, doc) -> list:
    """The fx path's profiled modules of one problem's JSON: torch.compile's, ksol's answer's and
    the vendor-call plan's, each as its launches and three slowest kernels (name, us)."""
    res = (doc.get("results") or [{}])[0]
    ku = res.get("kernel_us") or {}
    kn = res.get("kernels") or {}
    mods = [("torch.compile", kn.get("compile"), ku.get("compile")), ("ksol", kn.get("ksol"), ku.get("ksol"))]
    vp = res.get("vendor_plan") or {}
    mods.append(("vendor-call plan", vp.get("kernels"), vp.get("kernel_us")))
    own = res.get("own_plan")  # the vendor-call plan returned: its module is "ksol" above
    if own:
        mods[1] = ("ksol (vendor-call plan)",) + mods[1][1:]
    lines = []
    for who, count, rows in mods:
        if not rows:
            continue
        top = ", ".join(f"{r.get('name', '?')[:48]} {r.get('us', 0):.1f}" + (f" x{r['calls']}" if r.get("calls", 1) > 1 else "")
                        for r in rows[:3])
        lines.append(f"  {pid:<12} {who:<24} {count if count is not None else '?':>3} kernels: {top}")
    return lines


def table(a, ids) -> str:
    rows = [row_of(a, pid) for pid in ids]
    out = ["problem                  compile_us   fx answer        fx x    inductor answer  ind x   returned  note",
           "-" * 120]
    for r in rows:
        if "fx" not in r:
            out.append(f"{r['id']:<24} {'-':>10}   {'-':<15} {'-':>6}   {'-':<15} {'-':>6}  {'-':<9} {r['note']}")
            continue
        fx, ind = r["fx"], r["inductor"]
        fxa = fx.get("answer", "") if fx.get("ok") else "failed"
        ia = ind.get("answer", "") if ind.get("ok") else "failed"
        note = ("degenerate; " if r["degenerate"] else "") + r["plans"] + \
            (r["note"] if ind.get("ok") else "inductor: " + ind.get("reason", "")[:120])
        out.append(f"{r['id']:<24} {r['compile_us']:>10.1f}   {fxa:<15} {r['sp']['fx']:>6.3f}   {ia:<15} {r['sp']['inductor']:>6.3f}  "
                   f"{r['chosen'] or '-':<9} {note}")
    counted = [r for r in rows if "fx" in r and not r["degenerate"]]
    g_fx, n_fx = geomean([r["sp"]["fx"] for r in counted])
    g_ind, n_ind = geomean([r["sp"]["inductor"] for r in counted])
    both = [r for r in counted if r["sp"]["fx"] > 0 and r["sp"]["inductor"] > 0]
    g_fx2, _ = geomean([r["sp"]["fx"] for r in both])
    g_ind2, _ = geomean([r["sp"]["inductor"] for r in both])
    g_del, n_del = geomean([r["delivered"] for r in counted])
    wins = {p: sum(1 for r in counted if r["chosen"] == p) for p in ("fx", "inductor")}
    out += ["",
            f"problems {len(rows)}; with results {sum(1 for r in rows if 'fx' in r)}; degenerate (not counted) "
            f"{sum(1 for r in rows if r.get('degenerate'))}",
            f"geomean speedup over torch.compile: fx {g_fx:.3f}x ({n_fx} problems), inductor {g_ind:.3f}x ({n_ind}); "
            f"on the {len(both)} with both: fx {g_fx2:.3f}x, inductor {g_ind2:.3f}x",
            f"returned: fx {wins['fx']}, inductor {wins['inductor']}; as delivered (the returned path) {g_del:.3f}x over "
            f"torch.compile ({n_del} problems)",
            f"inductor path kept ksol kernels on {sum(1 for r in counted if r['inductor'].get('answer') == 'inductor+ksol')} problem(s)",
            f"the fx path's vendor-call plan (--plan auto): tried on {sum(1 for r in counted if r['vendor_tried'])}, its "
            f"stitched module the fx answer on {sum(1 for r in counted if r['vendor_returned'])}"]
    docs, pids = [], []
    for pid in ids:
        jp = os.path.join(a.out, pid + ".json")
        if os.path.exists(jp):
            with open(jp) as fh:
                docs.append(json.load(fh))
            pids.append(pid)
    profiled = [line for pid, d in zip(pids, docs) for line in time_lines(pid, d)]
    if profiled:
        out += ["", "where one call's device time goes (the worker's torch.profiler rows, the three slowest kernels; "
                "results of earlier binaries have none):"] + profiled
    if docs:
        # KernelBench's own protocol over what returned (ksol_torch/report.py), per level, and the
        # binaries that ran: problems carried over from earlier calls may be of other commits.
        sys.path.insert(0, os.path.join(ROOT, "python"))
        from ksol_torch import report
        versions = sorted({d.get("ksol", "unstated (before results named it)") for d in docs})
        out += ["", "KernelBench's protocol over the returned answers (python3 -m ksol_torch report):",
                report.format_summary(report.summarize(report.from_optimize_module(docs))),
                "binaries: " + ", ".join(versions)]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--out", required=True, help="folder of the runs (OUT/<id>.json, OUT/<id>/, OUT/summary.txt)")
    ap.add_argument("--kb", default=default_kb(), help="the KernelBench copy (level1/, level2/)")
    ap.add_argument("--ksol", default="", help="the ksol binary (default build/ksol, .carry/bin/ksol, then PATH)")
    ap.add_argument("--budget-seconds", type=float, default=30, help="each problem's search budget, per path (default 30)")
    ap.add_argument("--budget-candidates", type=int, default=34,
                    help="each path's most candidates (default 34: the seed and three generations of the expert's 11), "
                         "whichever of it and --budget-seconds comes first")
    ap.add_argument("--timeout", type=float, default=1200, help="a problem running longer is stopped and recorded as timed out")
    ap.add_argument("--gpus", type=int, default=1, help="problems at once, one per GPU")
    ap.add_argument("--deadline", type=float, default=0, help="seconds from now after which nothing runs: problems cut then are "
                                                              "not recorded (the next call runs them)")
    ap.add_argument("--min-left", type=float, default=240, help="no problem starts with fewer seconds left before the deadline (nor with fewer than "
                         "an earlier call took to finish it, or else the median wall time of the problems this call "
                         "finished, nor than an earlier cut's time)")
    ap.add_argument("--set", choices=("rule", "all"), default="rule",
                    help="rule: the 40 problems (every fifth of each level; the default); all: every problem of levels 1 "
                         "and 2 (the further problems; keep their OUT apart from the rule's)")
    ap.add_argument("--only", default="", help="ids to run whatever OUT holds, in this order, e.g. level1-5,level2-40 (each one of --set's problems, else an error)")
    ap.add_argument("--retry", action="store_true", help="run again the problems recorded as timed out")
    ap.add_argument("--precision", choices=("default", "strict", "tf32"), default="default",
                    help="ksol optimize's --precision for every problem (default: default); OUT holds one mode")
    ap.add_argument("--path", choices=("best", "fx"), default="best",
                    help="ksol optimize's --path for every problem: best (default: the fx lowering and the Inductor path) or fx alone")
    ap.add_argument("--table-only", action="store_true", help="print the table of what OUT holds, run nothing")
    ap.add_argument("--archive", default="", metavar="FILE",
                    help="also write OUT as one .tar.gz, after each problem and at the end (for a machine that "
                         "returns few files)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    probs = problems(a.kb, a.set == "all")
    if a.set == "rule" and len(probs) != 40:
        print(f"warning: {len(probs)} problems under {a.kb} (the rule gives 40)", file=sys.stderr)
    ids = [pid for pid, _ in probs]
    if not a.table_only:
        mixed = other_modes(a, ids)
        if mixed:
            sys.exit(f"error: {a.out} holds results made under another precision than --precision {a.precision} (" +
                     ", ".join(f"{pid}: {mode}" for pid, mode in mixed[:5]) + (", ..." if len(mixed) > 5 else "") +
                     "): give each mode an --out of its own")
        a.ksol = a.ksol or default_ksol()
        a.deadline = time.time() + a.deadline if a.deadline else 0
        only = [s.strip() for s in a.only.split(",") if s.strip()]
        unknown = sorted(set(only) - set(ids))
        if unknown:
            sys.exit(f"error: --only names {', '.join(unknown)}, not among the {len(ids)} problems of --set {a.set} under "
                     f"{a.kb} (ids are level1-N or level2-N; the further problems need --set all)")
        todo = []
        path_of = dict(probs)
        if only:  # in the order given
            todo = [(pid, path_of[pid]) for pid in dict.fromkeys(only)]
        for pid, path in probs if not only else ():
            if os.path.exists(os.path.join(a.out, pid + ".json")):
                continue
            if os.path.exists(os.path.join(a.out, pid + ".timeout.json")) and not a.retry:
                continue
            todo.append((pid, path))
        todo = order(a, todo)
        print(f"{len(todo)} problem(s) to run, {len(probs) - len(todo)} done or skipped; {a.ksol}", flush=True)
        run_all(a, todo)
    text = table(a, ids)
    with open(os.path.join(a.out, "summary.txt"), "w") as fh:
        fh.write(text)
    print(text, end="")
    if a.archive:
        write_archive(a)
        print(f"archive: {a.archive}")


if __name__ == "__main__":
    main()
