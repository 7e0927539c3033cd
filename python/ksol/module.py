"""The module ksol hands back: its forward runs the libraries a run verified, through the ABI
table the worker verified them with (ksol_torch/abi.py: the torch op of abi_op.py, else ctypes),
and the ops the run left to PyTorch as PyTorch; and `load`, which builds it from a run folder and
checks it against the original.
"""
import logging
import os
import random
from typing import List, Optional

from . import run_dir as rd
from .errors import NoGPUError, RunDirError, VerificationError

log = logging.getLogger("ksol")

# The seed the module is built with (its weights where the problem draws them, and the example
# it is shaped on), as the worker builds the Model it verifies against.
BUILD_SEED = 1


def _example(prob, device: str):
    """The problem's inputs under BUILD_SEED, on `device`."""
    import torch
    from ksol_torch import problem

    torch.manual_seed(BUILD_SEED)
    xs = problem.as_inputs(prob, problem.call(prob, "get_inputs"))
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]


def _extent(e, dims) -> int:
    """A shape entry of synth's table at the program's dims: a dim's name, a number, or an
    arithmetic expression of dims."""
    if isinstance(e, (int, float)):
        return int(e)
    if e in dims:
        return int(dims[e])
    try:
        return int(eval(str(e), {"__builtins__": {}}, dict(dims)))  # synth's own text: names, numbers, * and +
    except Exception as exc:
        raise RunDirError(f"the program's tensor extent {e!r} is not a dim or an expression of dims") from exc


def _whole_program(run, prob, model, example, device_type: str, call_path: str):
    """The kernel (abi.open_kernel's) of a run whose one DSL program computes the forward, bound
    to the module's tensor table: its tensor inputs, its parameters and buffers, its outputs.
    The module's tensors must be the program's at its dims (the worker's binding check)."""
    import torch
    from ksol_torch import abi, problem, synth

    # The dims and the tensor table as `ksol optimize` had them: synth on the problem, shape-only
    # where every op allows it (src/cli/optimize_module.cpp runs the same).
    try:
        m, xs = problem.instantiate(prob, 0, meta=True)
        syn = synth.synthesize(m, xs)
    except Exception:
        m, xs = problem.instantiate(prob, 0)
        syn = synth.synthesize(m, xs)
    if not syn.get("program"):
        raise RunDirError(f"{run.problem}: the module is no longer one DSL program ({syn.get('reason', '?')}), "
                          "but the run returned one: the file, or the version of ksol that lowers it, changed since the "
                          "run; run `ksol optimize` on it again")
    dims = [int(syn["dims"][d]) for d in syn["dim_order"]]
    with torch.no_grad():
        outs = model(*example)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    out_specs = [(tuple(t.shape), t.dtype) for t in outs]
    table = [tuple(x.shape) for x in example if isinstance(x, torch.Tensor)]
    table += [tuple(p.shape) for p in model.state_dict().values()] + [sh for sh, _ in out_specs]
    want = [(t["name"], tuple(_extent(d, syn["dims"]) for d in t["shape"])) for t in syn["tensors"]]
    if len(want) != len(table) or any(not abi.same_layout(w, t) for (_, w), t in zip(want, table)):
        raise RunDirError(f"{run.problem}: the module's tensors {table} are not the program's {want}")
    path = rd.library(run, "best")
    specs = [(tuple(x.shape), x.dtype) for x in example if isinstance(x, torch.Tensor)]
    specs += [(tuple(p.shape), p.dtype) for p in model.state_dict().values()] + out_specs
    try:
        return abi.open_kernel(path, specs, len(out_specs), dims, device_type, os.path.basename(path),
                               names=[name for name, _ in want], call_path=call_path)
    except (OSError, AttributeError) as e:
        raise RunDirError(f"{path}: cannot be loaded: {e}") from e


def _stitched(run, model, example, device_type: str, call_path: str):
    """The stitched module of the run's pieces (stitch.py's plan of the problem, each piece's
    nodes replaced by a call of its library's kernel, abi.open_kernel's, but for the pieces the
    run kept as PyTorch calls) and its kernels, or RunDirError when the plan is not the run's."""
    from ksol_torch import abi, stitch

    plan = stitch.split(model, example, vendor=run.vendor)
    want = [p.nodes for p in plan.pieces]
    got = [p.nodes for p in run.pieces]
    if got != want:
        raise RunDirError(f"{run.problem}: the module's plan has pieces {want}, the run's are {got}: the file, or the version "
                          "of ksol that cuts it, changed since the run; run `ksol optimize` on it again")
    kernels = {}
    for piece, rec in zip(plan.pieces, run.pieces):
        if rec.keep:  # its ops stay PyTorch calls
            continue
        path = rd.library(run, f"piece-{rec.index}", rec.so)
        table = abi.piece_table(plan, piece)
        try:
            kernels[piece.id] = abi.open_kernel(path, [(shape, dt) for _, shape, dt in table], 1, rec.dims, device_type,
                                                f"piece {piece.id} ({os.path.basename(path)})",
                                                names=[name for name, _, _ in table], call_path=call_path)
        except (OSError, AttributeError) as e:
            raise RunDirError(f"{path}: cannot be loaded: {e}") from e
    return abi.stitched_module_of_kernels(plan, kernels), list(kernels.values())


def load(run_dir: str, verify: bool = True, device: Optional[str] = None, seeds: Optional[List[int]] = None,
         call_path: str = "auto"):
    """The module a run returned, from its folder (a run of ksol.optimize or of `ksol optimize
    FILE.py`). Where the run returned PyTorch itself, that is the problem's Model, with
    `ksol_result` saying why. Otherwise a KsolModule on `device` (default: "cuda", or "cpu" for an
    emulated run's host libraries), which with `verify` (the default) is first checked against the
    original Model on fresh inputs: three seeds (`seeds`, else drawn at random) times the worker's
    three distributions, compared in float64 within the bound of the run's precision.
    `call_path` says how the forward calls the libraries (`module.ksol_call_path`): "auto" (the
    torch op where its extension builds, else ctypes with a warning saying why), "torch-op" or
    "ctypes". Raises VerificationError when it does not match, RunDirError when the folder lacks
    what it needs, NoGPUError when the kernels are CUDA and there is no CUDA device."""
    import torch
    from ksol_torch import abi, problem

    if call_path not in abi.CALL_PATHS:
        raise ValueError(f"call_path is one of {', '.join(abi.CALL_PATHS)}, not {call_path!r}")
    run = rd.read_run(run_dir)
    prob = problem.load(run.problem)
    if run.answer == "pytorch":
        model = problem.instantiate(prob, BUILD_SEED, inputs=False)[0]
        model.ksol_result = run
        log.warning(run.summary())
        return model
    device = device or ("cpu" if run.emulated else "cuda")
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise NoGPUError(f"{run.run_dir}: the run's kernels are CUDA libraries and this process sees no CUDA device",
                         reason="no CUDA device visible to PyTorch", run_dir=run.run_dir)
    model = problem.instantiate(prob, BUILD_SEED, inputs=False)[0].to(device)
    example = _example(prob, device)
    from .ksol_module import KsolModule, signature

    dev = torch.device(device).type
    if run.answer == "kernel":
        mod = KsolModule(model, run, signature(example), dev, whole=_whole_program(run, prob, model, example, dev, call_path))
    else:
        stitched, kernels = _stitched(run, model, example, dev, call_path)
        mod = KsolModule(model, run, signature(example), dev, stitched=stitched, kernels=kernels)
    mod.eval()
    if verify:
        mod.ksol_verification = verify_module(mod, prob, device, run, seeds)
    log.info(run.summary())
    return mod


def verify_module(mod, prob, device: str, run, seeds: Optional[List[int]] = None) -> dict:
    """The worker's correctness gate on `mod` (worker.verify_module): VerificationError on a mismatch."""
    from ksol_torch import worker

    seeds = list(seeds) if seeds else [random.SystemRandom().randrange(1000, 1 << 31) for _ in range(3)]
    try:
        out = worker.verify_module(prob, mod, device, seeds, rtol_scale=run.rtol_scale, precision=rd.worker_mode(run.precision))
    except worker.GateFailure as f:
        raise VerificationError(f"{run.run_dir}: the module built from the run's kernels does not match the original "
                                f"({run.precision}, seeds {seeds}): {f.message}", f.gate, f.error_class, run.run_dir) from None
    out["seeds"] = seeds
    return out
