"""torch.compile's Inductor output captured and worked on in this process (PyTorch 2 with Triton
and a GPU): the output code of each graph with the module Inductor loaded it as, each kernel's
launches recorded on the module's own tensors, and kernels replaced in that live module.

    capture    torch.compile(model) in the default mode, compiled on the inputs with Inductor's
               GraphLowering.compile_to_module hooked (the method torch._inductor.utils.get_code
               patches too): each graph's module and the output code it was loaded from, parsed by
               inductor_wrapper.parse. Inductor's caches are off for the compile, so every graph
               is generated here and not loaded from an earlier process's cache.
    record     one kernel's launches during one forward: its inputs before and its outputs after
               each launch, cloned (the reference of the kernel's task: the Inductor kernel itself)
    replace    a Shim in the module's globals where the kernel object was: `call` looks its
               kernels up there at every call, so the compiled model runs the replacement on the
               buffers Inductor allocated, and nothing else of the compiled model changes

A replacement is a library ksol verified for the kernel's problem (inductor_region.py), called
through ksol's ABI on the kernel's own buffers (abi.Library: its inputs, then its outputs, dims in
its task's order, on PyTorch's current stream), or, for a stitched answer, the module ksol.load
builds, whose outputs are copied into the kernel's.
"""
import contextlib
import dataclasses
import hashlib
import math
from typing import Any, Callable, Dict, List, Optional, Sequence
from unittest import mock

from . import inductor_wrapper as iw


class CaptureError(Exception):
    """torch.compile could not be captured here: the reason."""


def available() -> str:
    """"" where this process can capture Inductor's Triton code, else why not."""
    try:
        import torch
    except ImportError:
        return "no PyTorch"
    if not hasattr(torch, "compile"):
        return f"PyTorch {torch.__version__} has no torch.compile (2.0 or later is needed)"
    try:
        import triton  # noqa: F401
    except ImportError:
        return f"PyTorch {torch.__version__} without Triton: Inductor writes no Triton kernels"
    if not torch.cuda.is_available():
        return "no CUDA device: Inductor's Triton kernels run on the GPU"
    return ""


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclasses.dataclass
class Graph:
    index: int
    module: Any                  # the module Inductor loaded the output code as
    source: str                  # the output code
    program: iw.Program

    def kernel_object(self, name: str):
        return getattr(self.module, name)


@dataclasses.dataclass
class Capture:
    compiled: Any                # torch.compile(model): the model a user would run
    graphs: List[Graph]
    compile_seconds: float


def capture(model, inputs: Sequence, where: str = "model") -> Capture:
    """torch.compile(model) compiled on `inputs` (default mode, inference), with each graph's
    Inductor module and output code. CaptureError where a graph's code cannot be read."""
    import time

    import torch
    from torch._inductor import config as inductor_config
    from torch._inductor.graph import GraphLowering

    why = available()
    if why:
        raise CaptureError(why)
    loaded: List[Any] = []
    original = GraphLowering.compile_to_module

    def hooked(self):
        mod = original(self)
        loaded.append(mod)
        return mod

    torch._dynamo.reset()
    t0 = time.perf_counter()
    with mock.patch.object(GraphLowering, "compile_to_module", hooked), inductor_config.patch(force_disable_caches=True):
        compiled = torch.compile(model)
        with torch.no_grad():
            compiled(*inputs)
    seconds = time.perf_counter() - t0
    if not loaded:
        raise CaptureError("torch.compile produced no Inductor graph (the forward ran in eager mode: a graph break at "
                           "its start, or nothing to compile)")
    graphs = []
    for i, mod in enumerate(loaded):
        path = getattr(mod, "__file__", None)
        if not path:
            raise CaptureError(f"graph {i}: Inductor's module has no file to read its output code from")
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        try:
            program = iw.parse(text, f"{where} graph {i} ({path})")
        except iw.WrapperFormatError as e:
            raise CaptureError(str(e)) from None
        graphs.append(Graph(i, mod, text, program))
    return Capture(compiled, graphs, seconds)


# --- recording one kernel's launches -----------------------------------------------------------------
@dataclasses.dataclass
class Recorded:
    """One launch of a kernel: clones of its tensor inputs before and of its tensor outputs after,
    and its other arguments (sizes) as passed."""
    params: List[str]
    scalars: Dict[str, Any]    # param -> a non-tensor argument
    stream: Any
    inputs: Dict[str, Any]     # param -> tensor before the launch
    outputs: Dict[str, Any]    # param -> tensor after it

    def to(self, device) -> None:
        """Moves the recorded tensors (each its own clone) to `device`: the host while a search
        runs in processes of its own, the GPU again for the checks."""
        self.inputs = {p: t.to(device) for p, t in self.inputs.items()}
        self.outputs = {p: t.to(device) for p, t in self.outputs.items()}

    def fresh_args(self) -> list:
        """Arguments for launching the kernel again on its own: copies of the inputs (the recorded
        ones stay as they were), empty outputs, the sizes."""
        import torch

        out = []
        for p in self.params:
            if p in self.inputs:
                out.append(self.inputs[p].clone())
            elif p in self.outputs:
                out.append(torch.empty_like(self.outputs[p]))
            else:
                out.append(self.scalars[p])
        return out


class _Recorder:
    def __init__(self, original, launch: iw.Launch, params: List[str], log: List[Recorded], limit: int):
        self._original, self._launch, self._params, self._log, self._limit = original, launch, params, log, limit

    def run(self, *args, stream=None, **kwargs):
        keep = len(self._log) < self._limit
        by = dict(zip(self._params, args))
        ins = {b.param: by[b.param].clone() for b in self._launch.inputs()} if keep else {}
        self._original.run(*args, stream=stream, **kwargs)
        if keep:
            outs = {b.param: by[b.param].clone() for b in self._launch.outputs()}
            tensors = {b.param for b in self._launch.args if b.role in ("in", "out", "inout")}
            scalars = {p: a for p, a in by.items() if p not in tensors}
            self._log.append(Recorded(list(self._params), scalars, stream, ins, outs))

    def __getattr__(self, name):
        return getattr(self._original, name)


@contextlib.contextmanager
def swapped(graph: Graph, name: str, stand_in):
    """`stand_in` in place of kernel `name` in the graph's module for the duration."""
    original = graph.kernel_object(name)
    setattr(graph.module, name, stand_in)
    try:
        yield original
    finally:
        setattr(graph.module, name, original)


def record(cap: Capture, graph: Graph, launch: iw.Launch, inputs: Sequence, limit: int = 1) -> List[Recorded]:
    """The first `limit` launches of `launch.kernel` during one forward of the compiled model."""
    import torch

    log: List[Recorded] = []
    k = graph.program.kernels[launch.kernel]
    original = graph.kernel_object(launch.kernel)
    with swapped(graph, launch.kernel, _Recorder(original, launch, k.params, log, limit)):
        with torch.no_grad():
            cap.compiled(*inputs)
    return log


# --- replacements ------------------------------------------------------------------------------------
class Replacement:
    """What computes a kernel's outputs from its inputs instead: `__call__(ins, outs)` writes outs."""
    label = ""

    def __call__(self, ins: List[Any], outs: List[Any]) -> None:
        raise NotImplementedError


class LibraryReplacement(Replacement):
    """A library built to ksol's ABI for the kernel's problem: table = inputs, then outputs.
    `in_place_ok`: the program reads each element before writing it from the same thread (the
    elementwise family), so an in-place buffer may be passed as input and output at once;
    otherwise its input is a copy."""

    def __init__(self, so_path: str, dims: Sequence[int], in_place_ok: bool, label: str):
        from ksol_torch import abi

        self.lib = abi.Library(so_path)
        self.dims = [int(d) for d in dims]
        self.in_place_ok = in_place_ok
        self.label = label

    def __call__(self, ins, outs):
        if not self.in_place_ok:
            out_ptrs = {o.data_ptr() for o in outs}
            ins = [x.clone() if x.data_ptr() in out_ptrs else x for x in ins]
        rc = self.lib.run(list(ins) + list(outs), self.dims)
        if rc != 0:
            raise RuntimeError(f"{self.label}: ksol_run returned {rc}")


class ModuleReplacement(Replacement):
    """A module (ksol.load's, for a stitched answer) computing the outputs; copied into the kernel's."""

    def __init__(self, module, label: str):
        self.module, self.label = module, label

    def __call__(self, ins, outs):
        res = self.module(*ins)
        res = list(res) if isinstance(res, (list, tuple)) else [res]
        for o, r in zip(outs, res):
            o.copy_(r.reshape(o.shape))


class Shim:
    """Stands where an Inductor kernel object stood in its module: `run(*args, stream=...)` calls
    the replacement on the kernel's tensor arguments, bound by the kernel's parameter names."""

    def __init__(self, original, kernel: iw.Kernel, launch: iw.Launch, replacement: Replacement, inputs: List[str],
                 outputs: List[str], in_shapes: Optional[List[Sequence[int]]] = None):
        self._original = original
        self._replacement = replacement
        self.calls = 0
        self._in = [kernel.params.index(p) for p in inputs]
        self._out = [kernel.params.index(p) for p in outputs]
        # The region's view of each input (a bias [C] as [C, 1, 1]): the same contiguous memory.
        self._in_shapes = [tuple(s) for s in in_shapes] if in_shapes else None

    def run(self, *args, stream=None, **kwargs):
        self.calls += 1
        ins = [args[i] for i in self._in]
        if self._in_shapes:
            ins = [x.view(s) for x, s in zip(ins, self._in_shapes)]
        self._replacement(ins, [args[i] for i in self._out])

    def __getattr__(self, name):
        return getattr(self._original, name)


class ReplacementNotRun(RuntimeError):
    """A call of the compiled model that did not run an installed replacement: it recompiled (a
    guard failed) or took another graph, so its outputs or its time are not the replacement's."""


def _shim(cap: Capture, name: str) -> Optional[Shim]:
    """The Shim installed for `name` ("g<i>.<kernel>"), or None."""
    gi, kernel = name[1:].split(".", 1)
    obj = cap.graphs[int(gi)].kernel_object(kernel)
    return obj if isinstance(obj, Shim) else None


def check_called(cap: Capture, names: Sequence[str]) -> None:
    """ReplacementNotRun unless every Shim installed for `names` ran since it was installed. Enough
    after timing, whose calls all take the same inputs; the correctness gate's cases take others,
    and each needs its own check (`checked`)."""
    for n in names:
        shim = _shim(cap, n)
        if shim is None or shim.calls == 0:
            raise ReplacementNotRun(f"{n}: the compiled model did not run its replacement (it recompiled, or took another graph)")


def checked(cap: Capture, names: Sequence[str]) -> Callable:
    """The compiled model with the Shims for `names` installed, each call checked on its own:
    ReplacementNotRun from any call during which one of them did not run. The correctness gate
    calls it once per case (seed and distribution), and names the case it raised in. A count over
    all cases would pass a model that recompiled on one case, since the other cases ran the
    replacement; that case's outputs would be Inductor's own, not the replacement's."""
    shims = [(n, _shim(cap, n)) for n in names]

    def call(*inputs):
        before = [s.calls if s is not None else 0 for _, s in shims]
        out = cap.compiled(*inputs)
        for (n, s), b in zip(shims, before):
            if s is None or s.calls == b:
                raise ReplacementNotRun(f"{n}: the compiled model did not run its replacement during this call (it recompiled, "
                                        "or took another graph)")
        return out

    return call


@contextlib.contextmanager
def installed(cap: Capture, shims: Dict[tuple, Callable[[Any], Shim]]):
    """The compiled model with kernels replaced: `shims[(graph index, kernel name)]` makes the Shim
    from the original kernel object. Everything is put back after."""
    saved = []
    try:
        for (gi, name), make in shims.items():
            g = cap.graphs[gi]
            original = g.kernel_object(name)
            saved.append((g, name, original))
            setattr(g.module, name, make(original))
        yield cap.compiled
    finally:
        for g, name, original in reversed(saved):
            setattr(g.module, name, original)


# --- comparing against the kernel's own outputs ----------------------------------------------------
U32 = 2.0 ** -24


# Elements per slice of a comparison: its float64 temporaries stay a few hundred MB each, whatever
# the output's size (a 6 GB output compared whole needs ten times its float64 size at once).
CHUNK = 1 << 25


def _finite(w):
    """w's finite elements (w itself where all are)."""
    import torch

    fin = torch.isfinite(w)
    return w if bool(fin.all()) else w[fin]


def compare(got, want, accumulation: int, rtol_scale: float = 16.0) -> str:
    """"" when `got` matches the Inductor kernel's output `want` within the float32 bound of ksol's
    correctness gate (docs/TORCH.md: 2 u |ref| + u (8 + 2 sqrt(L)) rtol_scale (|ref| + mean|ref|),
    L the region's accumulation), else where and by how much it does not. Both are float32
    computations of the same values, so the bound is the gate's for one of them against exact.
    Slice by slice (CHUNK elements): the checks, their order and their messages are the whole
    tensor's; a flat index counts the finite elements only where the kernel wrote NaN or Inf; on
    one slice every number is the whole tensor's, over several mean|ref| is the slices' sums over
    the count."""
    import torch

    if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
        return f"shape/dtype {tuple(got.shape)} {got.dtype}, the kernel's {tuple(want.shape)} {want.dtype}"
    gf, wf = got.reshape(-1), want.reshape(-1)
    n_all = wf.numel()
    spans = [(s, min(n_all, s + CHUNK)) for s in range(0, n_all, CHUNK)]
    if not got.is_floating_point():
        n = sum(int((gf[s:e] != wf[s:e]).sum()) for s, e in spans)
        return "" if n == 0 else f"{n} of {got.numel()} elements differ"
    # First pass: where each is finite, NaN and Inf against the kernel's, and mean|ref|.
    mismatched, special_bad, mag_sum, finite = 0, False, 0.0, 0
    for s, e in spans:
        g, w = gf[s:e].double(), wf[s:e].double()
        fin_w, fin_g = torch.isfinite(w), torch.isfinite(g)
        mismatched += int((fin_w != fin_g).sum())
        if mismatched or special_bad:
            continue
        if not bool(fin_w.all()):
            nan_w, nan_g = torch.isnan(w), torch.isnan(g)
            inf_w = ~fin_w & ~nan_w
            if not (torch.equal(nan_w, nan_g) and bool((g[inf_w] == w[inf_w]).all())):
                special_bad = True
                continue
            w = w[fin_w]
        mag_sum += float(w.abs().sum())
        finite += w.numel()
    if mismatched:
        return f"{mismatched} elements finite in one and not the other"
    if special_bad:
        return "NaN/Inf elements differ"
    if finite == 0:
        return ""
    # One slice: the whole tensor's own mean (a device's mean need not equal its sum over the count).
    mean = mag_sum / finite if len(spans) > 1 else float(_finite(wf.double()).abs().mean())
    # Second pass: every finite element within the bound, the worst one named.
    over_n, worst, where, base = 0, None, None, 0
    for s, e in spans:
        g, w = gf[s:e].double(), wf[s:e].double()
        fin_w = torch.isfinite(w)
        if not bool(fin_w.all()):
            g, w = g[fin_w], w[fin_w]
        if w.numel():
            tol = 2 * U32 * w.abs() + U32 * (8 + 2 * math.sqrt(max(1, accumulation))) * rtol_scale * (w.abs() + mean)
            err = (g - w).abs()
            over_n += int((err > tol).sum())
            i = int(torch.argmax(err - tol))
            v = float(err[i] - tol[i])
            if worst is None or v > worst:
                worst, where = v, (base + i, float(g[i]), float(w[i]), float(tol[i]))
        base += w.numel()
    if over_n == 0:
        return ""
    i, gv, wv, tv = where
    return (f"{over_n} of {finite} elements out of tolerance; worst at flat index {i}: got {gv:.9g}, "
            f"the kernel {wv:.9g} (allowed {tv:.3g})")
