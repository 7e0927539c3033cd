"""One Inductor kernel as the PyTorch computation it performs: its Graph fragment (the ATen nodes
Inductor fused into it, inductor_wrapper.Fragment) bound to the kernel's own arguments, and
written as a KernelBench-format problem file that `ksol optimize` takes like any module.

    bind      each tensor the kernel reads (in_ptr*, in_out_ptr*) to the fragment value it is;
              each tensor it writes (out_ptr*, in_out_ptr*) to the fragment node it stores
    select    the nodes the written values need, in the fragment's (topological) order
    recompose softmax's and layer_norm's decompositions back into torch.softmax and
              F.layer_norm, which ksol's lowering takes as one row-wise program
    write     forward(in_ptr0, ...) -> (out_ptr0, ...) in PyTorch, get_inputs() drawing
              tensors of the kernel's shapes

What the fragment does not determine is refused with the reason (RegionError), never guessed
past: a kernel that stores a partial result of a split reduction (no fragment node is that
value), a fragment node that reads a value neither computed in the fragment nor one of the
kernel's inputs, a kernel input the outputs never read (the fragment describes another
computation than the kernel's), an argument that is not contiguous (ksol's kernels read and
write contiguous tensors), symbolic sizes. Where a binding is chosen by shape among several,
the capture on the GPU checks it by value: the written problem's Model, run on the inputs the
Inductor kernel was launched with, must give what the kernel wrote (inductor_capture.py).
"""
import copy
import dataclasses
import math
import re
from typing import Dict, List, Optional, Tuple

from .inductor_wrapper import Extern, FragmentNode, Kernel, Launch, Program, Ref, TensorSpec, Write


class RegionError(Exception):
    """The kernel's fragment does not give a PyTorch computation of what it writes: the reason."""


@dataclasses.dataclass
class Port:
    param: str          # the kernel parameter (in_ptr0, out_ptr2, in_out_ptr0)
    buffer: str         # the wrapper's name for the tensor at the launch
    node: str           # the fragment value it is (a placeholder, or the node it stores)
    spec: TensorSpec


@dataclasses.dataclass
class Region:
    kernel: str
    inputs: List[Port]
    outputs: List[Port]
    nodes: List[FragmentNode]           # the fragment nodes computed, in order
    items: Dict[str, Tuple[str, int]]   # a tuple element's name -> (tuple node, index)
    recomposed: List[str]               # what was written back as one op ("softmax", "layer_norm")
    accumulation: int                   # the longest sum an output value comes from (1 for pointwise)
    body: List[str]                     # forward's lines
    notes: List[str]                    # choices made by shape, which the capture checks by value


# --- binding ------------------------------------------------------------------------------------------
def _refs(v) -> List[str]:
    if isinstance(v, Ref):
        return [v.name]
    if isinstance(v, (list, tuple)):
        return [r for e in v for r in _refs(e)]
    if isinstance(v, dict):
        return [r for e in v.values() for r in _refs(e)]
    return []


def _suffix(name: str) -> int:
    m = re.fullmatch(r"getitem(?:_(\d+))?", name)
    return int(m.group(1)) if m and m.group(1) else 0


def _names_of(program: Program, buffer: str) -> List[str]:
    """Every name the wrapper gives the tensor `buffer` is (reuse aliases both ways)."""
    root = program.root(buffer)
    return sorted({buffer, root} | {a for a in program.aliases if program.root(a) == root})


def written_before(program: Program, launch: Launch, buffer: str) -> bool:
    """Whether a launch or an extern call before `launch` wrote the tensor `buffer` is (a graph
    input counts as written)."""
    root = program.root(buffer)
    if root in program.inputs:
        return True
    for st in program.steps:
        if st is launch:
            return False
        if isinstance(st, Launch) and any(program.root(b.value.name) == root for b in st.outputs()):
            return True
        if isinstance(st, Extern) and any(program.root(n) == root for n in st.out + ([st.result] if st.result else [])):
            return True
        if isinstance(st, Write) and program.root(st.name) == root:
            return True
    return False


def bind(program: Program, launch: Launch, recompose: bool = True) -> Region:
    """The kernel's region: its inputs and outputs bound to its fragment, the nodes needed; with
    `recompose`, softmax, layer_norm and gelu written back as one op where Inductor's
    decomposition of them is there whole."""
    k: Kernel = program.kernels[launch.kernel]
    name = launch.kernel
    pv = k.provenance
    if k.kind != "triton":
        raise RegionError(f"{name} is a {k.kind} kernel: only Triton kernels are replaced")
    if pv is None or pv.fragment is None:
        raise RegionError(f"{name} has no Graph fragment in the output code (Inductor's comments are off?)")
    if not pv.sorted:
        raise RegionError(f"{name}'s nodes come from several graphs (Unsorted Source Nodes): no one fragment")
    # A copy: the region rewrites nodes (a convolution whose bias the kernel adds, recomposed ops), and
    # the program's own fragment must bind the same way each time it is asked.
    frag = copy.deepcopy(pv.fragment)
    for b in launch.args:
        if b.role == "size" and not isinstance(b.value.literal, int):
            raise RegionError(f"{name}: {b.param} is {b.value.text}, a symbolic size (dynamic shapes are not replaced)")
        if b.role in ("workspace", "scalar"):
            raise RegionError(f"{name}: parameter {b.param} ({b.role}) has no ABI counterpart")
    tensors = [b for b in launch.args if b.role in ("in", "out", "inout")]
    for b in tensors:
        if b.spec is None:
            raise RegionError(f"{name}: the shape of {b.param} ({b.value.text}) is not in the output code")
        if not b.spec.static:
            raise RegionError(f"{name}: {b.param} ({b.value.text}) has symbolic sizes {b.spec.text()}")
        if not b.spec.contiguous():
            raise RegionError(f"{name}: {b.param} ({b.value.text}) is {b.spec.text()}, not contiguous: ksol's kernels read "
                              "and write contiguous tensors")
    defined = {n.name: n for n in frag.calls()}
    placeholders = [n for n in frag.placeholders() if n.name not in defined]
    referenced = {r for n in frag.calls() for r in _refs(n.args) + _refs(n.kwargs)}
    notes: List[str] = []

    # Inputs: a placeholder named as the buffer (or one of its aliases), else the one unbound
    # placeholder of the input's shape that a node reads. An in-place buffer nothing wrote before
    # the launch holds no value yet: Inductor made it in place to store into, so it is no input.
    ins = [b for b in tensors if b.role == "in" or b.role == "inout" and written_before(program, launch, b.value.name)]
    bound: Dict[str, Port] = {}
    taken = set()
    for b in ins:
        names = set(_names_of(program, b.value.name))
        hit = [p for p in placeholders if p.name in names and p.name not in taken]
        if len(hit) == 1:
            bound[b.param] = Port(b.param, b.value.name, hit[0].name, b.spec)
            taken.add(hit[0].name)
    for b in ins:
        if b.param in bound:
            continue
        cands = [p for p in placeholders if p.name not in taken and p.name in referenced and p.spec is not None
                 and tuple(p.spec.shape) == tuple(b.spec.shape)]
        if len(cands) != 1:
            which = ", ".join("%" + p.name for p in cands) or "none"
            raise RegionError(f"{name}: no one fragment value is its input {b.param} ({b.value.text}, {b.spec.text()}); "
                              f"placeholders of that shape: {which}")
        bound[b.param] = Port(b.param, b.value.name, cands[0].name, b.spec)
        taken.add(cands[0].name)
        notes.append(f"{b.param} ({b.value.text}) taken as %{cands[0].name}, the one placeholder of its shape")

    # The elements of a tuple-valued node (var_mean) are read by the names fx gave them, getitem,
    # getitem_1, ...: numbered in the order they were made, element 0 first.
    tuples = [n for n in frag.calls() if n.spec is None]
    items: Dict[str, Tuple[str, int]] = {}
    gi = sorted({r for r in referenced | set(frag.returns) if re.fullmatch(r"getitem(_\d+)?", r) and r not in defined},
                key=_suffix)
    if gi and len(tuples) == 1:
        for i, g in enumerate(gi):
            items[g] = (tuples[0].name, i)
        notes.append(f"{', '.join('%' + g for g in gi)} taken as the elements of %{tuples[0].name} in fx's order")

    # Outputs: out_ptrN stores the fragment's N-th write (Inductor numbers outputs as it registers
    # them, and lists the writes in that order); an in-place buffer, the one remaining written node
    # of its shape.
    outs = [b for b in tensors if b.role in ("out", "inout")]
    writes = frag.returns
    produced: Dict[str, Port] = {}
    used_nodes = set()

    def value_node(n: str) -> bool:
        return n in defined and defined[n].spec is not None

    for b in outs:
        m = re.fullmatch(r"out_ptr(\d+)", b.param)
        if not m:
            continue
        i = int(m.group(1))
        w = writes[i] if i < len(writes) else ""
        if not value_node(w):
            what = f"%{w}" if w else "nothing"
            raise RegionError(f"{name}: {b.param} ({b.value.text}) stores the fragment's write {i}, {what}, which no ATen "
                              "node of the fragment computes (a partial result of a split reduction, or a layout copy)")
        if defined[w].spec.numel() != b.spec.numel():
            raise RegionError(f"{name}: {b.param} ({b.spec.text()}) stores %{w} ({defined[w].spec.text()}): not the same size")
        produced[b.param] = Port(b.param, b.value.name, w, b.spec)
        used_nodes.add(w)
    for b in outs:
        if b.param in produced:
            continue
        cands = [w for w in writes if value_node(w) and w not in used_nodes and defined[w].spec.numel() == b.spec.numel()]
        if len(cands) != 1:
            raise RegionError(f"{name}: no one written fragment node is its in-place output {b.param} ({b.value.text}, "
                              f"{b.spec.text()}); candidates: {', '.join('%' + c for c in cands) or 'none'}")
        produced[b.param] = Port(b.param, b.value.name, cands[0], b.spec)
        used_nodes.add(cands[0])
        if len([w for w in writes if value_node(w)]) > 1:
            notes.append(f"{b.param} ({b.value.text}) taken as %{cands[0]}, the one remaining write of its size")

    _convolution_epilogues(program, frag, defined, bound, items, notes, name)

    # The nodes the outputs need, and the inputs they read.
    inputs_by_node = {p.node: p for p in bound.values()}
    need, order = set(), []

    def visit(n: str, reader: str):
        if n in need or n in inputs_by_node:
            return
        if n in items:
            need.add(n)
            visit(items[n][0], n)
            return
        if n not in defined:
            raise RegionError(f"{name}: %{reader} reads %{n}, which is neither one of the kernel's inputs nor computed in "
                              "its fragment")
        need.add(n)
        for r in _refs(defined[n].args) + _refs(defined[n].kwargs):
            visit(r, n)

    for p in produced.values():
        visit(p.node, p.param)
    read = set()
    for n in need:
        if n in defined:
            read |= set(_refs(defined[n].args) + _refs(defined[n].kwargs))
    read |= {p.node for p in produced.values()}
    for p in bound.values():
        if p.node not in read:
            raise RegionError(f"{name}: its input {p.param} ({p.buffer}, %{p.node}) is not read by the fragment's computation of "
                              "its outputs: the fragment describes another computation than the kernel's")
    order = [n for n in frag.calls() if n.name in need]
    in_order = [bound[b.param] for b in ins]
    out_order = [produced[b.param] for b in outs]
    region = Region(name, in_order, out_order, order, {g: items[g] for g in items if g in need}, [], 1, [], notes)
    region.accumulation = _accumulation(region)
    region.body = _emit(region, recompose)
    return region


def _convolution_epilogues(program: Program, frag, defined, bound: Dict[str, Port], items, notes: List[str], name: str) -> None:
    """Inductor calls a convolution without its bias (extern_kernels.convolution(..., bias=None))
    and adds the bias in the kernel after it, whose fragment then holds the whole convolution node,
    reading the convolution's input and weights, which the kernel does not. Such a node becomes the
    kernel's input (the extern call's output) plus the bias, viewed [C, 1, ...] to broadcast over
    the channels; the bias input's port takes that view (the same memory)."""
    by_node = {p.node: p for p in bound.values()}
    known = set(defined) | set(by_node) | set(items)
    read = {r for n in frag.calls() for r in _refs(n.args) + _refs(n.kwargs)}
    for n in list(defined.values()):
        if not n.target.startswith("aten.convolution") or n.spec is None or len(n.args) < 3:
            continue
        if all(r in known for r in _refs(n.args[:2])):
            continue  # the kernel has what it needs to compute the convolution (it does not, but the fragment says so)
        outs = [p for p in bound.values() if p.node not in read and tuple(p.spec.shape) == tuple(n.spec.shape)]
        outs = [p for p in outs if any(isinstance(st, Extern) and st.op.startswith("convolution") and
                                       program.root(st.result or "") == program.root(p.buffer) and
                                       st.kwargs.get("bias") is not None and st.kwargs["bias"].literal is None
                                       and not st.kwargs["bias"].is_name for st in program.steps)]
        if len(outs) != 1:
            continue
        out, bias = outs[0], n.args[2]
        if bias is None:
            n.target, n.args, n.kwargs = "ksol.identity", (Ref(out.node),), {}
            notes.append(f"%{n.name}: the convolution {out.buffer} holds")
        elif isinstance(bias, Ref) and bias.name in by_node:
            b = by_node[bias.name]
            view = (int(b.spec.shape[0]),) + (1,) * (len(n.spec.shape) - 2)
            if len(b.spec.shape) != 1 or len(n.spec.shape) < 3 or int(n.spec.shape[1]) != view[0]:
                continue
            b.spec = TensorSpec(view, (1,) * len(view), b.spec.dtype, b.spec.device)
            n.target, n.args, n.kwargs = "ksol.bias_add", (Ref(out.node), bias), {}
            notes.append(f"%{n.name}: the convolution {out.buffer} holds ({name} adds its bias), plus the bias viewed "
                         f"{list(view)}")


def _accumulation(r: Region) -> int:
    """The longest sum into one output value: the product of the reduced extents of the largest
    reduction in the region (1 for a pointwise kernel)."""
    longest = 1
    specs = {p.node: p.spec for p in r.inputs}
    specs.update({n.name: n.spec for n in r.nodes if n.spec is not None})
    for n in r.nodes:
        op = n.target.split(".")[1] if n.target.startswith("aten.") else n.target
        if op in ("avg_pool1d", "avg_pool2d", "avg_pool3d") and len(n.args) > 1:
            longest = max(longest, math.prod(int(k) for k in n.args[1]))
            continue
        if op in ("sum", "mean", "amax", "amin", "var_mean", "var", "prod", "_softmax", "_log_softmax", "logsumexp"):
            src = n.args[0] if n.args else None
            s = specs.get(src.name) if isinstance(src, Ref) else None
            if s is None:
                continue
            dims = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim", None)
            if dims is None or op == "sum" and n.target.endswith(".default"):
                dims = list(range(len(s.shape)))
            dims = [dims] if isinstance(dims, int) else list(dims)
            longest = max(longest, math.prod(int(s.shape[d]) for d in dims) if s.shape else 1)
    return longest


# --- recomposition ------------------------------------------------------------------------------------
def _op(n: Optional[FragmentNode]) -> str:
    """aten.add.Tensor -> add."""
    if n is None:
        return ""
    parts = n.target.split(".")
    return parts[1] if parts[0] in ("aten", "prims") and len(parts) > 1 else n.target


def _recompose(r: Region) -> Dict[str, str]:
    """Nodes that are softmax or layer_norm written out by Inductor's decompositions: node name ->
    the PyTorch call computing it whole. The nodes inside them are dropped where nothing else
    reads them."""
    by = {n.name: n for n in r.nodes}
    out = {}

    def arg(n, i):
        v = n.args[i] if len(n.args) > i else None
        return v.name if isinstance(v, Ref) else None

    def node(name):
        return by.get(name) if name else None

    for n in r.nodes:
        whole = (_softmax_at(n, node, arg) or _layer_norm_at(n, node, arg, r) or _gelu_at(n, node, arg)
                 or _leaky_relu_at(n, node, arg))
        if whole:
            out[n.name] = whole
    return out


def _softmax_at(n, node, arg) -> str:
    """torch.softmax(x, dim=d) where `n` is div(exp(sub(x, amax(x, [d], True))), sum(exp(...), [d],
    True)), softmax's decomposition; "" where it is not."""
    if _op(n) != "div":
        return ""
    e, s = node(arg(n, 0)), node(arg(n, 1))
    if _op(e) != "exp" or _op(s) != "sum" or arg(s, 0) != e.name:
        return ""
    sub = node(arg(e, 0))
    if _op(sub) != "sub":
        return ""
    mx, x = node(arg(sub, 1)), arg(sub, 0)
    if _op(mx) != "amax" or arg(mx, 0) != x or len(mx.args) < 3 or len(s.args) < 3:
        return ""
    if list(mx.args[1]) != list(s.args[1]) or len(mx.args[1]) != 1 or mx.args[2] is not True or s.args[2] is not True:
        return ""
    return f"torch.softmax({x}, dim={mx.args[1][0]})"


def _gelu_at(n, node, arg) -> str:
    """F.gelu(x) where `n` is mul(mul(x, 0.5), add(erf(mul(x, 0.7071067811865476)), 1)), gelu's
    decomposition (either factor first); "" where it is not."""
    if _op(n) != "mul" or len(n.args) != 2:
        return ""
    for half, plus in ((node(arg(n, 0)), node(arg(n, 1))), (node(arg(n, 1)), node(arg(n, 0)))):
        if _op(half) != "mul" or _op(plus) != "add" or half.args[1] != 0.5 or plus.args[1] not in (1, 1.0):
            continue
        erf = node(arg(plus, 0))
        scaled = node(arg(erf, 0)) if _op(erf) == "erf" else None
        x = arg(half, 0)
        if _op(scaled) == "mul" and arg(scaled, 0) == x and abs(float(scaled.args[1]) - 0.7071067811865476) < 1e-15:
            return f"F.gelu({x})"
    return ""


def _leaky_relu_at(n, node, arg) -> str:
    """F.leaky_relu(x, s) where `n` is where(gt(x, 0), x, mul(x, s)), leaky_relu's decomposition;
    "" where it is not."""
    if _op(n) != "where" or len(n.args) != 3:
        return ""
    gt, x, neg = node(arg(n, 0)), arg(n, 1), node(arg(n, 2))
    if _op(gt) != "gt" or arg(gt, 0) != x or gt.args[1] not in (0, 0.0) or _op(neg) != "mul" or arg(neg, 0) != x:
        return ""
    slope = neg.args[1]
    return f"F.leaky_relu({x}, {slope!r})" if isinstance(slope, (int, float)) else ""


def _layer_norm_at(n, node, arg, r: Region) -> str:
    """F.layer_norm(...) where `n` is layer_norm's decomposition ending there:
    [add(] [mul(] mul(sub(x, mean), rsqrt(add(var, eps))) [, w)] [, b)], var and mean the elements
    of var_mean(x, trailing dims, correction=0, keepdim=True); w and b inputs of the normalized
    shape. "" where it is not."""
    w = b = None
    cur = n
    if _op(cur) == "add" and _op(node(arg(cur, 0))) == "mul":
        b, cur = arg(cur, 1), node(arg(cur, 0))
    if _op(cur) == "mul" and _op(node(arg(cur, 0))) == "mul":
        w, cur = arg(cur, 1), node(arg(cur, 0))
    if _op(cur) != "mul":
        return ""
    sub, rs = node(arg(cur, 0)), node(arg(cur, 1))
    if _op(sub) != "sub" or _op(rs) != "rsqrt":
        return ""
    eps_add = node(arg(rs, 0))
    if _op(eps_add) != "add" or len(eps_add.args) < 2 or not isinstance(eps_add.args[1], float):
        return ""
    var, mean, x = arg(eps_add, 0), arg(sub, 1), arg(sub, 0)
    if var not in r.items or mean not in r.items or r.items[var][1] != 0 or r.items[mean][1] != 1:
        return ""
    vm = node(r.items[var][0])
    if _op(vm) != "var_mean" or arg(vm, 0) != x or r.items[mean][0] != vm.name:
        return ""
    if vm.kwargs.get("correction", 1) != 0 or not vm.kwargs.get("keepdim", False) or len(vm.args) < 2:
        return ""
    src = next((p.spec for p in r.inputs if p.node == x), None) or (node(x).spec if node(x) else None)
    if src is None:
        return ""
    rank = len(src.shape)
    dims = sorted(d % rank for d in vm.args[1])
    if dims != list(range(rank - len(dims), rank)):
        return ""
    shape = [int(src.shape[d]) for d in dims]
    ins = {p.node: p for p in r.inputs}
    for v in (w, b):
        if v is not None and (v not in ins or list(ins[v].spec.shape) != shape):
            return ""
    return f"F.layer_norm({x}, {shape}, {w or 'None'}, {b or 'None'}, {eps_add.args[1]!r})"


# --- writing PyTorch ----------------------------------------------------------------------------------
_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_TORCH_UNARY = ("relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs", "erf", "reciprocal", "sin", "cos", "sign",
                "log1p", "expm1", "neg", "exp2", "floor", "ceil", "round", "trunc")
_F_UNARY = ("silu", "mish", "hardswish", "hardsigmoid", "softplus", "elu", "leaky_relu", "hardtanh", "gelu", "relu6", "selu",
            "celu", "logsigmoid")


def _py(v) -> str:
    if isinstance(v, Ref):
        return v.name
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_py(e) for e in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else f"float('{v}')"
    if isinstance(v, str) and v.startswith("torch."):
        return v
    return repr(v)


def _expr(n: FragmentNode) -> str:
    """The node as PyTorch: the arithmetic and functions ksol's lowering reads where it can, the ATen
    op itself otherwise (run by PyTorch as Inductor's decomposition ran it)."""
    op, a, kw = _op(n), n.args, dict(n.kwargs)
    if n.target == "ksol.bias_add":
        return f"({_py(a[0])} + {_py(a[1])})"
    if n.target == "ksol.identity":
        return _py(a[0])
    if op in _BINARY and len(a) == 2:
        alpha = kw.pop("alpha", 1)
        if op == "div" and kw.get("rounding_mode"):
            return _aten(n)
        rhs = _py(a[1]) if alpha in (1, 1.0) else f"{_py(alpha)} * {_py(a[1])}"
        return f"({_py(a[0])} {_BINARY[op]} {rhs})"
    if op == "rsub" and len(a) == 2 and kw.get("alpha", 1) == 1:
        return f"({_py(a[1])} - {_py(a[0])})"
    if op in _COMPARE and len(a) == 2:
        return f"({_py(a[0])} {_COMPARE[op]} {_py(a[1])})"
    if op in _TORCH_UNARY and len(a) == 1 and not kw:
        return f"torch.{op}({_py(a[0])})"
    if op in ("clamp_min", "clamp_max") and len(a) == 2:
        return f"torch.{op}({_py(a[0])}, {_py(a[1])})"
    if op == "clamp" and len(a) >= 1:
        lo = a[1] if len(a) > 1 else kw.get("min")
        hi = a[2] if len(a) > 2 else kw.get("max")
        return f"torch.clamp({_py(a[0])}, {_py(lo)}, {_py(hi)})"
    if op in ("maximum", "minimum") and len(a) == 2:
        return f"torch.{op}({_py(a[0])}, {_py(a[1])})"
    if op == "pow" and len(a) == 2:
        return f"torch.pow({_py(a[0])}, {_py(a[1])})"
    if op == "where" and len(a) == 3:
        return f"torch.where({_py(a[0])}, {_py(a[1])}, {_py(a[2])})"
    if op in _F_UNARY and len(a) >= 1:
        extra = ", ".join([_py(e) for e in a[1:]] + [f"{k}={_py(v)}" for k, v in kw.items()])
        return f"F.{op}({_py(a[0])}{', ' + extra if extra else ''})"
    if op in ("amax", "amin", "sum", "mean", "prod") and n.target.split(".")[-1] in ("default", "dim_IntList", "dim") and a:
        if len(a) == 1 and not kw.get("dim"):
            return f"torch.{op}({_py(a[0])})"
        dims = a[1] if len(a) > 1 else kw.get("dim")
        keep = a[2] if len(a) > 2 else kw.get("keepdim", False)
        if kw.get("dtype") is not None:
            return _aten(n)
        return f"torch.{op}({_py(a[0])}, dim={_py(dims)}, keepdim={_py(bool(keep))})"
    if op in ("max", "min") and n.target.endswith(".dim") and len(a) >= 2:
        keep = a[2] if len(a) > 2 else kw.get("keepdim", False)
        return f"torch.{op}({_py(a[0])}, dim={_py(a[1])}, keepdim={_py(bool(keep))})"
    if op in ("cumsum", "cumprod") and len(a) == 2 and not kw:
        return f"torch.{op}({_py(a[0])}, {_py(a[1])})"
    if op in ("avg_pool1d", "avg_pool2d", "avg_pool3d") and len(a) >= 2:
        names = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")
        args = dict(zip(names, a[1:]), **kw)
        if args.get("stride") == []:
            args["stride"] = None
        return f"F.{op}({_py(a[0])}, " + ", ".join(f"{k}={_py(v)}" for k, v in args.items()) + ")"
    if op in ("max_pool2d_with_indices", "max_pool3d_with_indices") and len(a) >= 2:
        names = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")
        args = dict(zip(names, a[1:]), **kw)
        if args.get("stride") == []:
            args["stride"] = None
        return f"F.{op[:len('max_poolNd')]}({_py(a[0])}, " + ", ".join(f"{k}={_py(v)}" for k, v in args.items()) + ", return_indices=True)"
    if op in ("_softmax", "_log_softmax") and len(a) >= 2:
        return f"torch.{op[1:]}({_py(a[0])}, dim={_py(a[1])})"
    if op in ("view", "reshape", "_unsafe_view") and len(a) == 2:
        return f"{_py(a[0])}.reshape({_py(a[1])})"
    if op == "permute" and len(a) == 2:
        return f"{_py(a[0])}.permute({_py(a[1])})"
    if op in ("unsqueeze", "squeeze") and len(a) == 2:
        return f"{_py(a[0])}.{op}({_py(a[1])})"
    if op == "expand" and len(a) == 2:
        return f"{_py(a[0])}.expand({_py(a[1])})"
    if op == "convert_element_type" and len(a) == 2:
        return f"{_py(a[0])}.to({_py(a[1])})"
    return _aten(n)


def _aten(n: FragmentNode) -> str:
    args = [_py(e) for e in n.args] + [f"{k}={_py(v)}" for k, v in n.kwargs.items()]
    return f"torch.ops.{n.target}({', '.join(args)})"


def _emit(r: Region, recompose: bool = True) -> List[str]:
    whole = _recompose(r) if recompose else {}
    # The nodes a recomposed op stands for are dropped unless an output or another kept node reads them.
    keep = set()
    out_nodes = {p.node for p in r.outputs}

    def mark(name):
        if name in keep:
            return
        keep.add(name)
        n = next((m for m in r.nodes if m.name == name), None)
        if n is None:
            if name in r.items:
                mark(r.items[name][0])
            return
        if name in whole:
            for ref in re.findall(r"[A-Za-z_]\w*", whole[name]):
                if any(m.name == ref for m in r.nodes) or ref in r.items:
                    mark(ref)
            return
        for ref in _refs(n.args) + _refs(n.kwargs):
            mark(ref)

    for o in out_nodes:
        mark(o)
    lines = []
    for n in r.nodes:
        if n.name not in keep:
            continue
        if n.name in whole:
            r.recomposed.append(whole[n.name].split("(", 1)[0].split(".")[-1])
        lines.append(f"{n.name} = {whole.get(n.name) or _expr(n)}")
        for g, (t, i) in sorted(r.items.items(), key=lambda kv: kv[1][1]):
            if t == n.name and g in keep:
                lines.append(f"{g} = {n.name}[{i}]")
    rets = []
    for p in r.outputs:
        node = next((m for m in r.nodes if m.name == p.node), None)
        v = p.node
        if node is not None and node.spec is not None and tuple(node.spec.shape) != tuple(p.spec.shape):
            v = f"{p.node}.reshape({list(p.spec.shape)})"
        rets.append(v)
    lines.append("return " + (rets[0] if len(rets) == 1 else "(" + ", ".join(rets) + ")"))
    # The forward's arguments are the kernel's parameters; the fragment's names become locals.
    ren = [f"{p.node} = {p.param}" for p in r.inputs if p.node != p.param]
    return ren + lines


# --- the problem file ---------------------------------------------------------------------------------
_TEMPLATE = '''"""{kernel}, a kernel of Inductor's code for {origin}, as a KernelBench-format problem
(Model, get_inputs, get_init_inputs), written by ksol (python/ksol/inductor_region.py) from the
kernel's Graph fragment. Its forward takes the tensors the kernel reads, in its parameters' order
({ins}), and returns those it writes ({outs}).
{notes}"""
import torch
import torch.nn.functional as F

# How get_inputs draws each input: the kernel's shapes, and the value ranges it was launched with
# where they were captured.
INPUTS = {inputs}


class Model(torch.nn.Module):
    def forward(self, {args}):
{body}


def draw(spec):
    shape, dtype, how = spec["shape"], getattr(torch, spec["dtype"]), spec.get("draw", "normal")
    if how == "uniform":
        return torch.rand(shape, dtype=dtype) * (spec["high"] - spec["low"]) + spec["low"]
    if how == "integers":
        return torch.randint(spec["low"], spec["high"] + 1, shape, dtype=dtype)
    if how == "bernoulli":
        return torch.rand(shape) < spec["p"]
    return torch.randn(shape, dtype=dtype) * spec.get("std", 1.0) + spec.get("mean", 0.0)


def get_inputs():
    return [draw(spec) for spec in INPUTS]


def get_init_inputs():
    return []
'''


def input_specs(region: Region, stats: Optional[List[dict]] = None) -> List[dict]:
    """How get_inputs draws each input: `stats[i]` (ksol.serialize.input_spec of the captured
    tensor) where given, else a standard normal of the input's shape and dtype."""
    out = []
    for i, p in enumerate(region.inputs):
        s = dict(stats[i]) if stats and i < len(stats) and stats[i] else {"draw": "normal", "mean": 0.0, "std": 1.0}
        s.pop("kind", None)
        s["shape"] = [int(e) for e in p.spec.shape]
        s["dtype"] = p.spec.dtype or "float32"
        out.append(s)
    return out


def problem_source(region: Region, origin: str, stats: Optional[List[dict]] = None) -> str:
    """The KernelBench-format file of the region (`origin` says whose output code it came from)."""
    notes = "".join(f"\n{n}." for n in region.notes)
    if notes:
        notes = "\nChosen by shape (checked against the kernel's own outputs when it was captured):" + notes + "\n"
    if region.recomposed:
        notes += f"\nWritten back as one op: {', '.join(region.recomposed)} (Inductor's decomposition, recomposed).\n"
    body = "\n".join("        " + line for line in region.body)
    return _TEMPLATE.format(kernel=region.kernel, origin=origin, ins=", ".join(f"{p.param} = {p.buffer}" for p in region.inputs),
                            outs=", ".join(f"{p.param} = {p.buffer}" for p in region.outputs), notes=notes,
                            inputs=repr(input_specs(region, stats)), args=", ".join(p.param for p in region.inputs), body=body)


def describe(region: Region) -> str:
    """The region as text (the tests' golden form)."""
    out = [f"region {region.kernel}"]
    out += [f"  in {p.param} = {p.buffer} %{p.node} {p.spec.text()}" for p in region.inputs]
    out += [f"  out {p.param} = {p.buffer} %{p.node} {p.spec.text()}" for p in region.outputs]
    if region.recomposed:
        out.append("  recomposed " + ", ".join(region.recomposed))
    out.append(f"  accumulation {region.accumulation}")
    out += ["  | " + line for line in region.body]
    return "\n".join(out) + "\n"
