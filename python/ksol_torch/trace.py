"""Tracing a module with torch.fx into an op graph with shapes, FLOPs and bytes.

Every call node gets a canonical op name and a kind:
  gemm         linear, matmul, mm, bmm, addmm, baddbmm
  conv         conv1d/2d/3d and their transposes
  elementwise  activations, arithmetic, casts, dropout (identity in eval), eval-mode batch norm
  rowwise      softmax, log_softmax, layer/group/instance/rms norm, reductions, cumulative ops
  view         reshapes that move no data (view, reshape, flatten, squeeze, unsqueeze, ...), and clone
  layout       ops that move data without arithmetic (permute, transpose, cat, pad, ...)
  pool         pooling
  other        anything else (kept as a PyTorch call)
"""
import dataclasses
import dis
import inspect
import math
import operator
import threading
from typing import Any, Dict, List, Optional

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp


class _Tracer(torch.fx.Tracer):
    """fx's tracer, with the modules stitch.py writes into a graph (a class attribute
    `ksol_leaf`) kept whole, as torch.nn's are: a piece's graph traced again names them."""

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return getattr(type(m), "ksol_leaf", False) or super().is_leaf_module(m, qualname)


def symbolic_trace(model: nn.Module) -> torch.fx.GraphModule:
    """torch.fx.symbolic_trace, where a forward may make a one-value constant on its input's
    device (`torch.tensor(0.0, device=x.device)`): fx cannot pass the traced device to the
    factory, so such a constant is made without it, a 0-d tensor that the ops broadcast wherever
    their operands live, as a constant written `torch.tensor(0.0)` is (fx keeps it as
    _tensor_constant<i>). Any other factory call with a traced argument fails as before. A traced
    value unpacked into names (`b, c, h, w = x.shape`) is taken apart by the unpacking
    instruction's count on every Python (_iter_proxy)."""
    with _TRACING:  # one trace at a time patches torch.tensor; a trace inside one keeps the patch
        _TRACE_DEPTH[0] += 1
        real = torch.tensor if _TRACE_DEPTH[0] == 1 else None
        real_iter = torch.fx.Proxy.__iter__
        if real is not None:
            def tensor(data, *args, **kwargs):
                if isinstance(kwargs.get("device"), torch.fx.Proxy) and isinstance(data, (bool, int, float)) and not args:
                    kwargs.pop("device")
                return real(data, *args, **kwargs)

            torch.tensor = tensor
            torch.fx.Proxy.__iter__ = _iter_proxy
        try:
            tracer = _Tracer()
            graph = tracer.trace(model)
            return torch.fx.GraphModule(tracer.root, graph, model.__class__.__name__)
        finally:
            _TRACE_DEPTH[0] -= 1
            if real is not None:
                torch.tensor = real
                torch.fx.Proxy.__iter__ = real_iter


def _iter_proxy(self):
    """Proxy.__iter__ for `a, b = proxy`: the caller's instruction at its last offset, found by
    offset. PyTorch 1.13 takes it as the offset over 2, which is no instruction's index once
    Python 3.11 put inline caches between instructions (an IndexError, or the wrong one)."""
    caller = inspect.currentframe().f_back
    at = next((i for i in dis.get_instructions(caller.f_code) if i.offset == caller.f_lasti), None)
    if at is not None and at.opname == "UNPACK_SEQUENCE":
        return (self[i] for i in range(at.argval))
    return self.tracer.iter(self)


_TRACING, _TRACE_DEPTH = threading.RLock(), [0]


_GEMM = {"linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum"}
_CONV = {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}
# elementwise ops and their FLOPs per output element (transcendentals counted as one op each)
_ELEMENTWISE = {
    "add": 1, "sub": 1, "mul": 1, "div": 1, "truediv": 1, "floordiv": 1, "neg": 1, "abs": 1, "pow": 1,
    "relu": 1, "relu6": 2, "leaky_relu": 2, "elu": 3, "selu": 4, "celu": 3, "gelu": 8, "silu": 4, "mish": 6,
    "sigmoid": 4, "tanh": 4, "hardtanh": 2, "hardsigmoid": 3, "hardswish": 4, "softplus": 4, "softsign": 3,
    "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "clamp": 2, "clip": 2, "minimum": 1, "maximum": 1, "where": 1,
    "sign": 1, "reciprocal": 1, "square": 1, "sin": 1, "cos": 1, "erf": 1, "to": 0, "float": 0, "double": 0,
    "half": 0, "bfloat16": 0, "type_as": 0, "dropout": 0, "identity": 0, "batch_norm": 2, "logsigmoid": 4,
    "tanhshrink": 5, "hardshrink": 2, "softshrink": 2, "threshold": 1, "masked_fill": 1, "lerp": 3,
    "tril": 1, "triu": 1,  # a mask by the element's position
}
_ROWWISE = {
    "softmax": 5, "log_softmax": 5, "layer_norm": 8, "group_norm": 8, "instance_norm": 8, "rms_norm": 6,
    "sum": 1, "mean": 1, "max": 1, "min": 1, "amax": 1, "amin": 1, "argmax": 1, "argmin": 1, "prod": 1,
    "norm": 2, "var": 3, "std": 4, "logsumexp": 4, "cumsum": 1, "cumprod": 1, "normalize": 4, "all": 1,
    "any": 1, "cross_entropy": 6, "nll_loss": 1, "mse_loss": 3, "l1_loss": 3, "smooth_l1_loss": 4,
    "kl_div": 4, "huber_loss": 4, "triplet_margin_loss": 8, "cosine_similarity": 6, "hinge_embedding_loss": 3,
    "local_response_norm": 8,
}
_VIEW = {"view", "reshape", "flatten", "squeeze", "unsqueeze", "contiguous", "expand", "expand_as", "unflatten",
         "view_as", "reshape_as", "getitem", "getattr", "size", "dim", "detach",
         "clone"}  # a clone of a value nothing mutates afterwards needs no copy in a fused kernel
_LAYOUT = {"permute", "transpose", "t", "cat", "stack", "split", "chunk", "pad", "repeat", "roll", "flip",
           "narrow", "select", "index_select", "gather", "scatter", "diag", "pixel_shuffle",
           "repeat_interleave", "unfold", "interpolate", "upsample"}
_POOL = {"max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
         "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
         "adaptive_max_pool2d", "adaptive_max_pool3d"}

_MODULE_OPS = {
    nn.Linear: "linear", nn.Conv1d: "conv1d", nn.Conv2d: "conv2d", nn.Conv3d: "conv3d",
    nn.ConvTranspose1d: "conv_transpose1d", nn.ConvTranspose2d: "conv_transpose2d", nn.ConvTranspose3d: "conv_transpose3d",
    nn.ReLU: "relu", nn.ReLU6: "relu6", nn.LeakyReLU: "leaky_relu", nn.ELU: "elu", nn.SELU: "selu", nn.CELU: "celu",
    nn.GELU: "gelu", nn.SiLU: "silu", nn.Mish: "mish", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.Hardtanh: "hardtanh",
    nn.Hardsigmoid: "hardsigmoid", nn.Hardswish: "hardswish", nn.Softplus: "softplus", nn.Softsign: "softsign",
    nn.Dropout: "dropout", nn.Identity: "identity", nn.LogSigmoid: "logsigmoid", nn.Tanhshrink: "tanhshrink",
    nn.Hardshrink: "hardshrink", nn.Softshrink: "softshrink", nn.Threshold: "threshold",
    nn.BatchNorm1d: "batch_norm", nn.BatchNorm2d: "batch_norm", nn.BatchNorm3d: "batch_norm",
    nn.Softmax: "softmax", nn.LogSoftmax: "log_softmax", nn.LayerNorm: "layer_norm", nn.GroupNorm: "group_norm",
    nn.InstanceNorm1d: "instance_norm", nn.InstanceNorm2d: "instance_norm", nn.InstanceNorm3d: "instance_norm",
    nn.LocalResponseNorm: "local_response_norm",
    nn.MaxPool1d: "max_pool1d", nn.MaxPool2d: "max_pool2d", nn.MaxPool3d: "max_pool3d",
    nn.AvgPool1d: "avg_pool1d", nn.AvgPool2d: "avg_pool2d", nn.AvgPool3d: "avg_pool3d",
    nn.AdaptiveAvgPool1d: "adaptive_avg_pool1d", nn.AdaptiveAvgPool2d: "adaptive_avg_pool2d",
    nn.AdaptiveAvgPool3d: "adaptive_avg_pool3d", nn.AdaptiveMaxPool1d: "adaptive_max_pool1d",
    nn.AdaptiveMaxPool2d: "adaptive_max_pool2d", nn.AdaptiveMaxPool3d: "adaptive_max_pool3d",
    nn.Flatten: "flatten", nn.Unflatten: "unflatten", nn.PixelShuffle: "pixel_shuffle", nn.Upsample: "upsample",
}
_OPERATORS = {operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "truediv",
              operator.floordiv: "floordiv", operator.neg: "neg", operator.pow: "pow", operator.matmul: "matmul",
              operator.getitem: "getitem", operator.abs: "abs"}


def kind_of(op: str) -> str:
    if op in _GEMM:
        return "gemm"
    if op in _CONV:
        return "conv"
    if op in _ELEMENTWISE:
        return "elementwise"
    if op in _ROWWISE:
        return "rowwise"
    if op in _VIEW:
        return "view"
    if op in _LAYOUT:
        return "layout"
    if op in _POOL:
        return "pool"
    return "other"


@dataclasses.dataclass
class OpNode:
    name: str                    # the fx node's name
    op: str                      # canonical op name
    kind: str
    target: str                  # what fx calls (module path, function or method name)
    inputs: List[str]            # fx names of tensor-valued arguments (placeholders, params, nodes)
    shape: Optional[List[int]]   # output shape (first tensor output)
    dtype: Optional[str]
    flops: float
    out_bytes: float
    users: int
    accumulation: float = 1.0    # terms summed into one output value (K; C*R*S; a normalization's extent)


@dataclasses.dataclass
class Graph:
    ops: List[OpNode]
    inputs: List[Dict[str, Any]]     # the forward's tensor inputs: name, shape, dtype
    outputs: List[Dict[str, Any]]
    params: Dict[str, Dict[str, Any]]  # fx get_attr names and module parameters read by ops
    flops: float
    bytes: float                     # compulsory: inputs + parameters + outputs, once each
    traced: bool
    reason: str = ""                 # why tracing failed, when it did

    @property
    def accumulation(self) -> float:
        """The longest accumulation of any op: how many terms one value sums (the correctness
        gate's error growth); FLOPs over twice the outputs would miss a normalization's, whose
        output is as large as its input."""
        return max([o.accumulation for o in self.ops] + [1.0])


def _canonical(node: torch.fx.Node, gm: torch.fx.GraphModule) -> str:
    if node.op == "call_module":
        mod = gm.get_submodule(node.target)
        for cls, name in _MODULE_OPS.items():
            if type(mod) is cls:
                return name
        return type(mod).__name__.lower()
    # torch.multiply and its kin are the arithmetic operators under other names.
    aliases = {"multiply": "mul", "subtract": "sub", "divide": "div", "true_divide": "div"}
    if node.op == "call_method":
        t = {"add_": "add", "mul_": "mul", "relu_": "relu", "clamp_": "clamp", "div_": "div", "sub_": "sub",
             "clamp_min": "clamp", "clamp_max": "clamp", "clamp_min_": "clamp", "clamp_max_": "clamp"}.get(node.target, node.target)
        return aliases.get(t, t)
    t = node.target
    if t in _OPERATORS:
        return _OPERATORS[t]
    name = getattr(t, "__name__", str(t))
    name = aliases.get(name, name)
    return {"clamp_min": "clamp", "clamp_max": "clamp", "max_pool2d_with_indices": "max_pool2d",
            "_max_pool2d": "max_pool2d", "boolean_dispatch": "max_pool2d"}.get(name, name)


def _meta(node) -> Optional[Any]:
    tm = node.meta.get("tensor_meta")
    if tm is None:
        return None
    if not hasattr(tm, "shape") and isinstance(tm, (list, tuple)):  # TensorMetadata is itself a tuple
        tm = next((m for m in tm if hasattr(m, "shape")), None)
    return tm


def _numel(shape) -> int:
    return int(math.prod(shape)) if shape is not None else 0


def _bytes_of(tm) -> float:
    if tm is None:
        return 0.0
    return float(_numel(tm.shape) * torch.empty((), dtype=tm.dtype).element_size())


def _shape_of_arg(a, gm) -> Optional[List[int]]:
    if isinstance(a, torch.fx.Node):
        tm = _meta(a)
        if tm is not None:
            return list(tm.shape)
        if a.op == "get_attr":
            return list(_attr(gm, a.target).shape)
    return None


def _attr(gm, target):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _flops(op: str, kind: str, node, gm, out_shape) -> float:
    n_out = _numel(out_shape)
    if kind == "gemm":
        if op == "linear":
            if node.op == "call_module":
                mod = gm.get_submodule(node.target)
                k = mod.in_features
                return 2.0 * n_out * k + (n_out if mod.bias is not None else 0)
            w = _shape_of_arg(node.args[1], gm)
            has_bias = (len(node.args) > 2 and node.args[2] is not None) or node.kwargs.get("bias") is not None
            return 2.0 * n_out * (w[-1] if w else 0) + (n_out if has_bias else 0)
        shapes = [_shape_of_arg(a, gm) for a in node.args if isinstance(a, torch.fx.Node)]
        shapes = [s for s in shapes if s]
        if op in ("addmm", "baddbmm") and len(shapes) >= 3:
            return 2.0 * n_out * shapes[1][-1] + n_out
        if len(shapes) >= 2 and shapes[0]:
            return 2.0 * n_out * shapes[0][-1]
        return 0.0
    if kind == "conv":
        if node.op == "call_module":
            mod = gm.get_submodule(node.target)
            per_out = (mod.in_channels // mod.groups) * math.prod(mod.kernel_size)
            if op.startswith("conv_transpose"):
                in_shape = _shape_of_arg(node.args[0], gm)
                return 2.0 * _numel(in_shape) * (mod.out_channels // mod.groups) * math.prod(mod.kernel_size)
            return 2.0 * n_out * per_out + (n_out if mod.bias is not None else 0)
        w = _shape_of_arg(node.args[1], gm)
        if op.startswith("conv_transpose"):  # weight [C_in, C_out/groups, k...]: each input element fans out
            in_shape = _shape_of_arg(node.args[0], gm)
            return 2.0 * _numel(in_shape) * (math.prod(w[1:]) if w else 0)
        return 2.0 * n_out * (math.prod(w[1:]) if w else 0)
    if kind == "elementwise":
        return float(n_out * _ELEMENTWISE.get(op, 1))
    if kind == "rowwise":
        in_shape = _shape_of_arg(node.args[0], gm) if node.args else None
        return float(max(_numel(in_shape), n_out) * _ROWWISE.get(op, 1))
    if kind == "pool":
        in_shape = _shape_of_arg(node.args[0], gm) if node.args else None
        return float(_numel(in_shape))
    return 0.0


def _kept_fraction(node, gm, out_shape) -> float:
    """The share of a GEMM's outputs the program needs: below 1 where the product's one use is
    torch.tril or torch.triu with a constant diagonal, whose masked entries are zeros whatever the
    sums are (the speed-of-light bound then counts only the kept entries' dot products)."""
    if not out_shape or len(out_shape) < 2 or len(node.users) != 1:
        return 1.0
    (user,) = node.users
    if user.op == "call_function":
        name = getattr(user.target, "__name__", "")
    elif user.op == "call_method":
        name = user.target
    else:
        return 1.0
    if name not in ("tril", "triu") or not user.args or user.args[0] is not node:
        return 1.0
    diag = user.args[1] if len(user.args) > 1 else user.kwargs.get("diagonal", 0)
    if not isinstance(diag, int):
        return 1.0
    rows, cols = int(out_shape[-2]), int(out_shape[-1])
    if rows <= 0 or cols <= 0:
        return 1.0
    if name == "tril":  # column j kept where j <= i + diag
        kept = sum(min(cols, max(0, i + diag + 1)) for i in range(rows))
    else:  # triu: j >= i + diag
        kept = sum(max(0, cols - max(0, i + diag)) for i in range(rows))
    return kept / float(rows * cols)


# Row-wise ops that select one input per output and sum none: no error growth.
_SELECTING = {"max", "min", "amax", "amin", "argmax", "argmin", "all", "any"}


def _dim_arg(node, gm, default=-1) -> int:
    if node.op == "call_module":
        return getattr(gm.get_submodule(node.target), "dim", default)
    d = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else default)
    return d if isinstance(d, int) else default


def _accumulation(op: str, kind: str, node, gm, out_shape, flops: float) -> float:
    """Terms summed into one output value of the op: K for a GEMM, C*R*S for a convolution, the
    reduced extent for a reduction, the normalized extent for a normalization (softmax, layer /
    group / instance norm, scans)."""
    n_out = max(1, _numel(out_shape))
    if kind in ("gemm", "conv"):  # 2 FLOPs per term, plus a bias's one per output
        return float(max(1, math.floor(flops / (2.0 * n_out))))
    if kind != "rowwise":
        return 1.0
    if op in _SELECTING:
        return 1.0  # picks one input (max, argmax, any, ...): it sums nothing
    in_shape = _shape_of_arg(node.args[0], gm) if node.args else None
    if not in_shape:
        return 1.0
    n_in = _numel(in_shape)
    if op == "local_response_norm":  # sums the squares of `size` neighbouring channels
        size = gm.get_submodule(node.target).size if node.op == "call_module" else node.kwargs.get(
            "size", node.args[1] if len(node.args) > 1 else 1)
        return float(size) if isinstance(size, int) else 1.0
    if n_out < n_in:  # a reduction: each output sums n_in / n_out inputs
        return float(n_in // n_out)
    if op == "layer_norm":
        shape = (gm.get_submodule(node.target).normalized_shape if node.op == "call_module"
                 else node.kwargs.get("normalized_shape", node.args[1] if len(node.args) > 1 else in_shape[-1:]))
        shape = [shape] if isinstance(shape, int) else list(shape)
        return float(_numel(shape))
    if op == "group_norm":
        g = (gm.get_submodule(node.target).num_groups if node.op == "call_module"
             else node.kwargs.get("num_groups", node.args[1] if len(node.args) > 1 else 1))
        return float(n_in // max(1, in_shape[0] * int(g)))
    if op == "instance_norm":
        return float(_numel(in_shape[2:]))
    if op == "batch_norm":  # training mode: over the batch and the spatial dims
        return float(n_in // max(1, in_shape[1] if len(in_shape) > 1 else 1))
    d = _dim_arg(node, gm)
    return float(in_shape[d] if -len(in_shape) <= d < len(in_shape) else in_shape[-1])


def trace(model: nn.Module, inputs: List[Any]) -> Graph:
    """Traces `model` on `inputs` (not modified). A module torch.fx cannot trace (data-dependent
    control flow) gives traced=False with the reason, and one 'other' op for the whole forward."""
    tensor_inputs = [{"name": f"input{i}", "shape": list(x.shape), "dtype": str(x.dtype).replace("torch.", "")}
                     for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
    with torch.no_grad():
        outs = model(*inputs)
    out_list = [o for o in (outs if isinstance(outs, (list, tuple)) else [outs]) if isinstance(o, torch.Tensor)]
    outputs = [{"name": f"output{i}", "shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", "")} for i, o in enumerate(out_list)]
    param_bytes = float(sum(p.numel() * p.element_size() for p in model.parameters()) +
                        sum(b.numel() * b.element_size() for b in model.buffers()))
    io_bytes = float(sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)) +
                     sum(o.numel() * o.element_size() for o in out_list))
    try:
        gm = symbolic_trace(model)
        with torch.no_grad():
            ShapeProp(gm).propagate(*inputs)
    except Exception as e:  # fx raises many types for untraceable code
        reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        flops = 0.0
        whole = OpNode("forward", "forward", "other", "forward", [t["name"] for t in tensor_inputs],
                       outputs[0]["shape"] if outputs else None, outputs[0]["dtype"] if outputs else None, flops,
                       sum(o.numel() * o.element_size() for o in out_list), 1)
        return Graph([whole], tensor_inputs, outputs, {}, flops, io_bytes + param_bytes, False, reason)

    ops: List[OpNode] = []
    params: Dict[str, Dict[str, Any]] = {}
    placeholder_names = {}
    k = 0
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            placeholder_names[node.name] = f"input{k}"
            k += 1
        elif node.op == "get_attr":
            v = _attr(gm, node.target)
            if isinstance(v, torch.Tensor):
                params[node.name] = {"shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", "")}
    total = 0.0
    for node in gm.graph.nodes:
        if node.op not in ("call_module", "call_function", "call_method"):
            continue
        op = _canonical(node, gm)
        kind = kind_of(op)
        if op == "batch_norm" and model.training:
            kind = "rowwise"  # training-mode batch norm reduces over the batch
        tm = _meta(node)
        shape = list(tm.shape) if tm is not None else None
        dtype = str(tm.dtype).replace("torch.", "") if tm is not None else None
        args = [a for a in list(node.args) + list(node.kwargs.values()) if isinstance(a, torch.fx.Node)]
        ins = [placeholder_names.get(a.name, a.name) for a in args]
        if node.op == "call_module":
            mod = gm.get_submodule(node.target)
            for pname, p in list(mod.named_parameters(recurse=False)) + list(mod.named_buffers(recurse=False)):
                if p is None:
                    continue
                full = f"{node.target}.{pname}"
                params[full] = {"shape": list(p.shape), "dtype": str(p.dtype).replace("torch.", "")}
                ins.append(full)
        fl = _flops(op, kind, node, gm, shape)
        try:
            acc = _accumulation(op, kind, node, gm, shape, fl)
        except Exception:  # an argument form not foreseen: the op's own FLOPs per output
            acc = max(1.0, fl / (2.0 * max(1, _numel(shape))))
        if kind == "gemm":
            fl *= _kept_fraction(node, gm, shape)
        total += fl
        ops.append(OpNode(node.name, op, kind, str(node.target) if node.op != "call_function" else op, ins, shape, dtype,
                          fl, _bytes_of(tm), len(node.users), acc))
    return Graph(ops, tensor_inputs, outputs, params, total, io_bytes + param_bytes, True)
