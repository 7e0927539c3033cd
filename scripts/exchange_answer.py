#!/usr/bin/env python3
"""Plays the person at an exchange folder: waits for ksol's requests in DIR/requests/ and answers
each one (moved into DIR/answers/<hash>.md atomically).
ANSWER is a file, whose text answers every request, or a folder of answers by role: the n-th
request whose purpose is P (planner, coder, optimizer, reviewer, repairer) gets P-n.md, else the
highest-numbered P-i.md below n, else P.md; a request with none of these is left unanswered.
usage: exchange_answer.py DIR ANSWER [--max N] [--timeout S]"""
import argparse
import glob
import json
import os
import re
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("answer")
ap.add_argument("--max", type=int, default=1, help="answer this many requests, then stop")
ap.add_argument("--timeout", type=float, default=600)
a = ap.parse_args()
asked = {}  # purpose -> requests of that purpose answered so far


def answer_for(request_md):
    """The answer text for one request, or None when the folder has none for its role."""
    if not os.path.isdir(a.answer):
        return open(a.answer).read()
    with open(request_md[:-3] + ".json") as fh:
        purpose = json.load(fh)["purpose"]
    n = asked.get(purpose, 0) + 1
    numbered = {}
    for f in glob.glob(os.path.join(a.answer, purpose + "-*.md")):
        m = re.fullmatch(re.escape(purpose) + r"-(\d+)\.md", os.path.basename(f))
        if m:
            numbered[int(m.group(1))] = f
    below = [i for i in numbered if i <= n]
    path = numbered[max(below)] if below else os.path.join(a.answer, purpose + ".md")
    if not os.path.isfile(path):
        print(f"no answer for {purpose} request {n} in {a.answer}", flush=True)
        return None
    asked[purpose] = n
    print(f"{purpose} request {n}: {os.path.basename(path)}", flush=True)
    with open(path) as fh:
        return fh.read()


done, t0 = set(), time.time()
while len(done) < a.max and time.time() - t0 < a.timeout:
    req = os.path.join(a.dir, "requests")
    # Oldest first: requests of one run come one at a time, but a folder may hold earlier ones.
    names = [f for f in os.listdir(req) if f.endswith(".md")] if os.path.isdir(req) else []
    for f in sorted(names, key=lambda f: os.path.getmtime(os.path.join(req, f))):
        if f in done or not os.path.exists(os.path.join(req, f[:-3] + ".json")):
            continue  # the .json is written after the .md
        text = answer_for(os.path.join(req, f))
        done.add(f)
        if text is None:
            continue
        out = os.path.join(a.dir, "answers", f)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out + ".tmp", "w") as fh:
            fh.write(text)
        os.replace(out + ".tmp", out)
        print(f"answered {f}", flush=True)
        if len(done) >= a.max:
            break
    time.sleep(0.2)
sys.exit(0 if done else 1)
