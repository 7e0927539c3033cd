#!/usr/bin/env python3
"""Where evaluations spent their wall time: the worker's harness_seconds, kept in each
evaluation's rerun_json, summed per task and size. Usage: harness_phases.py STORE.db [RUN]"""
import json
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
run = sys.argv[2] if len(sys.argv) > 2 else db.execute("select max(id) from runs").fetchone()[0]
keys = ["total", "correctness_gate", "timing_gate", "generate_inputs", "references", "checked_calls"]
print(f"run {run}: seconds per evaluation (the gates include the three parts after them)")
print(f"{'task':24} {'candidate':18} {'size':16} " + " ".join(f"{k:>16}" for k in keys))
rows = db.execute(
    "select t.name, c.origin, e.size_name, e.rerun_json from evaluations e join tasks t on t.id = e.task_id "
    "join candidates c on c.id = e.candidate_id where e.run_id = ? order by e.id", (run,))
total = 0.0
for task, cand, size, rr in rows:
    h = json.loads(rr or "{}").get("harness_seconds")
    if not h:
        continue
    total += h["total"]
    print(f"{task:24} {cand[:18]:18} {size:16} " + " ".join(f"{h.get(k, 0):16.2f}" for k in keys))
print(f"sum of totals: {total:.1f} s")
