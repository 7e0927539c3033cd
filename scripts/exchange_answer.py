#!/usr/bin/env python3
"""Plays the person at an exchange folder: waits for ksol's requests in DIR/requests/ and answers
each one with the text of ANSWER (moved into DIR/answers/<hash>.md atomically).
usage: exchange_answer.py DIR ANSWER [--max N] [--timeout S]"""
import argparse
import os
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("answer")
ap.add_argument("--max", type=int, default=1, help="answer this many requests, then stop")
ap.add_argument("--timeout", type=float, default=600)
a = ap.parse_args()
text = open(a.answer).read()
done, t0 = set(), time.time()
while len(done) < a.max and time.time() - t0 < a.timeout:
    req = os.path.join(a.dir, "requests")
    for f in sorted(os.listdir(req)) if os.path.isdir(req) else []:
        if not f.endswith(".md") or f in done:
            continue
        out = os.path.join(a.dir, "answers", f)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out + ".tmp", "w") as fh:
            fh.write(text)
        os.replace(out + ".tmp", out)
        done.add(f)
        print(f"answered {f}", flush=True)
    time.sleep(0.2)
sys.exit(0 if done else 1)
