"""Run folders as `ksol optimize FILE.py --report DIR` writes them (src/cli/optimize_module.cpp's
write_report, search::OptimizeResult::to_json), for the package's tests, and the helpers they share."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

try:
    import torch
except ImportError:  # the tests that need it are skipped, with the reason below
    torch = None

needs_torch = unittest.skipIf(torch is None, "needs PyTorch (setup.sh installs Debian's python3-torch; KSOL_PYTHON "
                                             "picks another interpreter)")
needs_cc = unittest.skipIf(shutil.which("cc") is None, "needs a C compiler (cc) for the host-memory ABI libraries")

PROGRAM = ("kernel model(input0: f32[M, K], w_net_weight: f32[N, K], w_net_bias: f32[N]) -> (output0: f32[M, N]) {\n"
           "  acc[m, n] = sum(input0[m, k] * w_net_weight[n, k]) over k\n"
           "  output0[m, n] = (relu((acc[m, n] + w_net_bias[n])))\n}\nschedule {\n  tile = [64, 64, 16]\n}\n")


def item_one_program(use_baseline=False, score_us=80.0, speedup=1.25):
    """A results item of a module whose whole forward is one DSL program (OptimizeResult::to_json
    plus what run_optimize_module adds)."""
    return {"task": "Net", "stop_reason": "plateau", "candidates": 5, "use_baseline": use_baseline, "best_baseline": "compile",
            "speedup_vs_best_baseline": speedup if not use_baseline else 1.0, "trajectory": [], "log": [],
            "best": {"index": 3, "kernel": "gemm_model_f32_64x64x16_simt", "program": PROGRAM, "schedule": "tile = [64, 64, 16]",
                     "score_us": score_us, "candidate_id": 12},
            "seed_program": PROGRAM, "baseline_us": {"eager": 120.0, "compile": 100.0},
            "kernelbench": {"correct": True}, "screen": {"verdict": "ok", "degenerate": False}}


def item_stitched(pieces, use_baseline=False, median_us=50.0, speedup=2.0, reason=""):
    """A results item of a stitched module (run_optimize_module's not-lowered branch)."""
    return {"task": "Net", "stop_reason": "stitched", "use_baseline": use_baseline, "reason": reason, "candidates": 4,
            "speedup_vs_best_baseline": speedup if not use_baseline else 1.0, "best_baseline": "eager",
            "baseline_us": {"eager": 100.0, "compile": 0.0}, "pieces": pieces, "piece_search": [],
            "stitched": {"status": "ok", "median_us": median_us, "seeds_median_us": median_us, "message": ""},
            "kernelbench": {"correct": True}}


def item_not_lowered(reason="cumsum has no DSL form"):
    return {"task": "Net", "stop_reason": "not_lowered", "use_baseline": True, "reason": reason, "candidates": 0,
            "speedup_vs_best_baseline": 1.0, "best_baseline": "compile", "baseline_us": {"eager": 30.0, "compile": 20.0},
            "kernelbench": {"correct": False, "error": "not lowered: the faster baseline is returned"}}


def write_run(folder, problem, item, emulated=False, gpu="NVIDIA H200"):
    """results.json (and report.md) in `folder` for a run of `problem`."""
    os.makedirs(folder, exist_ok=True)
    doc = {"run": 0, "gpu": {"name": gpu}, "agent": "expert", "problem": problem, "results": [item]}
    if emulated:
        doc["emulated"] = True
    with open(os.path.join(folder, "results.json"), "w") as fh:
        json.dump(doc, fh, indent=2)
    with open(os.path.join(folder, "report.md"), "w") as fh:
        fh.write("# report\n")
    return doc


def build_library(source, out, *flags):
    """A host shared library from one of tests/python/libs' C files, built to include/ksol/abi.h."""
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I", os.path.join(ROOT, "include"), *flags,
                    os.path.join(HERE, "libs", source), "-o", out], check=True)
    return out


class TempDir(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ksol-py-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def write(self, rel, text="", mode=0o644):
        p = self.path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as fh:
            fh.write(text)
        os.chmod(p, mode)
        return p
