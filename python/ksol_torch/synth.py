"""Writing a module's whole forward as one ksol DSL program, when it is one: an elementwise chain
over tensors that broadcast to the output's shape (numpy's rule: a lower-rank or size-1-dim
tensor is read along the indices it has), a row-wise chain over the trailing dims of a tensor
(softmax, log_softmax over the last dim, layer_norm over its normalized_shape, with elementwise
ops before and after), a GEMM (nn.Linear, matmul, mm, bmm or an einsum that is a matrix product:
a [..., M, K] operand's leading dims merged into M, equal batch dims merged into the gemm's batch
index) followed by elementwise ops, or a 2-D
convolution of a forward input (nn.Conv2d, F.conv2d: groups 1, zero padding, any stride, padding
and dilation) with its bias and the elementwise ops after it as the conv family's one epilogue
definition (its output's spatial dims are P, Q; its filter's R, S are fixed extents). Anything
else gets a reason and no program: ksol then returns the better of eager PyTorch and
torch.compile.

The program's parameters are the candidate ABI's tensor table for the module (worker.py's
AbiCandidate): the forward's tensor inputs (input0, input1, ...), then every entry of the
Model's state_dict in order, then the output (output0). Each table entry's shape is the tensor as
the module lays it out (what the worker's binding check compares), in the program's dims; the
program may declare a contiguous view of it: a row-wise program's [R, C] is [B, S, C] with its
rows merged, or [B, F, H, W] with its row [F, H, W] merged (dims C0, C1, C2 beside C), and an
elementwise program reads a broadcast [C, 1, 1] as [C] (dim U, of extent 1, for the size-1 dims).
A Python number among the forward's inputs is written into the program as a constant when
get_inputs gives the same number in every draw (fold_scalar_inputs). Only float32 is lowered today.
"""
import math
import operator
import random
import re
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp

from .trace import _canonical as _canon, kind_of


class Unsupported(Exception):
    pass


# Row-wise ops lowered as a row-wise program over the trailing dims of a tensor (_row_of).
ROWWISE = ("softmax", "log_softmax", "layer_norm", "instance_norm")
# Reductions lowered where they reduce the trailing dims of a tensor (or all of it: one row), each
# row to one value (_reduced_dims).
REDUCTIONS = ("sum", "mean", "amax", "amin", "max", "min", "logsumexp", "norm")


def _reduced_dims(n: torch.fx.Node, op: str, rank: int) -> Optional[Tuple[List[int], bool]]:
    """The dims a reduction node reduces (sorted, non-negative) and its keepdim, or None where the
    node is not one reduction of one tensor (torch.max(a, b) is elementwise)."""
    if op not in REDUCTIONS or not n.args or not isinstance(n.args[0], torch.fx.Node):
        return None
    if op in ("max", "min") and len(n.args) > 1 and isinstance(n.args[1], torch.fx.Node):
        return None
    if op in ("max", "min") and "other" in n.kwargs:
        return None
    if n.kwargs.get("dtype") is not None or (op != "norm" and len(n.args) > 3):
        raise Unsupported(f"{op} with a dtype: not lowered")
    if op == "norm":
        dim, keep = _arg(n, 2, "dim"), _arg(n, 3, "keepdim", False)
    else:
        dim, keep = _arg(n, 1, "dim", _arg(n, 1, "axis")), _arg(n, 2, "keepdim", False)
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        dims = list(range(rank))
    elif isinstance(dim, int):
        dims = [dim % rank] if rank else []
    elif isinstance(dim, (tuple, list)) and all(isinstance(d, int) for d in dim):
        dims = sorted({d % rank for d in dim})
    else:
        raise Unsupported(f"{op} over dims {dim!r}: not lowered")
    return dims, bool(keep)


def _num(v) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Unsupported(f"the constant {v!r} is not a number")
    if not math.isfinite(float(v)):
        raise Unsupported(f"the constant {v!r} is not finite")
    s = repr(float(v))
    return f"({s})" if s.startswith("-") else s


def _arg(node, i, name, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def param_names(keys) -> Dict[str, str]:
    """DSL names for state_dict keys: 'w_' and the key with its dots as underscores ('fc.weight' is
    w_fc_weight), so that no name meets an input, an intermediate, an index, a dim, a function or
    a keyword; two keys that would meet get _2, _3, ..."""
    out, used = {}, set()
    for k in keys:
        base = "w_" + re.sub(r"[^A-Za-z0-9_]", "_", k)
        name, i = base, 2
        while name in used:
            name, i = f"{base}_{i}", i + 1
        used.add(name)
        out[k] = name
    return out


# Elementwise ops of one tensor operand (x) and constants, as DSL expressions.
def _unary(op: str, x: str, node, mod) -> Optional[str]:
    def a(i, name, default):
        if mod is not None:
            return getattr(mod, name, default)
        return _arg(node, i, name, default)

    if op == "relu":
        return f"relu({x})"
    if op in ("sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs", "silu"):
        return f"{op}({x})"
    if op == "gelu":
        approx = a(1, "approximate", "none")
        return f"gelu_tanh({x})" if approx == "tanh" else f"gelu({x})"
    if op == "leaky_relu":
        s = a(1, "negative_slope", 0.01)
        return f"select({x} > 0, {x}, {_num(s)} * {x})"
    if op in ("hardtanh", "clamp", "clip"):
        if op == "hardtanh":
            lo, hi = a(1, "min_val", -1.0), a(2, "max_val", 1.0)
        else:
            lo, hi = _arg(node, 1, "min"), _arg(node, 2, "max")
        if lo is None and hi is None:
            return x
        if lo is None:
            return f"min({x}, {_num(hi)})"
        if hi is None:
            return f"max({x}, {_num(lo)})"
        return f"clamp({x}, {_num(lo)}, {_num(hi)})"
    if op == "relu6":
        return f"clamp({x}, 0.0, 6.0)"
    if op == "hardsigmoid":
        return f"clamp({x} / 6.0 + 0.5, 0.0, 1.0)"
    if op == "hardswish":
        return f"{x} * clamp({x} / 6.0 + 0.5, 0.0, 1.0)"
    if op == "softsign":
        return f"{x} / (1.0 + abs({x}))"
    if op == "elu":
        al = a(1, "alpha", 1.0)
        return f"select({x} > 0, {x}, {_num(al)} * (exp({x}) - 1.0))"
    if op == "selu":
        al, sc = 1.6732632423543772, 1.0507009873554805
        return f"{_num(sc)} * select({x} > 0, {x}, {_num(al)} * (exp({x}) - 1.0))"
    if op == "softplus":
        beta, th = a(1, "beta", 1.0), a(2, "threshold", 20.0)
        return f"select({_num(beta)} * {x} > {_num(th)}, {x}, log(1.0 + exp({_num(beta)} * {x})) / {_num(beta)})"
    if op == "mish":
        return f"{x} * tanh(select({x} > 20.0, {x}, log(1.0 + exp({x}))))"
    if op == "neg":
        return f"(-{x})"
    if op == "square":
        return f"{x} * {x}"
    if op == "reciprocal":
        return f"1.0 / {x}"
    if op in ("dropout", "identity", "contiguous", "clone", "detach", "float"):  # dropout: eval mode (checked by the caller)
        return x
    return None


_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/", "truediv": "/"}


# The seeds get_inputs is drawn under to check that a Python number among its inputs is the same in
# every draw: the worker's correctness seeds (1, 2, 3), the example inputs' (instantiate's seed + 1)
# and a few more.
DRAW_SEEDS = (0, 1, 2, 3, 4, 5)


def draws_of(model: nn.Module, seeds: Sequence[int] = DRAW_SEEDS) -> List[List]:
    """get_inputs drawn under each seed on shape-only (meta) tensors: a KernelBench file defines it
    beside the Model, in the namespace its forward runs in. The random generators are left as they
    were. Raises Unsupported with the reason when there is none or it cannot be drawn so."""
    from . import problem

    fn = getattr(getattr(type(model), "forward", None), "__globals__", {}).get("get_inputs")
    if not callable(fn):
        raise Unsupported("no get_inputs beside the Model to draw it again")
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    state = random.getstate()
    try:
        with torch.random.fork_rng(devices=devices):
            out = []
            for seed in seeds:
                torch.manual_seed(seed)
                with problem.meta_tensors():
                    xs = fn()
                if not isinstance(xs, (list, tuple)):
                    raise Unsupported(f"get_inputs returns a {type(xs).__name__}, not a list")
                out.append(list(xs))
            return out
    except Unsupported:
        raise
    except Exception as e:  # the problem's own code, on shape-only tensors
        raise Unsupported(f"get_inputs cannot be drawn again on shape-only tensors ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''})")
    finally:
        random.setstate(state)


def fold_scalar_inputs(gm: torch.fx.GraphModule, model: nn.Module, inputs: List,
                       draw: Optional[Callable[[Sequence[int]], List[List]]] = None) -> Tuple[List[Dict], Dict[str, str]]:
    """Writes into `gm`'s graph, as constants, the Python numbers among the forward's inputs that
    the graph reads and that get_inputs gives unchanged under every seed of DRAW_SEEDS (drawn by
    `draw(seeds)`, by default draws_of(model)), and the defaults of arguments get_inputs does not
    pass. Returns a note for each number written (argument, position, value, why) and, for each
    one that is not, the reason by placeholder name. This check is what makes the constant honest:
    the worker's correctness gate redraws only the tensors for each seed and keeps the numbers of
    its example draw, so it catches a constant that differs from that draw, not one that varies."""
    notes: List[Dict] = []
    refused: Dict[str, str] = {}
    draws = None
    for k, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        passed = k < len(inputs)
        v = inputs[k] if passed else (n.args[0] if n.args else None)
        if isinstance(v, torch.Tensor) or not n.users:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            refused[n.name] = (f"the forward's argument {n.target} is {type(v).__name__} {v!r}, not a tensor: "
                               "non-tensor inputs are lowered only as finite numbers")
            continue
        if passed:
            if draws is None:
                try:
                    draws = draw(DRAW_SEEDS) if draw is not None else draws_of(model, DRAW_SEEDS)
                except Unsupported as e:
                    draws = e
            if isinstance(draws, Unsupported):
                refused[n.name] = (f"the forward's argument {n.target} is the number {v!r}, not a tensor, and {draws}: "
                                   "it cannot be checked to be the same in every draw")
                continue
            other = [(seed, d[k] if k < len(d) else None) for seed, d in zip(DRAW_SEEDS, draws)]
            diff = [(seed, w) for seed, w in other if type(w) is not type(v) or w != v]
            if diff:
                refused[n.name] = (f"the forward's argument {n.target} is {v!r} here but {diff[0][1]!r} from get_inputs "
                                   f"under seed {diff[0][0]}: a number that changes between draws is not lowered as a constant")
                continue
            why = f"get_inputs gives {v!r} under every seed drawn ({', '.join(map(str, DRAW_SEEDS))})"
        else:
            why = "it is the forward's default, which get_inputs does not pass"
        for u in list(n.users):
            u.args = torch.fx.node.map_aggregate(u.args, lambda a: v if a is n else a)
            u.kwargs = torch.fx.node.map_aggregate(u.kwargs, lambda a: v if a is n else a)
        notes.append({"argument": n.target, "position": k, "value": v, "reason": why})
    return notes, refused


def _broadcast(sh: List[int], out_shape: List[int]) -> Optional[List[Optional[int]]]:
    """Numpy's broadcast of a tensor of shape `sh` to `out_shape`: the output axis each of its dims
    is read along (None for a size-1 dim broadcast along an axis longer than 1), or None when
    it does not broadcast."""
    lead = len(out_shape) - len(sh)
    if lead < 0:
        return None
    axes: List[Optional[int]] = []
    for j, d in enumerate(sh):
        if d == out_shape[lead + j]:
            axes.append(lead + j)
        elif d == 1:
            axes.append(None)
        else:
            return None
    return axes


class _Builder:
    def __init__(self, model: nn.Module, inputs: List):
        self.model = model
        self.gm = torch.fx.symbolic_trace(model)
        with torch.no_grad():
            ShapeProp(self.gm).propagate(*inputs)
        self.inputs = inputs
        self.stmts: List[str] = []
        self.count = 0

    def shape(self, n) -> Optional[List[int]]:
        tm = n.meta.get("tensor_meta") if isinstance(n, torch.fx.Node) else None
        return list(tm.shape) if tm is not None and hasattr(tm, "shape") else None

    def dtype(self, n):
        tm = n.meta.get("tensor_meta") if isinstance(n, torch.fx.Node) else None
        return tm.dtype if tm is not None and hasattr(tm, "dtype") else None

    def fresh(self) -> str:
        self.count += 1
        return f"v{self.count}"


def synthesize(model: nn.Module, inputs: List, draw: Optional[Callable[[Sequence[int]], List[List]]] = None) -> Dict:
    """The module's forward as one DSL program, or a reason. Shapes are the inputs' own; `draw`
    draws get_inputs again where the forward takes a Python number (fold_scalar_inputs)."""
    out = {"program": None, "reason": "", "family": None, "tensors": [], "dims": {}, "constants": []}
    try:
        out.update(_synthesize(model, inputs, draw))
    except Unsupported as e:
        out["reason"] = str(e)
    except Exception as e:  # fx cannot trace it, or shape propagation failed
        out["reason"] = f"the forward cannot be traced into one graph ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    return out


def _row_of(b: "_Builder", n: torch.fx.Node, op: str) -> List[int]:
    """The trailing dims a row-wise op works over (its row): the last dim for softmax and
    log_softmax, normalized_shape for layer_norm."""
    mod = b.gm.get_submodule(n.target) if n.op == "call_module" else None
    sh = b.shape(n.args[0]) if n.args and isinstance(n.args[0], torch.fx.Node) else None
    if not sh:
        raise Unsupported(f"{op} reads a value that is not a tensor of one or more dims")
    if op in ("softmax", "log_softmax"):
        dim = _arg(n, 1, "dim") if mod is None else mod.dim
        if dim not in (-1, len(sh) - 1):
            raise Unsupported(f"{op} over dim {dim}: only the last dim is lowered")
        return sh[-1:]
    if op in REDUCTIONS:
        red = _reduced_dims(n, op, len(sh))
        if red is None:
            raise Unsupported(f"{op} is not a reduction of one tensor")
        dims = red[0]
        if dims != list(range(len(sh) - len(dims), len(sh))):
            raise Unsupported(f"{op} over dims {dims} of a tensor of shape {sh}: only reductions over the trailing dims "
                              "are lowered (the row-wise family reduces each row over its last index)")
        return sh[len(sh) - len(dims):]
    if op == "instance_norm":
        # Each (sample, channel) plane normalized on its own: rows N*C, the row the spatial dims.
        if len(sh) < 3:
            raise Unsupported(f"instance_norm of a tensor of shape {sh}: an (N, C, ...) tensor with spatial dims is lowered")
        return sh[2:]
    ns = mod.normalized_shape if mod is not None else _arg(n, 1, "normalized_shape")
    shape = [ns] if isinstance(ns, int) else list(ns)
    if not shape or shape != sh[len(sh) - len(shape):]:
        raise Unsupported(f"layer_norm over {shape} on a tensor of shape {sh}: normalized_shape is not its trailing dims")
    return shape


def _pair(v, what: str) -> Tuple[int, int]:
    if isinstance(v, int) and not isinstance(v, bool):
        return (v, v)
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(x, int) for x in v):
        return (v[0], v[1])
    raise Unsupported(f"conv2d with {what} {v!r}: not lowered")


def _conv_index(out: str, stride: int, tap: str, dilation: int, pad: int) -> str:
    """The image's subscript out*stride + tap*dilation - pad, written as the DSL's conv read wants
    it: each coefficient after its name, omitted where it is 1, the offset last."""
    s = (out if stride == 1 else f"{out}*{stride}") + "+" + (tap if dilation == 1 else f"{tap}*{dilation}")
    return s + (f"-{pad}" if pad > 0 else "")


def _conv_args(b: "_Builder", n: torch.fx.Node, sd) -> Dict:
    """A conv2d node's image, filter (a state_dict key), bias (a key or None), stride, padding and
    dilation; Unsupported where the DSL's conv does not express it (groups, padding modes, dtypes)."""
    if n.op == "call_module":
        mod = b.gm.get_submodule(n.target)
        x = n.args[0]
        w = f"{n.target}.weight"
        bias = f"{n.target}.bias" if mod.bias is not None else None
        stride, padding, dilation, groups = mod.stride, mod.padding, mod.dilation, mod.groups
        if mod.padding_mode != "zeros":
            raise Unsupported(f"conv2d with padding_mode {mod.padding_mode!r}: only zero padding is lowered")
    else:
        x, wn, bn = n.args[0], _arg(n, 1, "weight"), _arg(n, 2, "bias")
        stride, padding = _arg(n, 3, "stride", 1), _arg(n, 4, "padding", 0)
        dilation, groups = _arg(n, 5, "dilation", 1), _arg(n, 6, "groups", 1)
        w = wn.target if isinstance(wn, torch.fx.Node) and wn.op == "get_attr" else None
        bias = bn.target if isinstance(bn, torch.fx.Node) and bn.op == "get_attr" else None
        if w is None or (bn is not None and bias is None):
            raise Unsupported("F.conv2d with a filter or bias that is not the module's parameter")
    if groups != 1:
        raise Unsupported(f"conv2d with groups={groups} (grouped or depthwise): only groups=1 is lowered")
    if not isinstance(x, torch.fx.Node):
        raise Unsupported("conv2d of a value that is not a tensor")
    xs, ws, os_ = b.shape(x), list(sd[w].shape) if w in sd else None, b.shape(n)
    if xs is None or len(xs) != 4 or ws is None or len(ws) != 4 or os_ is None:
        raise Unsupported("conv2d on a tensor that is not a 4-D NCHW image (unbatched input)")
    for what, t in (("the image", b.dtype(x)), ("the filter", sd[w].dtype), ("the bias", sd[bias].dtype if bias else torch.float32)):
        if t != torch.float32:
            raise Unsupported(f"conv2d with {what} in {t}: only float32 is lowered")
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    if isinstance(padding, str):
        # 'valid' is no padding; 'same' pads (dilation*(R-1)) in total, which is symmetric only when even.
        if padding == "valid":
            padding = (0, 0)
        elif padding == "same" and all(d * (k - 1) % 2 == 0 for d, k in zip(dilation, ws[2:])):
            padding = tuple(d * (k - 1) // 2 for d, k in zip(dilation, ws[2:]))
        else:
            raise Unsupported(f"conv2d with padding {padding!r} on a {ws[2]}x{ws[3]} filter: the padding is not symmetric")
    padding = _pair(padding, "padding")
    return {"node": n, "x": x, "w": w, "bias": bias, "stride": stride, "padding": padding, "dilation": dilation,
            "x_shape": xs, "w_shape": ws, "shape": os_}


# GEMM ops, each lowered to the gemm family (_gemm_args): nn.Linear, matmul, mm, bmm and einsum.
GEMM = ("matmul", "mm", "linear", "bmm", "einsum")


def _einsum_form(eq: str) -> Optional[Tuple[int, bool]]:
    """An einsum of two operands the gemm family computes: ('...mk,kn->...mn': A's rows merged,
    batch 0) or a batched product ('bmk,bkn->bmn', batch dims leading on all three: the number of
    batch dims). Returns (batch dims, False), or None."""
    m = re.fullmatch(r"([a-z]+),([a-z]+)->([a-z]+)", eq.replace(" ", ""))
    if not m:
        return None
    a, bb, o = m.groups()
    if len(set(a)) != len(a) or len(set(bb)) != len(bb) or len(set(o)) != len(o):
        return None
    if len(bb) == 2 and a[-1] == bb[0] and o == a[:-1] + bb[1] and bb[1] not in a:
        return 0, False
    nb = len(a) - 2
    if nb >= 1 and len(bb) == len(a) and a[:nb] == bb[:nb] and a[-1] == bb[-2] and o == a[:-1] + bb[-1] and \
            bb[-1] not in a:
        return nb, False
    return None


def _gemm_args(b: "_Builder", n: torch.fx.Node, op: str, sd) -> Dict:
    """A GEMM node as the gemm family computes it: operands a (a node) and b (a node, or b_param a
    state_dict key with b_nk: read as B[n, k], nn.Linear's weight), bias (a key or None), the
    merged batch (0: unbatched), M (A's rows, its leading dims merged where unbatched), K, N and
    the module's output shape; Unsupported where it is none of linear, a matmul of a [..., M, K]
    tensor by a [K, N] matrix, a batched matmul or bmm with equal batch dims, or such an einsum."""
    out = {"b_param": None, "b_nk": False, "bias": None, "shape": b.shape(n)}
    if op == "linear":
        mod = b.gm.get_submodule(n.target) if n.op == "call_module" else None
        if mod is not None:
            x, w, bias = n.args[0], f"{n.target}.weight", f"{n.target}.bias" if mod.bias is not None else None
        else:
            x, wn, bn = n.args[0], _arg(n, 1, "weight"), _arg(n, 2, "bias")
            w = wn.target if isinstance(wn, torch.fx.Node) and wn.op == "get_attr" else None
            bias = bn.target if isinstance(bn, torch.fx.Node) and bn.op == "get_attr" else None
            if w is None or (bn is not None and bias is None):
                raise Unsupported("F.linear with weights that are not the module's parameters")
        xs = b.shape(x) if isinstance(x, torch.fx.Node) else None
        if not xs or len(xs) < 2 or w not in sd or sd[w].dim() != 2:
            raise Unsupported("linear of an input of fewer than 2 dims: not lowered")
        out.update(a=x, b=None, b_param=w, b_nk=True, bias=bias, batch=0, M=math.prod(xs[:-1]), K=xs[-1],
                   N=sd[w].shape[0])
        return out
    if op == "einsum":
        eq = n.args[0] if n.args else None
        operands = list(n.args[1:])
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = list(operands[0])
        form = _einsum_form(eq) if isinstance(eq, str) and len(operands) == 2 else None
        if form is None:
            raise Unsupported(f"einsum {eq!r}: only a matrix product of two operands ('...mk,kn->...mn' or "
                              "'bmk,bkn->bmn') is lowered")
        x, y = operands
    else:
        x, y = n.args[0], n.args[1] if len(n.args) > 1 else n.kwargs.get("other", n.kwargs.get("mat2"))
    if not (isinstance(x, torch.fx.Node) and isinstance(y, torch.fx.Node)):
        raise Unsupported(f"{op} of a value that is not a tensor")
    xs, ys = b.shape(x), b.shape(y)
    if not xs or not ys or len(xs) < 2 or len(ys) < 2:
        raise Unsupported(f"{op} of a vector: only matrix products are lowered")
    if xs[-1] != ys[-2]:
        raise Unsupported(f"{op} of {xs} by {ys}: the inner dims differ")
    if len(ys) == 2:
        # A [..., M, K] by a [K, N] matrix: one GEMM over A's rows, merged.
        out.update(a=x, b=y, batch=0, M=math.prod(xs[:-1]), K=xs[-1], N=ys[-1])
        return out
    if xs[:-2] != ys[:-2]:
        raise Unsupported(f"{op} of {xs} by {ys}: only equal batch dims are lowered (no broadcast batch)")
    out.update(a=x, b=y, batch=math.prod(xs[:-2]), M=xs[-2], K=xs[-1], N=ys[-1])
    return out


def _column_reduction(b: "_Builder", ops, rowwise, ret) -> Optional[Dict]:
    """The forward's one reduction over leading dims (not all of them), when it is a column
    reduction the rowwise family computes: a sum, mean, max or min that ends the forward, with
    only elementwise ops before it. Returns its node, input shape, the count of reduced leading
    dims and keepdim; None where no reduction reduces leading dims only (Unsupported where one
    does but the rest of the forward is not a column reduction)."""
    found = []
    for n, op in ops:
        if n not in rowwise or op not in REDUCTIONS:
            continue
        sh = b.shape(n.args[0]) or []
        dims, keep = _reduced_dims(n, op, len(sh))
        if dims and dims == list(range(len(dims))) and len(dims) < len(sh):
            found.append((n, op, sh, len(dims), keep))
    if not found:
        return None
    n, op, sh, lead, keep = found[0]
    if len(rowwise) > 1:
        raise Unsupported(f"{op} over the leading dims {list(range(lead))} with other row-wise ops: a column reduction "
                          "is a program of one definition")
    if op not in ("sum", "mean", "max", "min", "amax", "amin"):
        raise Unsupported(f"{op} over the leading dims {list(range(lead))}: a column reduction is a sum, mean, max or min")
    last = ret
    if ret is not n:
        src = ret.args[0] if ret.args else None
        if not (src is n and op in ("max", "min") and _canon(ret, b.gm) in ("getitem", "getattr") and ret.args[1] in (0, "values")):
            raise Unsupported(f"{op} over the leading dims {list(range(lead))} is followed by other ops: a column reduction "
                              "is a program of one definition")
    for u in n.users:
        if u is not last and u.op != "output":
            raise Unsupported(f"{op} over a dim is read for more than its values: only its values are lowered")
    return {"node": n, "shape": sh, "lead": lead, "keepdim": keep}


def _synthesize(model: nn.Module, inputs: List, draw=None) -> Dict:
    b = _Builder(model, inputs)
    gm = b.gm
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if not tensors:
        raise Unsupported("the forward takes no tensor")
    for x in tensors:
        if x.dtype != torch.float32:
            raise Unsupported(f"an input is {x.dtype}: only float32 modules are lowered to the DSL today")
    constants, refused = fold_scalar_inputs(gm, model, inputs, draw)
    sd = model.state_dict()
    nodes = [n for n in gm.graph.nodes]
    calls = [n for n in nodes if n.op in ("call_module", "call_function", "call_method")]
    outs = [n for n in nodes if n.op == "output"]
    ret = outs[0].args[0] if outs else None
    if not isinstance(ret, torch.fx.Node):
        raise Unsupported("the forward must return one tensor")
    out_shape = b.shape(ret)
    if b.dtype(ret) not in (torch.float32, None):
        raise Unsupported(f"the output is {b.dtype(ret)}")
    ops = [(n, _canon(n, gm)) for n in calls]
    for n, op in ops:
        if kind_of(op) == "conv" and op != "conv2d":
            raise Unsupported(f"no DSL form for {op}: only 2-D convolutions (not transposed) are lowered")
    # A conv2d the DSL's conv does not express (groups, a padding mode, a dtype) is named with the
    # other ops that have no DSL form, and its reason given.
    conv_why = []
    for n, op in ops:
        if op == "conv2d":
            try:
                _conv_args(b, n, model.state_dict())
            except Unsupported as e:
                conv_why.append(str(e))
    bad = sorted({op for _, op in ops if kind_of(op) in ("pool", "layout", "other")} |
                 {op for n, op in ops if kind_of(op) == "rowwise" and op not in ROWWISE and op not in REDUCTIONS} |
                 ({"conv2d"} if conv_why else set()))
    if bad:
        raise Unsupported(f"no DSL form for {', '.join(bad)}: the forward is not one DSL program" +
                          (f" ({conv_why[0]})" if conv_why else ""))
    gemm = [n for n, op in ops if op in GEMM]
    rowwise = [n for n, op in ops if op in ROWWISE or (op in REDUCTIONS and _reduced_dims(n, op, len(b.shape(n.args[0]) or [])))]
    column = _column_reduction(b, ops, rowwise, ret)
    convs = [n for n, op in ops if op == "conv2d"]
    if convs and (gemm or rowwise):
        raise Unsupported("a convolution with a GEMM or a row-wise op is more than one DSL program")
    if len(convs) > 1:
        raise Unsupported("more than one convolution")
    if gemm and rowwise:
        raise Unsupported("a GEMM followed by a row-wise op is two DSL programs")
    if len(gemm) > 1:
        raise Unsupported("more than one GEMM")
    placeholders = [n for n in nodes if n.op == "placeholder"]
    # The ABI's tensor table holds the forward's tensor inputs only; a number the graph still reads
    # after fold_scalar_inputs is refused with its reason.
    tensor_phs = [n for k, n in enumerate(placeholders) if k < len(inputs) and isinstance(inputs[k], torch.Tensor)]
    for n in placeholders:
        if n not in tensor_phs and n.users:
            raise Unsupported(refused.get(n.name) or
                              f"the forward's argument {n.target} is not a tensor: non-tensor inputs are not lowered")
    ph_names = {n.name: f"input{k}" for k, n in enumerate(tensor_phs)}
    params = param_names(sd)
    used_params = set()

    row: List[int] = []
    conv = _conv_args(b, convs[0], sd) if convs else None
    if conv is not None:
        if conv["x"].name not in ph_names:
            raise Unsupported("the convolution must read a forward input (a conv program has no statements before it)")
        if len(conv["x"].users) > 1:
            raise Unsupported("the convolution's image is read again after it: a conv epilogue reads neither image nor filter")
        if out_shape != conv["shape"]:
            raise Unsupported(f"the output {out_shape} is not the convolution's {conv['shape']}")
        # The image keeps its own dims; the output's spatial extents P, Q are dims of their own
        # (stride, padding and dilation make them differ from H, W); the filter's R, S are fixed
        # extents in the program and dims of the tensor table.
        family, idx = "conv", "[n, k, h, w]"
        nb, c, hh, ww = conv["x_shape"]
        dims = {"N": nb, "C": c, "H": hh, "W": ww, "K": out_shape[1], "P": out_shape[2], "Q": out_shape[3],
                "R": conv["w_shape"][2], "S": conv["w_shape"][3]}
        full = list(out_shape)
    elif gemm:
        ga = _gemm_args(b, gemm[0], _canon(gemm[0], gm), sd)
        if out_shape != ga["shape"]:
            raise Unsupported(f"the output {out_shape} is not the GEMM's {ga['shape']}")
        family = "gemm"
        # A batched GEMM keeps its batch (all batch dims merged) as the leading index; the rows of
        # an unbatched one are every dim of A but its last, merged.
        if ga["batch"]:
            idx, dims = "[b, m, n]", {"B": ga["batch"], "M": ga["M"], "N": ga["N"]}
        else:
            idx, dims = "[m, n]", {"M": ga["M"], "N": ga["N"]}
        full = list(out_shape)
    elif column is not None:
        # One reduction over the leading dims, its elementwise prologue inlined: the column
        # reduction Y[c] = OP(f(X[r, c])) over r, the leading dims merged into r, the rest into c.
        family, idx = "colwise", "[r, c]"
        sh, lead = column["shape"], column["lead"]
        cols = sh[lead:]
        dims = {"R": math.prod(sh[:lead]), "C": math.prod(cols)}
        if len(cols) > 1:
            dims.update({f"C{j}": d for j, d in enumerate(cols)})
        col_dims = ["C"] if len(cols) == 1 else [f"C{j}" for j in range(len(cols))]
        full = list(sh)
    elif rowwise:
        family, idx = "rowwise", "[r, c]"
        x = rowwise[0].args[0] if rowwise[0].args else None
        sh = b.shape(x) if isinstance(x, torch.fx.Node) else None
        if not sh:
            raise Unsupported("row-wise ops are lowered on tensors of one or more dims")
        rows = {tuple(_row_of(b, n, op)) for n, op in ops if n in rowwise}
        if len(rows) > 1:
            raise Unsupported(f"row-wise ops over different trailing dims ({', '.join(str(list(r)) for r in sorted(rows))}) "
                              "are not one program")
        row = list(rows.pop())
        # Rows are the leading dims merged, the row the trailing dims the ops work over, merged too:
        # the tensors are contiguous, so [B, S, C] is [B*S, C] and [B, F, H, W] normalized over
        # [F, H, W] is [B, F*H*W]. A row of several dims keeps them as dims C0, C1, ... for the
        # tensor table, which the worker's binding check compares with the module's tensors.
        dims = {"R": math.prod(sh[:len(sh) - len(row)]), "C": math.prod(row)}
        if len(row) > 1:
            dims.update({f"C{j}": d for j, d in enumerate(row)})
        full = [dims["R"], dims["C"]]
        # The output is the rows' values where a reduction ends the chain ([B, 1] or [B] from
        # [B, D]): one value per row, as the module lays it out (size-1 dims kept as U).
        rows_out = out_shape != sh
        if rows_out and (out_shape is None or math.prod(out_shape) != dims["R"] or
                         len([d for d in out_shape if d != 1]) > len(sh) - len(row)):
            raise Unsupported(f"the output {out_shape} is neither the row-wise input's shape {sh} nor one value per row")
    else:
        family = "elementwise"
        if out_shape is None or len(out_shape) == 0:
            raise Unsupported("the output is a scalar")
        dims = {f"D{i}": d for i, d in enumerate(out_shape)}
        idx = "[" + ", ".join(f"i{i}" for i in range(len(out_shape))) + "]"
        full = list(out_shape)
    row_dims = ["C"] if len(row) <= 1 else [f"C{j}" for j in range(len(row))]
    if family != "rowwise":
        rows_out = False

    env: Dict[str, str] = {}   # node name -> expression at idx
    decl: Dict[str, List[str]] = {}    # DSL name -> the dims the program declares it over
    layout: Dict[str, List[str]] = {}  # DSL name -> its dims as the module lays it out, where they are not decl's

    def row_layout(sh: List[int]) -> Optional[List[str]]:
        """A row-wise program's [R, C] tensor as the module lays it out, or None when a tensor of
        shape `sh` is not rows of the row."""
        k = len(row)
        if len(sh) < k or list(sh[len(sh) - k:]) != row or math.prod(sh[:len(sh) - k]) != dims["R"]:
            return None
        return (["R"] if len(sh) > k else []) + row_dims

    def tensor_read(name: str, sh: List[int], what: str) -> Optional[str]:
        """Declares the tensor `name` of shape `sh` and returns its read at the output's index
        (a row-wise program's [r, c] or [c], an elementwise program's broadcast), or None when
        the family reads no tensor of that shape."""
        if family == "rowwise":
            lay = row_layout(sh)
            if lay is not None:
                decl[name], layout[name] = ["R", "C"], lay
                return name + idx
            if list(sh) == row:
                decl[name], layout[name] = ["C"], row_dims
                return name + "[c]"
            return None
        if family == "colwise":
            if list(sh) != full:
                return None
            decl[name], layout[name] = ["R", "C"], ["R"] + col_dims
            return name + idx
        if family in ("elementwise", "conv"):
            axes = _broadcast(list(sh), full)
            if axes is None:
                return None
            kept = [a for a in axes if a is not None]
            if not kept:
                raise Unsupported(f"{what} of shape {list(sh)} is one value broadcast to every element: not lowered "
                                  "(a DSL read is indexed by the output's indices)")
            dn, ix = (["N", "K", "P", "Q"], ["n", "k", "h", "w"]) if family == "conv" else \
                ([f"D{a}" for a in range(len(full))], [f"i{a}" for a in range(len(full))])
            decl[name] = [dn[a] for a in kept]
            if None in axes:
                dims["U"] = 1
                layout[name] = [dn[a] if a is not None else "U" for a in axes]
            return name + "[" + ", ".join(ix[a] for a in kept) + "]"
        if list(sh) == full:
            decl[name] = ["B", "M", "N"] if "B" in dims else ["M", "N"]
            return name + idx
        if list(sh) == [dims["N"]]:
            decl[name] = ["N"]
            return name + "[n]"
        return None

    for n in tensor_phs:
        if family == "gemm" or (conv is not None and n is conv["x"]):
            continue  # bound below by their use
        sh = b.shape(n)
        read = tensor_read(ph_names[n.name], sh, f"input {ph_names[n.name]}")
        if read is None:
            raise Unsupported(f"input {ph_names[n.name]} has shape {sh}, which the output's {out_shape} does not "
                              f"{'broadcast' if family == 'elementwise' else 'read as rows of ' + str(row) + ' or as one row'}")
        env[n.name] = read

    # A parameter read beside the output's index: whole ([m, n], [r, c], ...), or broadcast along
    # the rows where the family allows it ([n] in a GEMM epilogue, [c] in a row-wise chain, any
    # broadcast in an elementwise chain).
    def param_read(a) -> str:
        name = param_of(a)
        sh = b.shape(a) or list(sd[a.target].shape)
        read = tensor_read(name, sh, f"the parameter {a.target}")
        if read is None:
            raise Unsupported(f"the parameter {a.target} of shape {sh} is not read at the output's index or along its rows")
        return read

    def operand(a) -> str:
        if isinstance(a, torch.fx.Node):
            if a.op == "get_attr":
                return param_read(a)
            if a.name not in env:
                raise Unsupported(f"{a.name} ({a.op} {a.target}) is not an elementwise value on the output's index")
            return env[a.name]
        return _num(a)

    users = {n.name: len(n.users) for n in nodes}

    def bind(n, expr: str):
        # A value read more than once is materialised, so that the expression does not grow (in a
        # GEMM's epilogue it is repeated instead: the family takes one output definition); any
        # other is kept in parentheses, so that it composes whatever operator reads it.
        if users.get(n.name, 0) > 1 and family not in ("gemm", "conv", "colwise"):  # one output definition
            v = b.fresh()
            at = "[r]" if family == "rowwise" and _row_value(expr) else idx
            b.stmts.append(f"{v}{at} = {expr}")
            expr = v + at
        elif not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\[[a-z0-9, ]*\]", expr):
            expr = f"({expr})"
        env[n.name] = expr

    def _row_value(expr: str) -> bool:
        """Whether a row-wise expression is one value per row: it reads nothing at a column."""
        return "[r]" in expr and not re.search(r"\[(r, )?c\]", expr)

    def param_of(n) -> str:
        if n.op == "get_attr" and n.target in params:
            used_params.add(n.target)
            return params[n.target]
        raise Unsupported(f"{n.name} is not a parameter of the module")

    for n, op in ops:
        if n.name in env:
            continue  # the values of a max or min over a dim (getitem 0, .values), bound with it
        mod = gm.get_submodule(n.target) if n.op == "call_module" else None
        if family == "gemm" and n is gemm[0]:
            # Each operand is a forward input or (B of nn.Linear) a parameter, declared as the
            # GEMM reads it: rows merged ([M, K] for a [..., M, K] input), the batch merged too.
            def operand_name(v, key):
                if key is not None:
                    used_params.add(key)
                    return params[key]
                if v.name not in ph_names:
                    raise Unsupported("the GEMM must read forward inputs (the gemm family has no prologue)")
                return ph_names[v.name]
            an, bn_ = operand_name(ga["a"], None), operand_name(ga["b"], ga["b_param"])
            if an == bn_:
                raise Unsupported("a GEMM of a tensor with itself: the gemm family reads two tensors")
            bt = "B, " if ga["batch"] else ""
            bi = "b, " if ga["batch"] else ""
            dims["K"] = ga["K"]
            decl[an] = ([bt.rstrip(", ")] if ga["batch"] else []) + ["M", "K"]
            decl[bn_] = ([bt.rstrip(", ")] if ga["batch"] else []) + (["N", "K"] if ga["b_nk"] else ["K", "N"])
            bread = f"{bn_}[{bi}n, k]" if ga["b_nk"] else f"{bn_}[{bi}k, n]"
            b.stmts.append(f"acc[{bi}m, n] = sum({an}[{bi}m, k] * {bread}) over k")
            expr = f"acc[{bi}m, n]"
            if ga["bias"] is not None:
                decl[params[ga["bias"]]] = ["N"]
                used_params.add(ga["bias"])
                expr = f"{expr} + {params[ga['bias']]}[n]"
            bind(n, expr)
            continue
        if conv is not None and n is conv["node"]:
            x, w, bias = ph_names[conv["x"].name], params[conv["w"]], conv["bias"]
            decl[x], decl[w], layout[w] = ["N", "C", "H", "W"], ["K", "C", str(dims["R"]), str(dims["S"])], ["K", "C", "R", "S"]
            used_params.add(conv["w"])
            (sh, sw), (ph, pw), (dh, dw) = conv["stride"], conv["padding"], conv["dilation"]
            b.stmts.append(f"acc[n, k, h, w] = sum({x}[n, c, {_conv_index('h', sh, 'r', dh, ph)}, "
                           f"{_conv_index('w', sw, 's', dw, pw)}] * {w}[k, c, r, s]) over c, r, s")
            expr = "acc[n, k, h, w]"
            if bias is not None:
                decl[params[bias]] = ["K"]
                used_params.add(bias)
                expr = f"acc[n, k, h, w] + {params[bias]}[k]"
            bind(n, expr)
            continue
        if op in ("softmax", "log_softmax") and family == "rowwise":  # over the last dim (_row_of)
            t = b.fresh()
            b.stmts.append(f"{t}[r, c] = {operand(n.args[0])}")
            m, e, s = b.fresh(), b.fresh(), b.fresh()
            b.stmts += [f"{m}[r] = max({t}[r, c]) over c", f"{e}[r, c] = exp({t}[r, c] - {m}[r])", f"{s}[r] = sum({e}[r, c]) over c"]
            bind(n, f"{e}[r, c] / {s}[r]" if op == "softmax" else f"{t}[r, c] - {m}[r] - log({s}[r])")
            continue
        if family == "colwise" and n is column["node"]:  # the program's one definition
            fn = {"amax": "max", "amin": "min"}.get(op, op)
            b.stmts.append(f"output0[c] = {fn}({operand(n.args[0])}) over r")
            env[n.name] = "output0[c]"
            for u in n.users:  # torch.max(x, 0) is read through its values (_column_reduction checked)
                env[u.name] = "output0[c]"
            continue
        if family == "rowwise" and n in rowwise and op in REDUCTIONS:  # each row to one value (_row_of)
            t, v = b.fresh(), b.fresh()
            b.stmts.append(f"{t}[r, c] = {operand(n.args[0])}")
            if op in ("sum", "mean"):
                b.stmts.append(f"{v}[r] = {op}({t}[r, c]) over c")
            elif op in ("amax", "max", "amin", "min"):
                b.stmts.append(f"{v}[r] = {'max' if op in ('amax', 'max') else 'min'}({t}[r, c]) over c")
            elif op == "logsumexp":
                m, e = b.fresh(), b.fresh()
                b.stmts += [f"{m}[r] = max({t}[r, c]) over c", f"{e}[r] = sum(exp({t}[r, c] - {m}[r])) over c",
                            f"{v}[r] = {m}[r] + log({e}[r])"]
            else:
                p = _arg(n, 1, "p", "fro")
                if p in ("fro", 2, 2.0):
                    s2 = b.fresh()
                    b.stmts += [f"{s2}[r] = sum({t}[r, c] * {t}[r, c]) over c", f"{v}[r] = sqrt({s2}[r])"]
                elif p in (1, 1.0):
                    b.stmts.append(f"{v}[r] = sum(abs({t}[r, c])) over c")
                else:
                    raise Unsupported(f"norm with p={p!r}: only p=1, 2 and 'fro' are lowered")
            if op in ("max", "min") and _arg(n, 1, "dim") is not None:
                # torch.max(x, dim) returns (values, indices): its values are read through getitem 0 or .values.
                for u in n.users:
                    which = u.args[1] if len(u.args) > 1 else None
                    if not ((u.op == "call_function" and getattr(u.target, "__name__", "") == "getitem" and which == 0) or
                            (u.op == "call_function" and getattr(u.target, "__name__", "") == "getattr" and which == "values")):
                        raise Unsupported(f"{op} over a dim is read for its indices: only its values are lowered")
                    env[u.name] = f"{v}[r]"
            env[n.name] = f"{v}[r]"
            continue
        if op == "instance_norm" and family == "rowwise":  # each plane over its spatial dims (_row_of)
            if mod is not None:
                if mod.affine or (mod.track_running_stats and not mod.training):
                    raise Unsupported("instance_norm with a per-channel affine or running statistics: not lowered "
                                      "(a row is one plane; its channel is not an index of the row)")
                eps = mod.eps
            else:
                if any(_arg(n, i, k) is not None for i, k in ((1, "running_mean"), (2, "running_var"), (3, "weight"), (4, "bias"))) \
                        or not _arg(n, 5, "use_input_stats", True):
                    raise Unsupported("F.instance_norm with an affine or running statistics: not lowered")
                eps = _arg(n, 7, "eps", 1e-5)
            t, mu, d, var = b.fresh(), b.fresh(), b.fresh(), b.fresh()
            b.stmts += [f"{t}[r, c] = {operand(n.args[0])}", f"{mu}[r] = mean({t}[r, c]) over c", f"{d}[r, c] = {t}[r, c] - {mu}[r]",
                        f"{var}[r] = mean({d}[r, c] * {d}[r, c]) over c"]
            bind(n, f"{d}[r, c] * rsqrt({var}[r] + {_num(eps)})")
            continue
        if op == "layer_norm" and family == "rowwise":  # over the row, normalized_shape (_row_of)
            if mod is not None:
                eps = mod.eps
                w = f"{n.target}.weight" if mod.weight is not None else None
                bias = f"{n.target}.bias" if mod.bias is not None else None
            else:
                eps = _arg(n, 4, "eps", 1e-5)
                wn, bn = _arg(n, 2, "weight"), _arg(n, 3, "bias")
                w = wn.target if isinstance(wn, torch.fx.Node) and param_of(wn) else None
                bias = bn.target if isinstance(bn, torch.fx.Node) and param_of(bn) else None
            # The affine weight and bias have normalized_shape: read at the row's flattened index.
            for k in (w, bias):
                if k is not None and list(sd[k].shape) != row:
                    raise Unsupported(f"the layer_norm parameter {k} has shape {list(sd[k].shape)}, not the row's {row}")
            t, mu, d, var = b.fresh(), b.fresh(), b.fresh(), b.fresh()
            b.stmts += [f"{t}[r, c] = {operand(n.args[0])}", f"{mu}[r] = mean({t}[r, c]) over c", f"{d}[r, c] = {t}[r, c] - {mu}[r]",
                        f"{var}[r] = mean({d}[r, c] * {d}[r, c]) over c"]
            expr = f"{d}[r, c] * rsqrt({var}[r] + {_num(eps)})"
            if w is not None:
                decl[params[w]], layout[params[w]] = ["C"], row_dims
                used_params.add(w)
                expr = f"{expr} * {params[w]}[c]"
            if bias is not None:
                decl[params[bias]], layout[params[bias]] = ["C"], row_dims
                used_params.add(bias)
                expr = f"{expr} + {params[bias]}[c]"
            bind(n, expr)
            continue
        if op in ("view", "reshape", "flatten", "contiguous", "clone", "detach", "squeeze", "unsqueeze") and n.args:
            src = n.args[0]
            if b.shape(n) != b.shape(src):
                raise Unsupported(f"{op} changes the shape from {b.shape(src)} to {b.shape(n)}")
            env[n.name] = operand(src)
            continue
        if op in _BINARY:
            x, y = n.args[0], n.args[1] if len(n.args) > 1 else n.kwargs.get("other")
            # Every value is read at the output's index, each tensor along the axes it broadcasts
            # along (tensor_read), so an operand of fewer or size-1 dims needs nothing here.
            for v in (x, y):
                if isinstance(v, torch.fx.Node) and b.shape(v) is not None and b.shape(n) is not None and \
                        _broadcast(b.shape(v), b.shape(n)) is None:
                    raise Unsupported(f"{op} reads {b.shape(v)} into {b.shape(n)}, which is not a broadcast")
            alpha = n.kwargs.get("alpha")
            ys = operand(y)
            if alpha is not None and op in ("add", "sub"):
                ys = f"{_num(alpha)} * {ys}"
            bind(n, f"({operand(x)} {_BINARY[op]} {ys})")
            continue
        if op in ("maximum", "minimum", "max", "min") and len(n.args) == 2 and isinstance(n.args[1], torch.fx.Node):
            bind(n, f"{'max' if op in ('maximum', 'max') else 'min'}({operand(n.args[0])}, {operand(n.args[1])})")
            continue
        if op == "pow" and len(n.args) == 2 and not isinstance(n.args[1], torch.fx.Node):
            e = n.args[1]
            xs = operand(n.args[0])
            if e == 2:
                bind(n, f"({xs} * {xs})")
            elif e == 3:
                bind(n, f"({xs} * {xs} * {xs})")
            elif e == 0.5:
                bind(n, f"sqrt({xs})")
            else:
                raise Unsupported(f"pow with exponent {e!r} is not lowered")
            continue
        raw = (n.target if n.op == "call_method" else getattr(n.target, "__name__", "")).rstrip("_")
        if raw in ("clamp_min", "clamp_max") and n.args:
            v = _arg(n, 1, "min" if raw == "clamp_min" else "max")
            bind(n, f"{'max' if raw == 'clamp_min' else 'min'}({operand(n.args[0])}, {_num(v)})")
            continue
        if op == "dropout":
            training = mod.training if mod is not None else _arg(n, 2, "training", True)
            if training:
                raise Unsupported("dropout in training mode is random: not lowered")
        if not n.args or not isinstance(n.args[0], torch.fx.Node):
            raise Unsupported(f"{op} is not lowered to the DSL")
        u = _unary(op, operand(n.args[0]), n, mod)
        if u is None:
            raise Unsupported(f"{op} has no DSL form (kept as a PyTorch call)")
        bind(n, u)

    for k in used_params:
        if sd[k].dtype != torch.float32:
            raise Unsupported(f"the parameter {k} is {sd[k].dtype}: only float32 is lowered today")
    unused = [k for k in sd if k not in used_params]
    if unused:
        raise Unsupported(f"the state_dict entries {', '.join(unused)} are not used by the lowered program")
    final = operand(ret)
    if family == "colwise":
        if final != "output0[c]":
            raise Unsupported("a column reduction is the program's one definition: nothing may follow it")
    elif family == "conv" and final == "acc[n, k, h, w]":
        b.stmts[-1] = "output0" + b.stmts[-1][len("acc"):]  # no epilogue: the sum is the output
    else:
        b.stmts.append(f"output0{'[r]' if rows_out else idx} = {final}")
    for n in tensor_phs:
        if ph_names[n.name] not in decl:
            raise Unsupported(f"input {ph_names[n.name]} is not read by the lowered program")
    if family == "conv":
        decl["output0"] = ["N", "K", "P", "Q"]
    elif family == "gemm":
        decl["output0"] = ["B", "M", "N"] if "B" in dims else ["M", "N"]
    elif family == "colwise":
        decl["output0"] = ["C"]
        layout["output0"] = (["U"] * column["lead"] if column["keepdim"] else []) + col_dims
        if column["keepdim"]:
            dims["U"] = 1
    elif family == "rowwise":
        if rows_out:
            # [B, 1] as [R, U], [B] as [R], a scalar (one row) as []: the module's layout, rows merged.
            lead = len(sh) - len(row)
            decl["output0"] = ["R"]
            if lead == 0:
                layout["output0"] = ["U"] * len(out_shape)
            else:
                layout["output0"] = ["R"] + ["U"] * (len(out_shape) - lead)
            if "U" in layout["output0"]:
                dims["U"] = 1
        else:
            decl["output0"], layout["output0"] = ["R", "C"], row_layout(out_shape)
    else:
        decl["output0"] = [f"D{i}" for i in range(len(out_shape))]

    # The tensor table, in the ABI's order, each tensor as the module lays it out; the program's
    # header in the same order, each as the program reads it.
    names = [(ph_names[n.name], "in") for n in tensor_phs] + [(params[k], "in") for k in sd] + [("output0", "out")]
    table = [{"name": nm, "role": role, "shape": layout.get(nm, decl[nm]), "dtype": "f32"} for nm, role in names]
    # A conv's image reads 0 outside its extents: the convolution's zero padding.
    outside = {ph_names[conv["x"].name]} if conv is not None else set()
    ins = ", ".join(f"{nm}: f32[{', '.join(decl[nm])}]{' outside 0' if nm in outside else ''}" for nm, role in names if role == "in")
    out_dims = decl["output0"]
    schedule = {
        "elementwise": ["threads = 256", "vector = 1"],
        "rowwise": ["threads = 256", "vector = 1", "rows_per_block = 1", "reduction = block", "cache_row = none"],
        "colwise": ["threads = 256", "vector = 1", "rows_per_block = 1", "reduction = block", "cache_row = none"],
        "gemm": ["tile = [64, 64, 16]", "stages = auto", "mainloop = simt"],
        "conv": ["tile = [64, 64, 16]", "thread_tile = [4, 4]"],
    }[family]
    notes = "".join(f"# The forward's argument {c['argument']} is the constant {c['value']!r}: {c['reason']}.\n" for c in constants)
    text = (f"# Lowered by ksol from the module's forward ({'rowwise, a column reduction' if family == 'colwise' else family}); the schedule is a plain default.\n" + notes +
            f"kernel model({ins}) -> (output0: f32[{', '.join(out_dims)}]) {{\n" +
            "".join(f"  {s}\n" for s in b.stmts) + "}\nschedule {\n" + "".join(f"  {s}\n" for s in schedule) + "}\n")
    return {"program": text, "family": "rowwise" if family == "colwise" else family, "tensors": table, "dims": dims, "dim_order": list(dims), "constants": constants}
