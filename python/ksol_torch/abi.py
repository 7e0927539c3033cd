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
"""
import ctypes
import math
import os
from typing import Dict, List, Sequence, Tuple

import torch

KSOL_ABI_VERSION = 1


class KsolCall(ctypes.Structure):
    """include/ksol/abi.h's ksol_call."""
    _fields_ = [("abi_version", ctypes.c_int32), ("num_tensors", ctypes.c_int32), ("tensors", ctypes.POINTER(ctypes.c_void_p)),
                ("num_dims", ctypes.c_int32), ("dims", ctypes.POINTER(ctypes.c_int64)), ("stream", ctypes.c_void_p)]


class Library:
    """A shared library exporting ksol_run. Loading raises OSError (no such file, an undefined
    symbol) or AttributeError (no ksol_run in it)."""

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


def stitched_module(plan, libraries: Dict[int, Tuple[Library, List[int]]]) -> torch.fx.GraphModule:
    """The stitched module of `plan` (stitch.split's) as generated code (stitch.compiled): each
    piece's output from one call of its library, `libraries[piece.id]` = (library, dims); the ops
    the plan keeps run as traced. Shares the module's parameters with `plan.gm`."""
    from . import stitch

    def runner(piece, tensors):
        lib, dims = libraries[piece.id]
        ins = [t.contiguous() for t in tensors]
        out = torch.empty(piece.shape, dtype=torch.float32, device=ins[0].device)
        rc = lib.run(ins + [out], dims)
        if rc != 0:
            raise RuntimeError(f"piece {piece.id}: ksol_run returned {rc}")
        return out

    return stitch.compiled(plan, runner)
