"""A float64 evaluator of the ksol DSL programs the synthesizer writes (index notation over
dense tensors, the reductions sum/max/min/mean, the DSL's functions), in PyTorch, so that the
tests can check a lowered program against the module it came from. Test support only: the real
semantics are the C++ interpreter's (src/codegen/interpret.cpp); this covers what synth.py emits."""
import math
import re

import torch
import torch.nn.functional as F

_READ = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[([^\]]*)\]")


def declared(text):
    """The dims each parameter of the program's header is declared over: name -> [dim names]. A
    tensor of the ABI table may lie in the module in another layout of the same elements (rows
    merged, a row of several dims, size-1 dims of a broadcast); the program reads this view."""
    head = re.search(r"kernel\s+\w+\((.*?)\)\s*->\s*\((.*?)\)\s*\{", text, re.S)
    out = {}
    for part in re.split(r",\s*(?![^\[]*\])", head.group(1)) + re.split(r",\s*(?![^\[]*\])", head.group(2)):
        name, ty = part.split(":", 1)
        out[name.strip()] = [d.strip() for d in ty[ty.index("[") + 1:ty.index("]")].split(",")]
    return out


def as_declared(text, dims, tensors):
    """`tensors` (name -> tensor as the module lays it out) reshaped to the program's views."""
    decl = declared(text)
    return {name: x.reshape([dims[d] for d in decl[name]]) for name, x in tensors.items()}


def run(text, inputs):
    """Evaluates the program on `inputs` (name -> tensor, in float64); returns its outputs by name."""
    head = re.search(r"kernel\s+\w+\((.*?)\)\s*->\s*\((.*?)\)\s*\{", text, re.S)
    body = text[head.end():text.index("}\nschedule")]
    stmts = [s.strip() for s in body.splitlines() if s.strip() and not s.strip().startswith("#")]
    outs = [p.split(":")[0].strip() for p in re.split(r",\s*(?![^\[]*\])", head.group(2))]
    order = []  # every index name, in order of first appearance: the axes of the global space
    for s in stmts:
        lhs = _READ.match(s)
        for i in [x.strip() for x in lhs.group(2).split(",")]:
            if i not in order:
                order.append(i)
        m = re.search(r"\bover\s+(\w+)\s*$", s)
        if m and m.group(1) not in order:
            order.append(m.group(1))
    values = {}

    def read(name, idx):
        idx = [x.strip() for x in idx.split(",")]
        if name in values:
            return values[name]
        t = inputs[name].double()
        perm = sorted(range(len(idx)), key=lambda a: order.index(idx[a]))
        t = t.permute(*perm)
        shape = [t.shape[[idx[p] for p in perm].index(ax)] if ax in idx else 1 for ax in order]
        return t.reshape(shape)

    def select(c, a, b):
        return torch.where(c, torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64))

    ns = {
        "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "tanh": torch.tanh, "abs": torch.abs,
        "sigmoid": torch.sigmoid, "relu": torch.relu, "silu": F.silu, "gelu": F.gelu,
        "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "select": select,
        "clamp": lambda x, lo, hi: torch.clamp(x, min=lo, max=hi),
        "max": lambda a, b: torch.maximum(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)),
        "min": lambda a, b: torch.minimum(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)),
        "_r": read, "math": math,
    }

    def ev(expr):
        py = _READ.sub(lambda m: f'_r("{m.group(1)}", "{m.group(2)}")', expr)
        return eval(py, {"__builtins__": {}}, ns)  # the synthesizer's own output, in a test

    for s in stmts:
        lhs, rhs = s.split("=", 1)
        name = _READ.match(lhs.strip()).group(1)
        rhs = rhs.strip()
        red = re.fullmatch(r"(sum|max|min|mean)\((.*)\)\s+over\s+(\w+)", rhs)
        if red:
            v, ax = ev(red.group(2)), order.index(red.group(3))
            op = red.group(1)
            v = {"sum": lambda: v.sum(ax, keepdim=True), "mean": lambda: v.mean(ax, keepdim=True),
                 "max": lambda: v.amax(ax, keepdim=True), "min": lambda: v.amin(ax, keepdim=True)}[op]()
        else:
            v = torch.as_tensor(ev(rhs), dtype=torch.float64)
        values[name] = v
    result = {}
    for o in outs:
        v = values[o]
        lhs_idx = [x.strip() for x in _READ.match(next(s for s in stmts if s.startswith(o + "["))).group(2).split(",")]
        for ax in reversed(range(len(order))):
            if order[ax] not in lhs_idx:
                v = v.squeeze(ax)
        result[o] = v
    return result
