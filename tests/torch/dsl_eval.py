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
        inside = ty[ty.index("[") + 1:ty.index("]")].strip()
        out[name.strip()] = [d.strip() for d in inside.split(",")] if inside else []  # f32[]: one value
    return out


def _extent(dims, d):
    return int(d) if d.isdigit() else dims[d]


def as_declared(text, dims, tensors):
    """`tensors` (name -> tensor as the module lays it out) reshaped to the program's views."""
    decl = declared(text)
    return {name: x.reshape([_extent(dims, d) for d in decl[name]]) for name, x in tensors.items()}


_TERM = re.compile(r"([+-]?)([a-z_][a-z0-9_]*)(?:\*(\d+))?")


def _subscript(e):
    """A subscript as ([(index, coefficient)], offset, divisor): `h*2+r-1` is ([("h", 2), ("r", 1)], -1, 1),
    `(h-r+1)/2` is ([("h", 1), ("r", -1)], 1, 2)."""
    e = e.replace(" ", "")
    div = 1
    m = re.fullmatch(r"\((.*)\)/(\d+)", e)
    if m:
        e, div = m.group(1), int(m.group(2))
    m = re.fullmatch(r"(.*?)([+-]\d+)?", e)
    body, off = m.group(1), int(m.group(2) or 0)
    return [(t.group(2), (-1 if t.group(1) == "-" else 1) * int(t.group(3) or 1)) for t in _TERM.finditer(body)], off, div


def outside(text):
    """The value each `outside` parameter reads past its extents: name -> 0.0 or -inf."""
    head = re.search(r"kernel\s+\w+\((.*?)\)\s*->", text, re.S)
    out = {}
    for part in re.split(r",\s*(?![^\[]*\])", head.group(1)):
        m = re.search(r"outside\s+(-inf|0)", part)
        if m:
            out[part.split(":", 1)[0].strip()] = float("-inf") if m.group(1) == "-inf" else 0.0
    return out


def tf32(x):
    """x (float64 holding float32 values) rounded to TF32: 11 significant bits, to nearest, ties
    away from zero (cvt.rna), as the DSL's tf32()."""
    x = torch.as_tensor(x, dtype=torch.float64)
    m, e = torch.frexp(x)  # x = m * 2^e, 0.5 <= |m| < 1
    return torch.sign(m) * torch.floor(m.abs() * 2048 + 0.5) / 2048 * torch.pow(2.0, e.double())


def run(text, inputs, dims=None):
    """Evaluates the program on `inputs` (name -> tensor, in float64); returns its outputs by name.
    A read whose subscript sums indices with coefficients (a conv's image, `X[n, c, h*2+r-1, ...]`)
    reads 0 outside the tensor (`outside 0`) and needs the extents of those indices: from plain
    reads of the inputs, or from the output's declared dims in `dims` (name -> extent)."""
    head = re.search(r"kernel\s+\w+\((.*?)\)\s*->\s*\((.*?)\)\s*\{", text, re.S)
    body = text[head.end():text.index("}\nschedule")]
    stmts = [s.strip() for s in body.splitlines() if s.strip() and not s.strip().startswith("#")]
    outs = [p.split(":")[0].strip() for p in re.split(r",\s*(?![^\[]*\])", head.group(2))]
    order = []  # every index name, in order of first appearance: the axes of the global space
    written = {}  # reduced indices with their extent written after them (over r:3)
    for s in stmts:
        lhs = _READ.match(s)
        for i in [x.strip() for x in lhs.group(2).split(",")]:
            if i not in order:
                order.append(i)
        m = re.search(r"\bover\s+([\w\s,:]+?)\s*$", s)
        for ax in ([a.strip() for a in m.group(1).split(",")] if m else []):
            ax, _, ext = ax.partition(":")
            if ax not in order:
                order.append(ax)
            if ext:
                written[ax] = int(ext)
    values = {}
    # Index extents, where a compound subscript needs them: plain reads of inputs, and the
    # outputs' left-hand indices at their declared dims.
    extents = dict(written)
    fills = outside(text)
    for s in stmts:
        for m in _READ.finditer(s):
            idx = [x.strip() for x in m.group(2).split(",")]
            if m.group(1) in inputs:
                for p, i in enumerate(idx):
                    if re.fullmatch(r"[a-z_][a-z0-9_]*", i) and p < inputs[m.group(1)].dim():
                        extents.setdefault(i, inputs[m.group(1)].shape[p])
    if dims is not None:
        decl = declared(text)
        for o in outs:
            lhs = _READ.match(next(s for s in stmts if s.startswith(o + "[")))
            for i, d in zip([x.strip() for x in lhs.group(2).split(",")], decl[o]):
                extents.setdefault(i, _extent(dims, d))

    def compound(name, idx):
        t = inputs[name].double()
        rank = len(order)
        picks, valid = [], torch.ones([1] * rank, dtype=torch.bool)
        for p, e in enumerate(idx):
            terms, off, div = _subscript(e)
            lin = torch.full([1] * rank, off, dtype=torch.long)
            for i, coef in terms:
                n = t.shape[p] if len(terms) == 1 and off == 0 and div == 1 else extents[i]
                shape = [1] * rank
                shape[order.index(i)] = n
                lin = lin + coef * torch.arange(n).reshape(shape)
            if div != 1:
                valid = valid & (lin >= 0) & (lin % div == 0)
                lin = torch.div(lin, div, rounding_mode="floor")
            valid = valid & (lin >= 0) & (lin < t.shape[p])
            picks.append(lin.clamp(0, t.shape[p] - 1))
        return torch.where(valid, t[tuple(picks)], torch.full((), fills.get(name, 0.0), dtype=torch.float64))

    def read(name, idx):
        if name in values:
            return values[name]
        if not idx.strip():  # s[]: one value, the same at every index
            return inputs[name].double().reshape([1] * len(order))
        idx = [x.strip() for x in idx.split(",")]
        if any(not re.fullmatch(r"[a-z_][a-z0-9_]*", i) for i in idx):
            return compound(name, idx)
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
        "_r": read, "math": math, "i64": lambda x: x, "f32": lambda x: x, "f64": lambda x: x, "tf32": tf32,
    }

    def position(i):
        """An index used as a value (a tril mask's `n <= m`): its positions along its axis."""
        shape = [1] * len(order)
        shape[order.index(i)] = extents[i]
        return torch.arange(extents[i], dtype=torch.float64).reshape(shape)

    def ev(expr):
        py = _READ.sub(lambda m: f'_r("{m.group(1)}", "{m.group(2)}")', expr)
        names = {i: position(i) for i in order if i in extents and re.search(rf"(?<![\w.\[\"]){i}(?![\w\[\"(])", py)}
        return eval(py, {"__builtins__": {}}, {**ns, **names})  # the synthesizer's own output, in a test

    for s in stmts:
        lhs, rhs = s.split("=", 1)
        name = _READ.match(lhs.strip()).group(1)
        rhs = rhs.strip()
        red = re.fullmatch(r"(sum|max|min|mean|argmax|prodscan|scan)\((.*)\)\s+over\s+([\w\s,:]+?)", rhs)
        if red:
            ax = tuple(order.index(a.strip().partition(":")[0]) for a in red.group(3).split(","))
            v = torch.as_tensor(ev(red.group(2)), dtype=torch.float64)
            # Broadcast to every reduced axis first (a window read may not span them all).
            v = v.expand([extents.get(order[a], v.shape[a]) if a in ax and v.shape[a] == 1 else v.shape[a]
                          for a in range(v.dim())])
            op = red.group(1)
            v = {"sum": lambda: v.sum(ax, keepdim=True), "mean": lambda: v.mean(ax, keepdim=True),
                 "max": lambda: v.amax(ax, keepdim=True), "min": lambda: v.amin(ax, keepdim=True),
                 "argmax": lambda: v.argmax(ax[0], keepdim=True).double(),
                 "scan": lambda: v.cumsum(ax[0]),  # inclusive, along the one index
                 "prodscan": lambda: v.cumprod(ax[0])}[op]()
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
