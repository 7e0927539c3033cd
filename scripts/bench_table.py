#!/usr/bin/env python3
"""The table of a bench pass that was resumed across runs: every (task, baseline, size) of the
last run's JSON (bench --json-out), with the status and timing of the evaluation it reused or
made, and from the store the worker's wall time of each, summed into the cost of one full pass.
Usage: bench_table.py BENCH.json STORE.db"""
import json
import sqlite3
import sys
from collections import Counter

doc = json.load(open(sys.argv[1]))
db = sqlite3.connect(sys.argv[2])
secs = {}
for eid, run, rr in db.execute("select id, run_id, rerun_json from evaluations"):
    h = json.loads(rr or "{}").get("harness_seconds") or {}
    secs[eid] = (run, h.get("total", 0.0))

status, per_run, seconds, n = Counter(), Counter(), 0.0, 0
naive = {}
for r in doc["results"]:
    if r["candidate"] == "baseline:naive":
        for s in r["sizes"]:
            naive[(r["task"], s["size"])] = s.get("median_us", 0)
print(f"{'task':24} {'baseline':18} {'size':16} {'status':7} {'median':>12} {'SOL':>11} {'%SOL':>6} {'vs naive':>8} {'run':>3} {'eval s':>7}")
for r in doc["results"]:
    for s in r["sizes"]:
        st = s["status"]
        if st == "skipped" and s.get("result", {}).get("resumed"):
            st = s["result"]["status"]
        run, sec = secs.get(s.get("evaluation_id", 0), (0, 0.0))
        status[st] += 1
        per_run[run] += 1
        seconds += sec
        n += 1
        med = s.get("median_us", 0)
        nv = naive.get((r["task"], s["size"]), 0)
        speed = f"{nv / med:.2f}x" if med > 0 and nv > 0 else "-"
        name = s["size"] + ("*" if s.get("hidden") else "")
        print(f"{r['task']:24} {r['candidate'][9:]:18} {name:16} {st:7} {med:10.2f}us {s.get('sol_us', 0):9.2f}us "
              f"{s.get('pct_sol', 0):5.1f}% {speed:>8} {run:3} {sec:7.1f}")
print(f"\n{n} evaluations ({len(doc['results'])} baselines): " + ", ".join(f"{k} {v}" for k, v in sorted(status.items())))
print("made in runs: " + ", ".join(f"{k}: {v}" for k, v in sorted(per_run.items())))
print(f"worker wall time of one full pass (sum over the evaluations): {seconds:.0f} s = {seconds / 60:.1f} GPU-minutes")
