"""Writing a module's whole forward as one ksol DSL program, when it is one: an elementwise chain
over same-shaped tensors, a row-wise chain over the last dim of a 2-D tensor (softmax, log_softmax,
layer_norm over the last dim, with elementwise ops before and after), or a 2-D GEMM (matmul,
nn.Linear) followed by elementwise ops. Anything else gets a reason and no program: ksol then
returns the better of eager PyTorch and torch.compile.

The program's parameters are the candidate ABI's tensor table for the module (worker.py's
AbiCandidate): the forward's tensor inputs (input0, input1, ...), then every entry of the
Model's state_dict in order, then the output (output0). Only float32 is lowered today.
"""
import math
import operator
import re
from typing import Dict, List, Optional

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp

from .trace import _canonical as _canon, kind_of


class Unsupported(Exception):
    pass


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


def synthesize(model: nn.Module, inputs: List) -> Dict:
    """The module's forward as one DSL program, or a reason. Shapes are the inputs' own."""
    out = {"program": None, "reason": "", "family": None, "tensors": [], "dims": {}}
    try:
        out.update(_synthesize(model, inputs))
    except Unsupported as e:
        out["reason"] = str(e)
    except Exception as e:  # fx cannot trace it, or shape propagation failed
        out["reason"] = f"the forward cannot be traced into one graph ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    return out


def _synthesize(model: nn.Module, inputs: List) -> Dict:
    b = _Builder(model, inputs)
    gm = b.gm
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if not tensors:
        raise Unsupported("the forward takes no tensor")
    for x in tensors:
        if x.dtype != torch.float32:
            raise Unsupported(f"an input is {x.dtype}: only float32 modules are lowered to the DSL today")
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
    bad = sorted({op for _, op in ops if kind_of(op) in ("conv", "pool", "layout", "other")} |
                 {op for _, op in ops if kind_of(op) == "rowwise" and op not in ("softmax", "log_softmax", "layer_norm")})
    if bad:
        raise Unsupported(f"no DSL form for {', '.join(bad)}: the forward is not one DSL program")
    gemm = [n for n, op in ops if op in ("matmul", "mm", "linear")]
    rowwise = [n for n, op in ops if op in ("softmax", "log_softmax", "layer_norm")]
    if gemm and rowwise:
        raise Unsupported("a GEMM followed by a row-wise op is two DSL programs")
    if len(gemm) > 1:
        raise Unsupported("more than one GEMM")
    placeholders = [n for n in nodes if n.op == "placeholder"]
    ph_names = {n.name: f"input{k}" for k, n in enumerate(placeholders)}
    params = param_names(sd)
    used_params = set()

    if gemm:
        g = gemm[0]
        if out_shape is None or len(out_shape) != 2:
            raise Unsupported("only 2-D GEMMs are lowered")
        family, idx = "gemm", "[m, n]"
        dims = {"M": out_shape[0], "N": out_shape[1]}
    elif rowwise:
        family, idx = "rowwise", "[r, c]"
        x = rowwise[0].args[0] if rowwise[0].args else None
        sh = b.shape(x) if isinstance(x, torch.fx.Node) else None
        if sh is None or len(sh) < 2 or out_shape != sh:
            raise Unsupported("row-wise ops are lowered on tensors of 2 or more dims whose output has the input's shape")
        # Rows are every index but the last, merged (the tensors are contiguous: [B, S, C] is [B*S, C]).
        dims = {"R": math.prod(sh[:-1]), "C": sh[-1]}
    else:
        family = "elementwise"
        if out_shape is None or len(out_shape) == 0:
            raise Unsupported("the output is a scalar")
        dims = {f"D{i}": d for i, d in enumerate(out_shape)}
        idx = "[" + ", ".join(f"i{i}" for i in range(len(out_shape))) + "]"
    full = list(dims.values()) if family != "gemm" else out_shape

    env: Dict[str, str] = {}   # node name -> expression at idx
    decl: Dict[str, List[str]] = {}  # DSL name -> dim names
    for n in placeholders:
        sh = b.shape(n)
        if sh is None:
            raise Unsupported(f"the forward's argument {n.name} is not a tensor: non-tensor inputs are not lowered")
        if family == "gemm":
            continue  # bound below by their use
        merged = [math.prod(sh[:-1]), sh[-1]] if family == "rowwise" and len(sh) >= 2 else sh
        if merged != full:
            raise Unsupported(f"input {ph_names[n.name]} has shape {sh}, not the output's: broadcasting is not lowered yet")
        env[n.name] = ph_names[n.name] + idx
        decl[ph_names[n.name]] = list(dims)

    # A parameter read beside the output's index: whole ([m, n], [r, c], ...), or broadcast along
    # the rows where the family allows it ([n] in a GEMM epilogue, [c] in a row-wise chain).
    along = {"gemm": ("N", "[n]"), "rowwise": ("C", "[c]")}.get(family)

    def param_read(a) -> str:
        name = param_of(a)
        sh = b.shape(a) or list(sd[a.target].shape)
        if sh == full:
            decl[name] = ["M", "N"] if family == "gemm" else list(dims)[:len(full)]
            return name + idx
        if along and sh == [dims[along[0]]]:
            decl[name] = [along[0]]
            return name + along[1]
        raise Unsupported(f"the parameter {a.target} of shape {sh} is not read at the output's index or along its rows")

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
        if users.get(n.name, 0) > 1 and family != "gemm":  # a GEMM's epilogue is one output definition
            v = b.fresh()
            b.stmts.append(f"{v}{idx} = {expr}")
            expr = v + idx
        elif not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\[[a-z0-9, ]*\]", expr):
            expr = f"({expr})"
        env[n.name] = expr

    def param_of(n) -> str:
        if n.op == "get_attr" and n.target in params:
            used_params.add(n.target)
            return params[n.target]
        raise Unsupported(f"{n.name} is not a parameter of the module")

    for n, op in ops:
        mod = gm.get_submodule(n.target) if n.op == "call_module" else None
        if family == "gemm" and n is gemm[0]:
            if op == "linear":
                if mod is not None:
                    xin, w = n.args[0], f"{n.target}.weight"
                    bias = f"{n.target}.bias" if mod.bias is not None else None
                else:
                    xin, wn = n.args[0], n.args[1]
                    bn = _arg(n, 2, "bias")
                    w = wn.target if isinstance(wn, torch.fx.Node) and wn.op == "get_attr" else None
                    bias = bn.target if isinstance(bn, torch.fx.Node) and bn.op == "get_attr" else None
                    if w is None or (bn is not None and bias is None):
                        raise Unsupported("F.linear with weights that are not the module's parameters")
                if xin.name not in ph_names:
                    raise Unsupported("the GEMM must read a forward input")
                xs = b.shape(xin)
                if xs is None or len(xs) != 2:
                    raise Unsupported("only 2-D linear inputs are lowered")
                dims["K"] = xs[1]
                decl[ph_names[xin.name]] = ["M", "K"]
                decl[params[w]] = ["N", "K"]
                used_params.add(w)
                b.stmts.append(f"acc[m, n] = sum({ph_names[xin.name]}[m, k] * {params[w]}[n, k]) over k")
                expr = "acc[m, n]"
                if bias is not None:
                    decl[params[bias]] = ["N"]
                    used_params.add(bias)
                    expr = f"acc[m, n] + {params[bias]}[n]"
                bind(n, expr)
            else:
                a0, a1 = n.args[0], n.args[1]
                if not (isinstance(a0, torch.fx.Node) and isinstance(a1, torch.fx.Node) and a0.name in ph_names and a1.name in ph_names):
                    raise Unsupported("the GEMM must multiply two forward inputs")
                s0, s1 = b.shape(a0), b.shape(a1)
                if not s0 or not s1 or len(s0) != 2 or len(s1) != 2:
                    raise Unsupported("only 2-D matmuls are lowered")
                dims["K"] = s0[1]
                decl[ph_names[a0.name]] = ["M", "K"]
                decl[ph_names[a1.name]] = ["K", "N"]
                b.stmts.append(f"acc[m, n] = sum({ph_names[a0.name]}[m, k] * {ph_names[a1.name]}[k, n]) over k")
                bind(n, "acc[m, n]")
            continue
        if op in ("softmax", "log_softmax") and family == "rowwise":
            dim = _arg(n, 1, "dim") if mod is None else mod.dim
            rank = len(b.shape(n.args[0]) or [])
            if dim not in (-1, rank - 1):
                raise Unsupported(f"{op} over dim {dim}: only the last dim is lowered")
            t = b.fresh()
            b.stmts.append(f"{t}[r, c] = {operand(n.args[0])}")
            m, e, s = b.fresh(), b.fresh(), b.fresh()
            b.stmts += [f"{m}[r] = max({t}[r, c]) over c", f"{e}[r, c] = exp({t}[r, c] - {m}[r])", f"{s}[r] = sum({e}[r, c]) over c"]
            bind(n, f"{e}[r, c] / {s}[r]" if op == "softmax" else f"{t}[r, c] - {m}[r] - log({s}[r])")
            continue
        if op == "layer_norm" and family == "rowwise":
            if mod is not None:
                shape, eps = list(mod.normalized_shape), mod.eps
                w = f"{n.target}.weight" if mod.weight is not None else None
                bias = f"{n.target}.bias" if mod.bias is not None else None
            else:
                shape, eps = list(_arg(n, 1, "normalized_shape")), _arg(n, 4, "eps", 1e-5)
                wn, bn = _arg(n, 2, "weight"), _arg(n, 3, "bias")
                w = wn.target if isinstance(wn, torch.fx.Node) and param_of(wn) else None
                bias = bn.target if isinstance(bn, torch.fx.Node) and param_of(bn) else None
            if shape != [dims["C"]]:
                raise Unsupported(f"layer_norm over {shape}: only the last dim is lowered")
            t, mu, d, var = b.fresh(), b.fresh(), b.fresh(), b.fresh()
            b.stmts += [f"{t}[r, c] = {operand(n.args[0])}", f"{mu}[r] = mean({t}[r, c]) over c", f"{d}[r, c] = {t}[r, c] - {mu}[r]",
                        f"{var}[r] = mean({d}[r, c] * {d}[r, c]) over c"]
            expr = f"{d}[r, c] * rsqrt({var}[r] + {_num(eps)})"
            if w is not None:
                decl[params[w]] = ["C"]
                used_params.add(w)
                expr = f"{expr} * {params[w]}[c]"
            if bias is not None:
                decl[params[bias]] = ["C"]
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
            for v in (x, y):
                if isinstance(v, torch.fx.Node) and v.op != "get_attr" and b.shape(v) not in (b.shape(n), None):
                    raise Unsupported(f"{op} broadcasts {b.shape(v)} to {b.shape(n)}: not lowered yet")
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
    b.stmts.append(f"output0{idx} = {operand(ret)}")
    for n in placeholders:
        if ph_names[n.name] not in decl:
            raise Unsupported(f"input {ph_names[n.name]} is not read by the lowered program")

    # The tensor table, in the ABI's order, and the program's header in the same order.
    table = []
    for n in placeholders:
        table.append({"name": ph_names[n.name], "role": "in", "shape": decl[ph_names[n.name]]})
    for k in sd:
        table.append({"name": params[k], "role": "in", "shape": decl[params[k]]})
    out_dims = ["M", "N"] if family == "gemm" else list(dims)[:len(full)] if family == "elementwise" else ["R", "C"]
    table.append({"name": "output0", "role": "out", "shape": out_dims})
    for t in table:
        t["dtype"] = "f32"
    ins = ", ".join(f"{t['name']}: f32[{', '.join(t['shape'])}]" for t in table if t["role"] == "in")
    schedule = {
        "elementwise": ["threads = 256", "vector = 1"],
        "rowwise": ["threads = 256", "vector = 1", "rows_per_block = 1", "reduction = block", "cache_row = none"],
        "gemm": ["tile = [64, 64, 16]", "stages = auto", "mainloop = simt"],
    }[family]
    text = (f"# Lowered by ksol from the module's forward ({family}); the schedule is a plain default.\n"
            f"kernel model({ins}) -> (output0: f32[{', '.join(out_dims)}]) {{\n" +
            "".join(f"  {s}\n" for s in b.stmts) + "}\nschedule {\n" + "".join(f"  {s}\n" for s in schedule) + "}\n")
    return {"program": text, "family": family, "tensors": table, "dims": dims, "dim_order": list(dims)}
