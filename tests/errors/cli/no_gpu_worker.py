#!/usr/bin/env python3
"""A stand-in for ksol-worker on a machine without a GPU: it answers hello with gpu false and a
fixed reason, so that the no-GPU paths of the CLI print the same first line on every machine."""
import json, sys

for line in sys.stdin:
    req = json.loads(line)
    rid = req.get("id", 0)
    if req.get("op") == "hello":
        sys.stdout.write(json.dumps({"id": rid, "ok": True, "protocol": 1, "gpu": False, "reason": "scripted: no GPU"}) + "\n")
    elif req.get("op") == "exit":
        sys.stdout.write(json.dumps({"id": rid, "ok": True}) + "\n")
        sys.stdout.flush()
        sys.exit(0)
    else:
        sys.stdout.write(json.dumps({"id": rid, "ok": False, "error": "no GPU: " + str(req.get("op"))}) + "\n")
    sys.stdout.flush()
