#!/usr/bin/env python3
"""Answers a ksol batch folder offline (ksol optimize --agent batch:FORMAT:MODEL:DIR): takes batch N
(default: the last one without results), and writes DIR/results-N.jsonl with one result per line
of DIR/requests-N.jsonl, in the batch's provider format (src/agents/README.md, batch mode). The
answer to every request is the text of ANSWER, or what COMMAND prints when given the request line
on its standard input (a command that fails gives an error line: HTTP 500, which ksol puts into
the next batch once). Offline answers carry no token counts.
usage: batch_answer.py DIR (ANSWER | --command COMMAND) [--batch N]"""
import argparse
import json
import os
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("answer", nargs="?", help="a file whose text answers every request")
ap.add_argument("--command", help="a shell command: the request line on stdin, the answer's text on stdout")
ap.add_argument("--batch", type=int, help="the batch to answer (default: the last one without results)")
a = ap.parse_args()
if (a.answer is None) == (a.command is None):
    sys.exit("batch_answer.py: give ANSWER or --command, not both")
state = json.load(open(os.path.join(a.dir, "batch.json")))
fmt, model = state["format"], state["model"]
pending = [b["number"] for b in state["batches"] if not os.path.exists(os.path.join(a.dir, b["results_file"]))]
n = a.batch or (pending[-1] if pending else None)
if n is None:
    sys.exit(f"batch_answer.py: every batch in {a.dir} has its results")
fixed = open(a.answer).read() if a.answer else None


def result(i, line):
    """The provider's result line for one request line."""
    text, error = fixed, None
    if a.command:
        p = subprocess.run(a.command, shell=True, input=json.dumps(line), capture_output=True, text=True)
        text, error = (p.stdout, None) if p.returncode == 0 else (None, p.stderr.strip() or f"exit status {p.returncode}")
    cid = line["custom_id"]
    if fmt == "anthropic":
        if error is not None:
            return {"custom_id": cid, "result": {"type": "errored", "error": {"type": "error", "error": {"type": "api_error", "message": error}}}}
        message = {"id": f"offline-{i}", "type": "message", "role": "assistant", "model": model,
                   "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                   "usage": {"input_tokens": 0, "output_tokens": 0}}
        return {"custom_id": cid, "result": {"type": "succeeded", "message": message}}
    if error is not None:
        body = {"error": {"message": error, "type": "server_error"}}
        return {"id": f"offline-{i}", "custom_id": cid, "response": {"status_code": 500, "request_id": f"offline-{i}", "body": body}, "error": None}
    body = {"id": f"offline-{i}", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}
    return {"id": f"offline-{i}", "custom_id": cid, "response": {"status_code": 200, "request_id": f"offline-{i}", "body": body}, "error": None}


with open(os.path.join(a.dir, f"requests-{n}.jsonl")) as f:
    lines = [json.loads(l) for l in f if l.strip()]
out = os.path.join(a.dir, f"results-{n}.jsonl")
with open(out + ".tmp", "w") as f:
    for i, line in enumerate(lines):
        f.write(json.dumps(result(i, line)) + "\n")
os.replace(out + ".tmp", out)  # whole or not at all: ksol reads every results-N*.jsonl it finds
print(f"answered batch {n}: {len(lines)} request(s) in {out}")
