"""The host's cost of a call of ksol's kernels through each path a returned module can take: ksol's
torch op (ksol::run, python/ksol_torch/abi_op.py) and ctypes (abi.Library), on a GPU.

    python3 python/examples/bench_call_path.py [RUN_DIR] [--calls N] [--rounds R] [--json FILE]

RUN_DIR is a run folder that returned kernels (ksol.optimize's, or `ksol optimize FILE.py
--report DIR`'s). Without one, the script writes a run of Softsign on [16, 1024] whose kernel is
a small CUDA library to ksol's ABI, built here with nvcc: a stand-in for a run's kernel, taking a
few microseconds, so that the host's part of a call is what the times show.

The run is loaded once per path (ksol.load(run, call_path=...), verified), then each row is timed
in R rounds of N back-to-back calls after a warm-up:

  host_us  the host's time per call: perf_counter around the N calls, nothing synchronized in
           between (while the GPU keeps up, the host's cost of a call)
  wall_us  per call, CUDA events around the same N calls (the GPU's time, when it is the slower)

Rows: the module through each path; the kernel object alone through each path (the module's
Python around it left out; one-program runs); the original PyTorch module (eager). Each row is
the median of its rounds; --json writes every round's numbers with the versions and the GPU.
Without a GPU it says so and exits with status 77.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import ksol

STAND_IN_CU = r"""
#include <cuda_runtime.h>
#include <ksol/abi.h>

__global__ void softsign(const float* x, float* y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] / (1.0f + fabsf(x[i]));
}

extern "C" int ksol_run(const ksol_call* c) {
  if (!c || c->abi_version != KSOL_ABI_VERSION || c->num_tensors != 2 || c->num_dims != 2) return 1;
  const long long n = c->dims[0] * c->dims[1];
  softsign<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)c->stream>>>((const float*)c->tensors[0], (float*)c->tensors[1], n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""


class Softsign(torch.nn.Module):
    def forward(self, x):
        return x / (1 + torch.abs(x))


def stand_in_run(folder: str) -> str:
    """A run folder of Softsign on [16, 1024] returning one program, its library built by nvcc
    from STAND_IN_CU (the repository's include/ksol/abi.h, or KSOL_HOME's)."""
    from ksol.binaries import source_tree
    from ksol.serialize import write_problem

    root = os.environ.get("KSOL_HOME") or source_tree()
    include = os.path.join(root or "", "include")
    if not os.path.isfile(os.path.join(include, "ksol", "abi.h")):
        sys.exit(f"no include/ksol/abi.h under {root!r}: set KSOL_HOME to the ksol tree, or pass a RUN_DIR")
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    files = write_problem(Softsign(), [torch.randn(16, 1024)], folder, "Softsign")
    item = {"task": "Softsign", "stop_reason": "plateau", "use_baseline": False, "best_baseline": "eager",
            "speedup_vs_best_baseline": 1.0, "baseline_us": {"eager": 0.0},
            "best": {"kernel": "softsign_stand_in", "program": "", "score_us": 0.0}}
    with open(os.path.join(folder, "results.json"), "w") as fh:
        json.dump({"run": 0, "gpu": {"name": torch.cuda.get_device_name()}, "problem": files.path, "results": [item]}, fh, indent=2)
    os.makedirs(os.path.join(folder, "lib"), exist_ok=True)
    cu = os.path.join(folder, "softsign_stand_in.cu")
    with open(cu, "w") as fh:
        fh.write(STAND_IN_CU)
    major, minor = torch.cuda.get_device_capability()
    subprocess.run([nvcc, "-O2", "-shared", "-Xcompiler", "-fPIC", f"-arch=sm_{major}{minor}", "-I", include, cu, "-o",
                    os.path.join(folder, "lib", "best.so")], check=True)
    return folder


def time_calls(fn, calls: int, rounds: int, warmup: int = 200):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    host, wall = [], []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter_ns()
        end.record()
        end.synchronize()
        host.append((t1 - t0) / calls / 1e3)
        wall.append(start.elapsed_time(end) * 1e3 / calls)
    return {"host_us": statistics.median(host), "wall_us": statistics.median(wall), "host_samples": host, "wall_samples": wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", nargs="?", help="a run folder that returned kernels (default: a stand-in written here)")
    ap.add_argument("--calls", type=int, default=1000, help="calls per round (default 1000)")
    ap.add_argument("--rounds", type=int, default=7, help="rounds per row (default 7)")
    ap.add_argument("--json", help="write the rows, their samples and the versions here")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_call_path: no CUDA device visible to PyTorch; this benchmark needs a GPU", file=sys.stderr)
        sys.exit(77)

    from ksol_torch import abi_op

    t = time.perf_counter()
    st = abi_op.status()  # builds the extension, or finds it built
    build_s = time.perf_counter() - t
    print(f"torch op: {'built' if st.ok else 'NOT AVAILABLE: ' + st.reason} ({build_s:.1f} s, {st.build_dir}, "
          f"CUDA: {st.with_cuda}{'' if st.with_cuda else ', ' + st.cuda_reason})")

    tmp = None
    run = a.run_dir
    if run is None:
        tmp = tempfile.mkdtemp(prefix="ksol-bench-call-path-")
        run = stand_in_run(os.path.join(tmp, "run"))
    mods = {}
    for path in ("torch-op", "ctypes"):
        m = ksol.load(run, call_path=path)
        if not getattr(m, "uses_ksol_kernels", False):
            sys.exit(f"{run}: the run returned PyTorch itself ({m.ksol_result.reason}); pass a run that returned kernels, "
                     "or none for the stand-in")
        mods[path] = m
        print(f"loaded {path}: ksol_call_path={m.ksol_call_path}, verified (worst error / tolerance "
              f"{m.ksol_verification['worst_error_over_tolerance']:.3g})")

    from ksol.module import _example

    from ksol_torch import problem
    args = _example(problem.load(mods["ctypes"].ksol_result.problem), "cuda")
    with torch.no_grad():
        same = [torch.equal(mods["torch-op"](*args), mods["ctypes"](*args))]
    rows = {}
    for path, m in mods.items():
        rows[f"module {path}"] = time_calls(lambda m=m: m(*args), a.calls, a.rounds)
    for path, m in mods.items():
        if m.stitched is None:
            table = [x for x in args if isinstance(x, torch.Tensor)] + list(m.model.state_dict().values())
            k = m.ksol_kernels[0]
            rows[f"kernel {path}"] = time_calls(lambda k=k: k(table), a.calls, a.rounds)
    model = mods["ctypes"].model

    def eager():
        with torch.no_grad():
            model(*args)

    rows["pytorch eager"] = time_calls(eager, a.calls, a.rounds)

    print(f"\n{run} ({mods['ctypes'].ksol_result.kernel}); {torch.cuda.get_device_name()}, PyTorch {torch.__version__}, "
          f"Python {platform.python_version()}; {a.rounds} rounds of {a.calls} calls, medians; outputs equal: {all(same)}")
    print(f"{'row':<18} {'host_us':>9} {'wall_us':>9}")
    for name, r in rows.items():
        print(f"{name:<18} {r['host_us']:9.2f} {r['wall_us']:9.2f}")
    if a.json:
        doc = {"run_dir": run, "kernel": mods["ctypes"].ksol_result.kernel, "gpu": torch.cuda.get_device_name(),
               "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
               "calls": a.calls, "rounds": a.rounds, "op_build_seconds": build_s, "op_build_dir": st.build_dir,
               "outputs_equal": all(same), "rows": rows, "command": sys.argv}
        with open(a.json, "w") as fh:
            json.dump(doc, fh, indent=2)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
