#!/usr/bin/env python3
"""How much of KernelBench the PyTorch front end lowers to DSL pieces, per problem and per level.

    scripts/kernelbench_coverage.py DIR [DIR ...] [--jobs N] [--timeout S] [--json-out FILE]

Each DIR is a folder of KernelBench-format problem files (KernelBench/level1, level2: a local copy,
never committed). Every file goes through `python3 -m ksol_torch stitch FILE` in a process of its
own (the problem's code runs there; a crash or a hang costs that file only), which is the plan
`ksol optimize FILE.py` runs: the forward cut into DSL pieces around the ops kept as PyTorch
calls. A problem is

- `complete`: every op that moves data runs inside a DSL piece (views and copies aside, and the
  weight preparation of WEIGHT_PREP: ops on the module's parameters alone, e.g. an average pool
  folded into the convolution's filter before it);
- `vendor`: complete but for ops kept as vendor calls by choice (VENDOR_BY_CHOICE, each with
  its reason), counted apart;
- `partial`: at least one op is kept as a PyTorch call, listed with its reason;
- `failed`: the file did not load or trace, or stitching raised, with the error.

Prints one line per problem, the blocking ops ranked by how many problems they keep from
`complete`, and the fraction of each level that is complete. Measured on the CPU: nothing runs a
kernel, the plans come from tracing on shape-only tensors where the ops allow it.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The interpreter with PyTorch, as ksol picks it: KSOL_PYTHON, else Debian's.
PYTHON = os.environ.get("KSOL_PYTHON") or ("/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable)

# Ops that move no data, or whose copy a piece does not need: never a reason for `partial`.
NO_DATA = {"view", "reshape", "flatten", "squeeze", "unsqueeze", "contiguous", "getitem", "getattr", "size", "dim",
           "detach", "clone", "expand", "expand_as", "view_as", "reshape_as", "unflatten", "dropout", "identity"}

# Ops on the module's parameters alone that a rewrite puts before a piece (stitch.WEIGHT_PREP,
# kept with a reason that starts so): they read no activation; never a reason for `partial`.
WEIGHT_PREP = "weight preparation:"

# Ops kept as vendor calls by choice although a DSL piece could be written for them: op -> why.
VENDOR_BY_CHOICE = {}


def stitch_one(path: str, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "plan.json")
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        try:
            p = subprocess.run([PYTHON, "-m", "ksol_torch", "stitch", path,
                                "--out", out], env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"file": path, "ok": False, "error": f"stitch took more than {timeout:g} s"}
        if not os.path.exists(out):
            tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
            return {"file": path, "ok": False, "error": f"stitch exited {p.returncode}: {tail}"}
        with open(out) as fh:
            return json.load(fh)


def classify(r: dict) -> dict:
    if not r.get("ok"):
        return {"status": "failed", "why": r.get("error", "?")[:200], "kept": [], "pieces": []}
    kept = [k for k in r.get("kept", []) if k["op"] not in NO_DATA and not k.get("reason", "").startswith(WEIGHT_PREP)]
    pieces = [p["family"] for p in r.get("pieces", [])]
    blocking = [k for k in kept if k["op"] not in VENDOR_BY_CHOICE]
    if not kept:
        status = "complete" if pieces else "failed"
        why = "" if pieces else "no op that moves data"
    elif not blocking:
        status, why = "vendor", "; ".join(f"{k['op']}: {VENDOR_BY_CHOICE[k['op']]}" for k in kept)
    else:
        status, why = "partial", "; ".join(sorted({f"{k['op']}: {k['reason']}" for k in blocking}))
    return {"status": status, "why": why, "kept": [k["op"] for k in blocking], "pieces": pieces}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", help="folders of problem files (one level each)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per problem")
    ap.add_argument("--json-out", help="every problem's plan and verdict as JSON")
    args = ap.parse_args()

    files = []
    for d in args.dirs:
        files += [(os.path.basename(os.path.normpath(d)), os.path.join(d, f)) for f in sorted(os.listdir(d))
                  if f.endswith(".py")]
    key = lambda lf: (lf[0], int(os.path.basename(lf[1]).split("_")[0]) if os.path.basename(lf[1])[0].isdigit() else 0)
    files.sort(key=key)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        plans = list(ex.map(lambda lf: stitch_one(lf[1], args.timeout), files))

    rows = []
    for (level, path), plan in zip(files, plans):
        v = classify(plan)
        rows.append({"level": level, "problem": os.path.basename(path), **v, "plan": plan})
        pieces = ", ".join(v["pieces"]) or "-"
        print(f"{level}/{os.path.basename(path)} | {v['status']} | pieces: {pieces} | {v['why'] or '-'}")

    print("\nops keeping problems from complete (problems per op):")
    block = collections.Counter(op for r in rows if r["status"] == "partial" for op in set(r["kept"]))
    for op, n in block.most_common():
        print(f"  {op}: {n}")
    print("\ncoverage (complete / all; vendor calls by choice and failures apart):")
    for level in sorted({r["level"] for r in rows}):
        rs = [r for r in rows if r["level"] == level]
        c = collections.Counter(r["status"] for r in rs)
        print(f"  {level}: {c['complete']}/{len(rs)} complete ({100.0 * c['complete'] / len(rs):.1f}%), "
              f"{c['vendor']} vendor by choice, {c['partial']} partial, {c['failed']} failed")
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
