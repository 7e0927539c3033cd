#!/usr/bin/env python3
"""A scripted stand-in for ksol-worker: speaks the same line protocol and misbehaves on
request, so the coordinator's timeouts, crash handling and restarts are tested without a GPU.

Each eval request's candidate_so names a behaviour by its file name: ok, crash, hang, fatal,
garbage, wrong (a failed correctness gate), far (stopped as far slower than the fastest baseline,
asked or not; an eval with stop_above_us below SCRIPTED_US is stopped so too). A screen request times every library at SCRIPTED_US. With SCRIPTED_LOG set, each eval appends
"<device> <candidate_so>" to that file (device: the --device argument, else 0; under mpirun
r<rank>:<device>), so tests can see
which worker evaluated what. With SCRIPTED_KILL_RANK=R, the first eval a worker of MPI rank R
receives kills that rank (the worker's parent, a ksol-mpi relay) with SIGKILL while the eval is in
flight; SCRIPTED_SLEEP_S makes each passing eval take that long; SCRIPTED_KILL_MARK names the file that records it was done, so it happens once."""
import json, os, signal, sys, time

out = sys.stdout
device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "0"
if os.environ.get("OMPI_COMM_WORLD_RANK"):  # under mpirun the log names the rank too: r2:0
    device = "r" + os.environ["OMPI_COMM_WORLD_RANK"] + ":" + device
for line in sys.stdin:
    req = json.loads(line)
    rid = req.get("id", 0)
    op = req.get("op")
    if op == "hello":
        out.write(json.dumps({"id": rid, "ok": True, "protocol": 1, "gpu": True,
                              "device": {"name": "NVIDIA H200", "uuid": "scripted", "sm_count": 132}}) + "\n")
    elif op == "exit":
        out.write(json.dumps({"id": rid, "ok": True}) + "\n"); out.flush(); sys.exit(0)
    elif op == "eval":
        mode = os.path.basename(req["candidate_so"]).split(".")[0]
        if os.environ.get("SCRIPTED_LOG"):
            with open(os.environ["SCRIPTED_LOG"], "a") as log:
                log.write(f"{device} {req['candidate_so']}\n")
        if os.environ.get("SCRIPTED_MODE"):
            mode = os.environ["SCRIPTED_MODE"]
        kill_rank = os.environ.get("SCRIPTED_KILL_RANK")
        mark = os.environ.get("SCRIPTED_KILL_MARK", "")
        if kill_rank and os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK")) == kill_rank and mark and not os.path.exists(mark):
            open(mark, "w").write(f"{req['candidate_so']}\n")
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(1)  # the reply would go nowhere: the relay is gone
            sys.exit(0)
        if mode == "crash":
            sys.stderr.write("scripted crash\n"); sys.stderr.flush(); os._exit(139)
        if mode == "hang":
            time.sleep(3600)
        if mode == "fatal":
            out.write(json.dumps({"id": rid, "ok": False, "fatal": True, "error": "candidate crashed: cudaErrorIllegalAddress"}) + "\n")
            out.flush(); sys.exit(3)
        if mode == "garbage":
            out.write("this is not json\n"); out.flush(); continue
        if mode == "wrong":
            res = {"status": "failed", "failed_gate": "correctness", "error_class": "wrong_result",
                   "message": "output 'y': 3 of 10 elements out of tolerance", "gates": []}
        elif mode == "far" or (req.get("stop_above_us", 0) > 0 and float(os.environ.get("SCRIPTED_US", "100")) > req["stop_above_us"]):
            # A baseline stopped after its first calls (mode "far": whether asked or not).
            us = float(os.environ.get("SCRIPTED_US", "100"))
            res = {"status": "far_slower", "message": f"one call took {us} us",
                   "gates": [{"gate": "probe", "ok": False, "us": us, "calls_us": [us * 1.1, us],
                              "stop_above_us": req.get("stop_above_us", 0)}],
                   "harness_seconds": {"total": 0.002, "probe": 0.002}}
        elif req.get("prune_above_us", 0) > 0 and float(os.environ.get("SCRIPTED_US", "100")) > req["prune_above_us"]:
            res = {"status": "failed", "failed_gate": "screen", "error_class": "slower_than_best",
                   "message": f"screened out: above {req['prune_above_us']} us", "gates": []}
        else:
            us = float(os.environ.get("SCRIPTED_US", "100"))
            time.sleep(float(os.environ.get("SCRIPTED_SLEEP_S", "0")))  # a GPU's time per evaluation
            res = {"status": "ok", "gates": [{"gate": "correctness", "ok": True}, {"gate": "timing", "ok": True}],
                   "timing": {"median_us": us, "ci_low_us": us * 0.99, "ci_high_us": us * 1.01,
                              "raw_us": [us * 0.99, us, us * 1.01], "clock_mhz_after": 1980, "throttled": False}}
        out.write(json.dumps({"id": rid, "ok": True, "result": res}) + "\n")
    elif op == "screen":
        # Every library times SCRIPTED_US (default 100) unless SCRIPTED_MODE says otherwise.
        if os.environ.get("SCRIPTED_LOG"):
            with open(os.environ["SCRIPTED_LOG"], "a") as log:
                for so in req["candidates"]:
                    log.write(f"{device} {so}\n")
        mode = os.environ.get("SCRIPTED_MODE", "")
        if mode == "crash":
            sys.stderr.write("scripted crash\n"); sys.stderr.flush(); os._exit(139)
        us = float(os.environ.get("SCRIPTED_US", "100"))
        results = [{"status": "ok", "median_us": us, "ci_low_us": us, "ci_high_us": us, "min_us": us,
                    "samples": [us] * 10, "dropped": False} for _ in req["candidates"]]
        out.write(json.dumps({"id": rid, "ok": True, "result": {"size": req["size"], "rounds": 5, "results": results,
                                                                "harness_seconds": {"total": 0.01}}}) + "\n")
    else:
        out.write(json.dumps({"id": rid, "ok": False, "error": "unknown op"}) + "\n")
    out.flush()
