"""include/ksol/abi.h for Python: a shared library exporting ksol_run, called on torch tensors.

The evaluation worker (worker.py), which verifies such a library, and the ksol package
(python/ksol), which hands the verified library to a user, both call it through this file, so the
table a user's module passes is the table that was verified:

  a whole module   its tensor inputs in order, then the Model's parameters and buffers in
                   state_dict order, then its outputs (allocated here with the reference's shapes
                   and dtypes)
  a stitched piece its inputs in order, then its parameters, then its float32 output
                   (stitch.py's plan says which)

Every tensor is made contiguous first (a copy where it is not), all on one device; the dims go in
the task's order; the stream is PyTorch's current one on that device, or none on the host (a
library built for ksol's CUDA emulator, or a plain C function, in the CPU tests).

Two call paths take a library to a table (open_kernel): "torch-op", ksol::run of the torch
extension in abi_op.py, which checks the tensors against the table the library was verified with
and calls it from C++; and "ctypes", Library below, which the worker verifies and times candidates
with. Both dlopen the same file and pass the same table, dims and stream.
"""
import ctypes
import math
import os
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import torch

KSOL_ABI_VERSION = 1


class KsolCall(ctypes.Structure):
    """include/ksol/abi.h's ksol_call."""
    _fields_ = [("abi_version", ctypes.c_int32), ("num_tensors", ctypes.c_int32), ("tensors", ctypes.POINTER(ctypes.c_void_p)),
                ("num_dims", ctypes.c_int32), ("dims", ctypes.POINTER(ctypes.c_int64)), ("stream", ctypes.c_void_p)]


class Library:
    """A shared library exporting ksol_run, called through ctypes. Loading raises OSError (no
    such file, an undefined symbol) or AttributeError (no ksol_run in it)."""

    def __init__(self, so_path: str):
        self.path = os.path.abspath(so_path)
        self._lib = ctypes.CDLL(self.path)
        self._fn = self._lib.ksol_run
        self._fn.argtypes = [ctypes.POINTER(KsolCall)]
        self._fn.restype = ctypes.c_int

    def run(self, table: Sequence[torch.Tensor], dims: Sequence[int]) -> int:
        """ksol_run on `table` (contiguous tensors on one device) and `dims`: its status, 0 when it worked."""
        dev = table[0].device if table else torch.device("cpu")
        ptrs = (ctypes.c_void_p * len(table))(*[t.data_ptr() for t in table])
        cdims = (ctypes.c_int64 * max(1, len(dims)))(*[int(d) for d in dims])
        stream = torch.cuda.current_stream(dev).cuda_stream if dev.type == "cuda" else None
        return self._fn(ctypes.byref(KsolCall(KSOL_ABI_VERSION, len(table), ptrs, len(dims), cdims, stream)))


def same_layout(want: Sequence[int], got: Sequence[int]) -> bool:
    """True when a contiguous tensor of shape `got` is the task's `want`: the same shape, or the
    same with leading dims merged (a row-wise program sees [B, S, C] as [B*S, C])."""
    want, got = tuple(want), tuple(got)
    if want == got:
        return True
    n = len(got) - len(want) + 1
    return len(want) >= 1 and len(got) > len(want) and want[1:] == got[n:] and want[0] == math.prod(got[:n])


def call_module(lib: Library, inputs: Sequence, params: List[torch.Tensor], out_specs: List[Tuple[tuple, torch.dtype]],
                dims: Sequence[int]):
    """A whole module's forward through `lib`: the table is the tensor inputs, `params` (the
    state_dict's values, in order) and fresh outputs of `out_specs`' shapes and dtypes. Returns
    the output, or a tuple of them; raises RuntimeError when ksol_run reports a failure."""
    ins = [x.contiguous() for x in inputs if isinstance(x, torch.Tensor)]
    dev = ins[0].device if ins else torch.device("cpu")
    outs = [torch.empty(shape, dtype=dt, device=dev) for shape, dt in out_specs]
    rc = lib.run(ins + [p.contiguous() for p in params] + outs, dims)
    if rc != 0:
        raise RuntimeError(f"ksol_run returned {rc}")
    return outs[0] if len(outs) == 1 else tuple(outs)


class CtypesKernel:
    """A Library called on one table through ctypes, as OpKernel (abi_op.py) is through the torch
    op: called on the input tensors, it returns fresh outputs of `out_specs`' shapes and dtypes
    on their device. Unlike ksol::run it does not check the tensors against the table: its
    callers do (KsolModule's signature, the worker's binding check)."""

    call_path = "ctypes"

    def __init__(self, lib: Library, out_specs: Sequence[Tuple[Sequence[int], torch.dtype]], dims: Sequence[int], label: str):
        self.lib = lib
        self.path = lib.path
        self.label = label
        self.out_specs = [(tuple(int(e) for e in shape), dt) for shape, dt in out_specs]
        self.dims = [int(d) for d in dims]

    def __call__(self, inputs: Sequence[torch.Tensor]) -> List[torch.Tensor]:
        ins = [t.contiguous() for t in inputs]
        dev = ins[0].device if ins else torch.device("cpu")
        outs = [torch.empty(shape, dtype=dt, device=dev) for shape, dt in self.out_specs]
        rc = self.lib.run(ins + outs, self.dims)
        if rc != 0:
            raise RuntimeError(f"{self.label}: ksol_run returned {rc}")
        return outs


CALL_PATHS = ("auto", "torch-op", "ctypes")
_fallbacks_warned = set()


def open_kernel(so_path: str, table: Sequence[Tuple[Sequence[int], torch.dtype]], num_outputs: int, dims: Sequence[int],
                device_type: str, label: str, names: Optional[Sequence[str]] = None, call_path: str = "auto"):
    """The library at `so_path` bound to `table` ((shape, dtype) per tensor in ABI order, the last
    `num_outputs` the outputs) and `dims`, on `device_type` tensors: an OpKernel or a CtypesKernel,
    called on the input tensors and returning the outputs. `call_path` "auto" takes the torch op
    where its extension builds and can run on `device_type`, else ctypes with a warning (once per
    reason in a process) saying why; "torch-op" raises RuntimeError where it cannot; "ctypes"
    takes ctypes. Raises OSError or AttributeError where the library cannot be loaded."""
    if call_path not in CALL_PATHS:
        raise ValueError(f"call_path is one of {', '.join(CALL_PATHS)}, not {call_path!r}")
    if call_path != "ctypes":
        from . import abi_op

        st = abi_op.status()
        why = st.reason if not st.ok else ""
        if not why and device_type == "cuda" and not st.with_cuda:
            why = f"its build in {st.build_dir} has no CUDA: {st.cuda_reason}"
        if not why:
            return abi_op.OpKernel(so_path, table, num_outputs, dims, device_type, label, names)
        if call_path == "torch-op":
            raise RuntimeError(f"ksol's torch op cannot call {label}: {why}")
        if why not in _fallbacks_warned:
            _fallbacks_warned.add(why)
            warnings.warn(f"ksol: calling the verified kernels through ctypes, not ksol's torch op: {why}", RuntimeWarning,
                          stacklevel=2)
    return CtypesKernel(Library(so_path), table[len(table) - num_outputs:], dims, label)


def piece_table(plan, piece) -> List[Tuple[str, Tuple[int, ...], torch.dtype]]:
    """(name, shape, dtype) of each tensor a stitched piece's library is called with in the
    module: its inputs as the plan's trace saw them, its parameters, its float32 output."""
    nodes = {n.name: n for n in plan.gm.graph.nodes}
    names = [t.get("name", f"t{i}") for i, t in enumerate(piece.tensors)]
    rows = []
    for name in piece.inputs:
        meta = nodes[name].meta.get("tensor_meta") if name in nodes else None
        if meta is None:
            raise ValueError(f"piece {piece.id}: the plan's trace has no shape for its input {name}")
        rows.append((tuple(int(e) for e in meta.shape), meta.dtype))
    for key in piece.params:
        t = plan.gm
        for part in key.split("."):
            t = getattr(t, part)
        rows.append((tuple(t.shape), t.dtype))
    rows.append((tuple(int(e) for e in piece.shape), torch.float32))
    if len(names) != len(rows):
        names = [f"t{i}" for i in range(len(rows))]
    return [(n, shape, dt) for n, (shape, dt) in zip(names, rows)]


def stitched_module(plan, libraries: Dict[int, Tuple[Library, List[int]]]) -> torch.fx.GraphModule:
    """The stitched module of `plan` (stitch.split's) as generated code (stitch.compiled): each
    piece's output from one call of its library through ctypes, `libraries[piece.id]` =
    (library, dims); the ops the plan keeps run as traced, and so do the pieces `libraries`
    lacks (kept as PyTorch calls). Shares the module's parameters with `plan.gm`."""
    kernels = {p.id: CtypesKernel(libraries[p.id][0], [(p.shape, torch.float32)], libraries[p.id][1], f"piece {p.id}")
               for p in plan.pieces if p.id in libraries}
    return stitched_module_of_kernels(plan, kernels)


def stitched_module_of_kernels(plan, kernels: Dict) -> torch.fx.GraphModule:
    """stitched_module with each piece's output from `kernels[piece.id]` (open_kernel's), called
    on the piece's inputs and parameters; a piece with no kernel stays PyTorch calls."""
    from . import stitch

    def runner(piece, tensors):
        return kernels[piece.id](tensors)[0]

    return stitch.compiled(plan, runner, keep={p.id for p in plan.pieces if p.id not in kernels})
