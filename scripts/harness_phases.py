#!/usr/bin/env python3
"""Where evaluations spent their wall time: the worker's harness_seconds, kept in each
evaluation's rerun_json, summed per task and size. Usage: harness_phases.py STORE.db [RUN]"""
import json
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
run = sys.argv[2] if len(sys.argv) > 2 else db.execute("select max(id) from runs").fetchone()[0]
keys = ["total", "correctness_gate", "timing_gate", "generate_inputs", "references", "checked_calls",
        "verified_timed_calls", "launcher_start", "launcher_round_trips", "launcher_spare"]
print(f"run {run}: seconds per evaluation (the gates include the three parts after them; launcher_start: waiting for\n"
      "the candidate's launcher and setting it up, launcher_round_trips: the round trips' overhead over the calls' own time,\n"
      "launcher_spare: waiting for the next launcher's context before timing)")
print(f"{'task':24} {'candidate':18} {'size':16} " + " ".join(f"{k:>16}" for k in keys))
rows = db.execute(
    "select t.name, c.origin, e.size_name, e.rerun_json from evaluations e join tasks t on t.id = e.task_id "
    "join candidates c on c.id = e.candidate_id where e.run_id = ? order by e.id", (run,))
total = 0.0
iso = []
for task, cand, size, rr in rows:
    h = json.loads(rr or "{}").get("harness_seconds")
    if not h:
        continue
    total += h["total"]
    iso.append(h.get("launcher_start", 0) + h.get("launcher_round_trips", 0) + h.get("launcher_spare", 0))
    print(f"{task:24} {cand[:18]:18} {size:16} " + " ".join(f"{h.get(k, 0):16.2f}" for k in keys))
print(f"sum of totals: {total:.1f} s")
if iso:
    iso.sort()
    print(f"isolation per evaluation (launcher_start + launcher_round_trips + launcher_spare): median {1000 * iso[len(iso) // 2]:.1f} ms, "
          f"mean {1000 * sum(iso) / len(iso):.1f} ms, max {1000 * iso[-1]:.1f} ms over {len(iso)} evaluations")
