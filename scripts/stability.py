#!/usr/bin/env python3
"""Reads `ksol eval --json` outputs of the same candidate timed in separate processes and
prints each process's median with the spread: (max - min) / median of the medians."""
import collections, json, statistics, sys

by = collections.defaultdict(list)
for path in sys.argv[1:]:
    j = json.load(open(path))
    c = j["candidate"]
    for s in c["sizes"]:
        by[(c["task"], c["candidate"], s["size"])].append((s["median_us"], s["status"], s.get("result", {}).get("timing", {}).get("clock_mhz_after")))
worst = 0.0
for key, rows in sorted(by.items()):
    meds = [r[0] for r in rows]
    mid = statistics.median(meds)
    spread = (max(meds) - min(meds)) / mid if mid else float("inf")
    dev = max(abs(m - mid) / mid for m in meds) if mid else float("inf")
    worst = max(worst, dev)
    print(f"{key[0]} / {key[1]} / {key[2]}: medians (us) {', '.join(f'{m:.2f}' for m in meds)}; "
          f"statuses {sorted(set(r[1] for r in rows))}; clocks {[r[2] for r in rows]}; "
          f"spread {spread * 100:.2f}%, max deviation from the median of medians {dev * 100:.2f}%")
print(f"worst deviation {worst * 100:.2f}% ({'within' if worst <= 0.02 else 'OUTSIDE'} +-2%)")
