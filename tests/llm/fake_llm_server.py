#!/usr/bin/env python3
"""A scripted LLM server on loopback for the tests: speaks OpenAI chat completions
(POST .../chat/completions) and Anthropic messages (POST .../v1/messages).

usage: fake_llm_server.py SCRIPT.json LOG.jsonl
Prints "PORT <n>" once listening. SCRIPT is a list of replies served in order, each
{"status": 200, "content": "...", "finish": "stop", "retry_after": 0.1, "raw": "<body as is>",
 "prompt_tokens": 10, "completion_tokens": 20}; after the last, every request gets HTTP 500.
Every request is appended to LOG as {"path", "headers", "body"}."""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

script = json.load(open(sys.argv[1]))
log_path = sys.argv[2]
lock = threading.Lock()
served = [0]


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(n).decode()
        with lock:
            i = served[0]
            served[0] += 1
            with open(log_path, "a") as fh:
                fh.write(json.dumps({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)}) + "\n")
        r = script[i] if i < len(script) else {"status": 500, "raw": "script exhausted"}
        status = r.get("status", 200)
        if "raw" in r:
            out = r["raw"]
        elif status != 200:
            out = json.dumps({"error": r.get("error", "scripted error")})
        elif self.path.endswith("/v1/messages"):
            out = json.dumps({"content": [{"type": "text", "text": r.get("content", "")}],
                              "stop_reason": "max_tokens" if r.get("finish") == "length" else "end_turn",
                              "usage": {"input_tokens": r.get("prompt_tokens", 10), "output_tokens": r.get("completion_tokens", 20)}})
        else:
            out = json.dumps({"choices": [{"message": {"role": "assistant", "content": r.get("content", "")},
                                           "finish_reason": r.get("finish", "stop")}],
                              "usage": {"prompt_tokens": r.get("prompt_tokens", 10), "completion_tokens": r.get("completion_tokens", 20)}})
        data = out.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if "retry_after" in r:
            self.send_header("Retry-After", str(r["retry_after"]))
        self.end_headers()
        self.wfile.write(data)


srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
print("PORT", srv.server_address[1], flush=True)
srv.serve_forever()
