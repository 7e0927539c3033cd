"""ksol.optimize: a module and example inputs through `ksol optimize FILE.py`, then the module
the run returned, built from its folder by load().

    write the problem   <run>/<Name>.py and <Name>.pt (serialize.py)
    run the CLI         ksol --json optimize <run>/<Name>.py --report <run> --budget-seconds S
    keep the libraries  the verified libraries copied into <run>/lib/, the manifest written
    load                load(<run>): the kernels checked against the original on fresh inputs
"""
import datetime
import json
import logging
import os
import shutil
import subprocess
import sys
from typing import List, Optional

from . import run_dir as rd
from .binaries import find_binaries
from .errors import NoGPUError, RunFailedError, UnsupportedError
from .module import load
from .serialize import problem_name, write_problem

log = logging.getLogger("ksol")

# The modes of `ksol optimize FILE.py --precision` (docs/TORCH.md); "fp32" and "float32" meant
# strict float32 before the modes existed, and still do.
PRECISION_ALIASES = {"default": "default", "strict": "strict", "tf32": "tf32",
                     "fp32": "strict", "float32": "strict", "torch.float32": "strict"}


def check_precision(precision) -> str:
    """The precision mode `precision` names, or UnsupportedError: "default" (PyTorch's own TF32
    switches), "strict" (IEEE float32; also "fp32"), "tf32"; eager, torch.compile and ksol's
    kernels all run under it. bf16 and fp16 modules are not lowered yet."""
    name = PRECISION_ALIASES.get(str(precision).lower())
    if name is None:
        raise UnsupportedError(f"precision {precision!r}: ksol optimizes float32 PyTorch modules under the precision modes "
                               "default, strict (also fp32) and tf32; bf16 and fp16 are not supported yet")
    return name


def _default_run_dir(name: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"module-{name}-{stamp}")


def _run_cli(cmd: List[str], env: dict, log_path: str, verbose: bool):
    """Runs `ksol optimize`: its JSON (stdout) and exit status; what it prints on stderr goes to
    `log_path`, and to our stderr with `verbose`. Ctrl-C reaches ksol too, which finishes the
    evaluation in flight and writes its report; then KeyboardInterrupt goes on up."""
    out_path = log_path + ".json"
    with open(out_path, "w") as out, open(log_path, "w") as logf:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, env=env, text=True, errors="replace")
        try:
            for line in p.stderr:
                logf.write(line)
                logf.flush()
                if verbose:
                    sys.stderr.write(line)
            rc = p.wait()
        except KeyboardInterrupt:
            p.wait()
            raise
        finally:
            p.stderr.close()
    with open(out_path) as fh:
        text = fh.read()
    os.remove(out_path)
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError:
        doc = {}
    return rc, doc


def _tail(path: str, lines: int = 30) -> str:
    with open(path, errors="replace") as fh:
        return "".join(fh.readlines()[-lines:])


def _first_line(path: str) -> str:
    with open(path, errors="replace") as fh:
        return fh.readline().strip()


def _no_gpu(doc: dict, notice: str, run_dir: str, name: str) -> NoGPUError:
    reason = doc.get("reason") or (notice.split("no GPU (", 1)[1].split("):", 1)[0] if "no GPU (" in notice else "no GPU")
    if doc.get("lowered"):
        did = f"its forward is one DSL program ({doc.get('family', '?')}) that compiles"
    elif doc.get("pieces"):
        built = sum(1 for p in doc["pieces"] if not p.get("keep"))
        did = f"it was cut into {built} DSL piece(s) that compile, around ops kept as PyTorch calls"
    else:
        did = "no part of its forward is a DSL program ksol has (PyTorch would be returned)"
    return NoGPUError(f"no GPU ({reason}): ksol traced {name} and {did}, but timing and running its kernels needs an NVIDIA "
                      "GPU (the kernels are built for sm_90: H100, H200). Run on such a machine, or pass emulate=True to "
                      f"test the whole flow on the CPU (ksol then always returns PyTorch); ksol's log: {run_dir}/ksol.log",
                      reason=reason, notice=notice, details=doc, run_dir=run_dir)


def _keep_libraries(run: rd.RunResult) -> dict:
    """Copies the libraries the run verified into <run>/lib/ (ksol leaves them in its compile
    cache, which is not kept with the folder): {name: path in the folder}."""
    kept = {}
    names = {"pytorch": [], "kernel": [("best", "")]}.get(run.answer, [(f"piece-{p.index}", p.so) for p in run.pieces if not p.keep])
    os.makedirs(os.path.join(run.run_dir, rd.LIB_DIR), exist_ok=True)
    for name, recorded in names:
        src = rd.library(run, name, recorded)
        dst = os.path.join(run.run_dir, rd.LIB_DIR, name + ".so")
        if os.path.abspath(src) != os.path.abspath(dst):
            shutil.copy2(src, dst)
        kept[name] = os.path.relpath(dst, run.run_dir)
    return kept


def optimize(model, inputs, budget_seconds: float = 60.0, precision: str = "default", *, run_dir: Optional[str] = None,
             budget_candidates: Optional[int] = None, agent: str = "expert", verify: bool = True, emulate: bool = False,
             verbose: bool = False, ksol_bin: Optional[str] = None, path: str = "best", plan: str = "auto"):
    """Optimizes `model` for `model(*inputs)` with ksol, and returns the module ksol's run returned.

    The module and its example inputs are written as a KernelBench-format problem in `run_dir`
    (default runs/module-<Class>-<time>), `ksol optimize` searches it for `budget_seconds` (its
    --budget-seconds: the search, the baselines not included), and the run's answer comes back:
    a module whose forward runs the kernels ksol verified (a whole-forward DSL program, or DSL
    pieces stitched around the ops kept as PyTorch calls), checked once more against `model` on
    fresh inputs when `verify`; or, where no kernel beat eager and torch.compile, `model` itself,
    with `model.ksol_result` saying why (and a warning in the "ksol" log).

    `precision` is the mode eager, torch.compile and ksol's kernels all run and are verified under
    (`ksol optimize --precision`): "default" (PyTorch's own TF32 switches: cuDNN convolutions may
    use TF32, matmul is IEEE unless torch.set_float32_matmul_precision says otherwise), "strict"
    (IEEE float32 everywhere; "fp32" is the same) or "tf32" (TF32 for matmul and cuDNN).
    `emulate` runs the whole flow on the CPU through ksol's CUDA emulator (a test: PyTorch is
    always returned). `verbose` copies ksol's progress to stderr; it is always in <run>/ksol.log.
    `path` is `ksol optimize --path`: "best" (both paths, the better answer), "fx" or "inductor";
    where the Inductor path's answer is returned, it is the compiled model with ksol's kernels in
    place of Inductor's (inductor_path.load). `plan` is `ksol optimize --plan`, the fx path's
    plan: "auto" (the module's own and the vendor-call plan, convolutions and GEMMs left to
    cuDNN and cuBLAS, the faster), "own" or "vendor".

    Raises BinaryNotFoundError (ksol is not built), UnsupportedError (a module, input or
    precision it cannot take), NoGPUError (no GPU: `ksol optimize` exited with status 77 after
    checking what it could), RunFailedError (the run failed), VerificationError (the kernels do
    not match `model`)."""
    import torch

    precision = check_precision(precision)
    if path not in ("best", "fx", "inductor"):
        raise UnsupportedError(f"path {path!r}: one of best, fx, inductor (ksol optimize --path)")
    if plan not in ("auto", "own", "vendor"):
        raise UnsupportedError(f"plan {plan!r}: one of auto, own, vendor (ksol optimize --plan)")
    bins = find_binaries(ksol_bin)
    if isinstance(inputs, torch.Tensor):
        inputs = [inputs]
    inputs = list(inputs)
    name = problem_name(model)
    run_dir = os.path.abspath(run_dir or _default_run_dir(name))
    files = write_problem(model, inputs, run_dir, name)
    cmd = [bins.ksol, "--json", "optimize", files.path, "--report", run_dir, "--budget-seconds", f"{budget_seconds:g}",
           "--agent", agent, "--precision", precision, "--path", path, "--plan", plan]
    if budget_candidates:
        cmd += ["--budget-candidates", str(int(budget_candidates))]
    if emulate:
        cmd.append("--emulate")
    # The worker runs this interpreter (its PyTorch is the one the module was written with) and
    # the CLI the worker binary found beside it.
    env = dict(os.environ, KSOL_PYTHON=sys.executable, KSOL_WORKER=bins.worker)
    log_path = os.path.join(run_dir, "ksol.log")
    log.info("ksol: %s", " ".join(cmd))
    rc, doc = _run_cli(cmd, env, log_path, verbose)
    if rc == NoGPUError.exit_status:
        raise _no_gpu(doc, _first_line(log_path), run_dir, name)
    if rc != 0:
        what = {1: "failed", 2: "was given a bad command line"}.get(rc, f"was interrupted (signal {rc - 128})" if rc > 128 else "failed")
        raise RunFailedError(f"ksol optimize {what} (exit status {rc}); the end of its log ({log_path}):\n{_tail(log_path)}",
                             rc, cmd, _tail(log_path), log_path)
    if path == "inductor":  # the Inductor path alone writes no results.json
        from .inductor_path import load as load_inductor_answer
        return load_inductor_answer(os.path.join(run_dir, "inductor"), verify=verify)
    run = rd.read_run(run_dir)
    manifest = {"format": 1, "precision": precision, "rtol_scale": rd.PRECISIONS[precision], "problem": os.path.basename(files.path),
                "module_file": os.path.basename(files.module_file), "serialized": "torch.fx" if files.traced else "pickle",
                "inputs": files.inputs, "libraries": _keep_libraries(run), "command": cmd, "exit_status": rc,
                "ksol": bins.ksol, "ksol_version": _version(bins.ksol), "torch": torch.__version__, "python": sys.executable}
    with open(os.path.join(run_dir, rd.MANIFEST), "w") as fh:
        json.dump(manifest, fh, indent=1)
    if (run.results.get("path") or {}).get("chosen") == "inductor":
        from .inductor_path import load as load_inductor_answer
        return load_inductor_answer(os.path.join(run_dir, "inductor"), verify=verify)
    if run.answer == "pytorch":
        model.ksol_result = rd.read_run(run_dir)
        log.warning(model.ksol_result.summary())
        return model
    device = "cpu" if run.emulated else next((str(x.device) for x in inputs if isinstance(x, torch.Tensor) and x.is_cuda), "cuda")
    return load(run_dir, verify=verify, device=device)


def _version(ksol: str) -> str:
    try:
        return subprocess.run([ksol, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
