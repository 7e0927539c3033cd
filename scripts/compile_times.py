#!/usr/bin/env python3
"""Compile time per DSL candidate, the bound on how fast a search can go: for each seed program
(tasks/*/*/program.ksol, or the tasks named), N legal schedules spread over its space (`ksol dsl
space`) are written as programs and compiled with `ksol eval --compile-only` into an empty cache,
one at a time; medians per generator (the GEMM's CUTLASS path apart from its SIMT path).
Usage: compile_times.py [-n N] [--ksol build/ksol] [TASK ...]"""
import argparse
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("tasks", nargs="*")
ap.add_argument("-n", type=int, default=3, help="schedules per program (the seed's own first)")
ap.add_argument("--ksol", default="build/ksol")
a = ap.parse_args()

seeds = sorted(glob.glob("tasks/*/*/program.ksol"))
if a.tasks:
    seeds = [s for s in seeds if s.split("/")[2] in a.tasks]


def split_top(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


rows = []
cache = tempfile.mkdtemp(prefix="ksol-compile-times-")
env = dict(os.environ, KSOL_CACHE_DIR=cache)
for seed in seeds:
    task = seed.split("/")[2]
    text = open(seed).read()
    sp = subprocess.run([a.ksol, "dsl", "space", seed, "--task", task, "--show", "100000"], capture_output=True, text=True)
    head = sp.stdout.splitlines()[0] if sp.stdout else ""
    family = re.search(r"\((\w+)\)", head).group(1) if "(" in head else "?"
    legal = [l.split("legal: ", 1)[1] for l in sp.stdout.splitlines() if l.strip().startswith("legal: ")]
    picks = [None] + [legal[(i * len(legal)) // a.n] for i in range(1, a.n)] if legal else [None]
    for pick in picks[: a.n]:
        prog = text
        if pick:
            body = "\n".join("  " + kv for kv in split_top(pick))
            prog = re.sub(r"schedule\s*\{[^}]*\}", "schedule {\n" + body + "\n}", text, flags=re.S)
        with tempfile.NamedTemporaryFile("w", suffix=".ksol", delete=False) as fh:
            fh.write(prog)
        t0 = time.time()
        r = subprocess.run([a.ksol, "--store", "", "eval", "--task", task, "--candidate", fh.name, "--compile-only"],
                           capture_output=True, text=True, env=env)
        dt = time.time() - t0
        os.unlink(fh.name)
        path = family
        if family == "gemm":
            sched = pick or re.search(r"schedule\s*\{([^}]*)\}", text, re.S).group(1)
            path = "gemm (SIMT)" if "simt" in sched else "gemm (CUTLASS sm90)"
        ok = r.returncode == 0
        rows.append((task, path, dt, ok, pick or "(seed)"))
        print(f"{task:22} {path:20} {dt:7.1f} s {'ok' if ok else 'FAILED'}  {pick or '(seed schedule)'}", flush=True)

print("\nmedian compile time per candidate (cold cache, one nvcc at a time):")
for path in sorted({r[1] for r in rows}):
    ts = [r[2] for r in rows if r[1] == path and r[3]]
    if ts:
        print(f"  {path:20} {statistics.median(ts):7.1f} s  (n={len(ts)}, min {min(ts):.1f}, max {max(ts):.1f})")
print(f"machine: {os.cpu_count()} cores; {subprocess.run(['nvcc', '--version'], capture_output=True, text=True).stdout.splitlines()[-2]}")
