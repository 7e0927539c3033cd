"""A user's nn.Module and example inputs written as a KernelBench-format problem file, which is
what `ksol optimize FILE.py` takes (docs/TORCH.md): `Model`, `get_inputs()`, `get_init_inputs()`.

The module goes beside the file as `<name>.pt`: its forward traced by torch.fx into a
GraphModule, pickled with the weights as they are now. A GraphModule pickles its forward as code
and its leaf modules as torch.nn classes, so it loads in the worker's fresh process although the
user's class lives in their script. A forward torch.fx cannot trace (control flow on tensor
values) is pickled as the module itself instead, which needs its class to be importable there;
ksol's front end then keeps it whole as PyTorch.

`get_inputs()` draws fresh inputs shaped like the example (ksol verifies on several draws, and a
problem whose inputs never change is flagged as degenerate): a float tensor from a normal
distribution with the example's mean and standard deviation, or uniformly between its least and
largest value where the example has no negative value (inputs of log or sqrt stay positive),
standard normal where the example is one value; an integer tensor uniformly between its least
and largest value (indices stay in range); a bool tensor with the example's fraction of True; a
Python number as it is (ksol writes a number that never changes as a constant).
"""
import dataclasses
import math
import os
import re
from typing import Any, Dict, List, Sequence

from .errors import UnsupportedError

_FLOAT = ("float16", "bfloat16", "float32", "float64")
_INT = ("uint8", "int8", "int16", "int32", "int64")


@dataclasses.dataclass
class ProblemFiles:
    path: str                   # the problem file (.py)
    module_file: str            # the pickled module (.pt) beside it
    inputs: List[Dict[str, Any]]  # how get_inputs draws each input
    traced: bool                # True: a torch.fx GraphModule; False: the module pickled as it is
    trace_error: str            # why torch.fx could not trace it ("" when it could)


def problem_name(model) -> str:
    """A file name from the module's class name (letters, digits and _)."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", type(model).__name__) or "Module"
    return name if not name[0].isdigit() else "M" + name


def input_spec(x, k: int) -> Dict[str, Any]:
    """How get_inputs draws input k, from the example value x (the module docstring's rules)."""
    import torch

    if isinstance(x, bool) or x is None or isinstance(x, (int, float)):
        return {"kind": "value", "value": x}
    if not isinstance(x, torch.Tensor):
        raise UnsupportedError(f"input {k} is a {type(x).__name__}: ksol.optimize takes tensors and Python numbers")
    dtype = str(x.dtype).replace("torch.", "")
    spec: Dict[str, Any] = {"kind": "tensor", "shape": list(x.shape), "dtype": dtype}
    v = x.detach()
    if dtype in _FLOAT:
        v = v if dtype == "float64" else v.float()
        finite = torch.isfinite(v)
        v = v if bool(finite.all()) else v[finite]
        lo, hi = (v.min().item(), v.max().item()) if v.numel() else (0.0, 0.0)
        if lo == hi:
            spec.update(draw="normal", mean=0.0, std=1.0)
        elif lo >= 0:
            spec.update(draw="uniform", low=_round(lo), high=_round(hi))
        else:
            spec.update(draw="normal", mean=_round(v.mean().item()), std=_round(v.std().item()))
    elif dtype in _INT:
        lo, hi = (int(v.min().item()), int(v.max().item())) if v.numel() else (0, 0)
        spec.update(draw="integers", low=lo, high=hi)
    elif dtype == "bool":
        spec.update(draw="bernoulli", p=v.float().mean().item() if v.numel() else 0.5)
    else:
        raise UnsupportedError(f"input {k} is a {dtype} tensor: ksol.optimize takes float, integer and bool tensors")
    return spec


def _round(x: float) -> float:
    """x to 6 significant digits: the file stays readable, and a draw needs no more."""
    return float(f"{x:.6g}")


def _literal(v) -> str:
    """v as Python source (the specs hold numbers, strings, lists and None)."""
    if isinstance(v, float) and not math.isfinite(v):
        return f"float({str(v)!r})"
    if isinstance(v, list):
        return "[" + ", ".join(_literal(e) for e in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {_literal(e)}" for k, e in v.items()) + "}"
    return repr(v)


_TEMPLATE = '''"""{cls} as a KernelBench-format problem (Model, get_inputs, get_init_inputs), written by
ksol.optimize (python/ksol/serialize.py) for `ksol optimize`.

Model loads the module saved beside this file, {pt}: {how}, with the weights as they were when
ksol.optimize was called. get_inputs draws fresh inputs shaped like the caller's example, as
INPUTS says (docs/PYTHON.md).
{code}"""
import os

import torch

MODULE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), {pt!r})

INPUTS = {inputs}


def load_module():
    try:
        return torch.load(MODULE_FILE, map_location="cpu", weights_only=False)
    except TypeError:  # a PyTorch older than weights_only
        return torch.load(MODULE_FILE, map_location="cpu")


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = load_module()
        # Built on shape-only tensors (ksol traces that way): the loaded weights follow.
        if torch.empty(0).is_meta:
            self.net.to("meta")

    def forward(self, {args}):
        return self.net({args})


def draw(spec):
    if spec["kind"] == "value":
        return spec["value"]
    shape, dtype, how = spec["shape"], getattr(torch, spec["dtype"]), spec["draw"]
    if how == "normal":
        return torch.randn(shape, dtype=dtype) * spec["std"] + spec["mean"]
    if how == "uniform":
        return torch.rand(shape, dtype=dtype) * (spec["high"] - spec["low"]) + spec["low"]
    if how == "integers":
        return torch.randint(spec["low"], spec["high"] + 1, shape, dtype=dtype)
    return torch.rand(shape) < spec["p"]


def get_inputs():
    return [draw(spec) for spec in INPUTS]


def get_init_inputs():
    return []
'''


def _flat(out) -> list:
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _arg_names(gm, n: int) -> List[str]:
    """The forward's argument names: the traced placeholders' where they are n plain names."""
    names = [p.name for p in gm.graph.nodes if p.op == "placeholder"] if gm is not None else []
    ok = len(names) == n and all(s.isidentifier() and s not in ("self", "torch", "os") for s in names)
    return names if ok else [f"input{i}" for i in range(n)]


def write_problem(model, inputs: Sequence, folder: str, name: str) -> ProblemFiles:
    """Writes `<folder>/<name>.py` and `<folder>/<name>.pt` for `model` called as
    `model(*inputs)`, and checks that the written module computes what `model` does on `inputs`.
    Raises UnsupportedError for a module or input it cannot write, with the reason."""
    import torch
    import torch.fx

    if not isinstance(model, torch.nn.Module):
        raise UnsupportedError(f"ksol.optimize takes a torch.nn.Module, not a {type(model).__name__}")
    specs = [input_spec(x, k) for k, x in enumerate(inputs)]
    if not any(s["kind"] == "tensor" for s in specs):
        raise UnsupportedError("ksol.optimize needs at least one tensor among the inputs")
    was_training = model.training
    model.eval()  # ksol optimizes the module for inference: dropout off, batch norm's running statistics
    try:
        gm, trace_error = None, ""
        try:
            gm = torch.fx.symbolic_trace(model)
        except Exception as e:  # control flow on tensor values, or anything else torch.fx refuses
            trace_error = f"{type(e).__name__}: {e}"
            if type(model).__module__ == "__main__":
                raise UnsupportedError(
                    f"torch.fx cannot trace {type(model).__name__} ({trace_error[:300]}), and its class is defined in "
                    "__main__, which ksol's worker process cannot import: define the class in a module file, or make its "
                    "forward traceable (no Python control flow on tensor values)") from e
        os.makedirs(folder, exist_ok=True)
        pt = name + ".pt"
        saved = gm if gm is not None else model
        try:
            torch.save(saved, os.path.join(folder, pt))
        except Exception as e:
            raise UnsupportedError(f"{type(model).__name__} cannot be pickled for ksol's worker process: {type(e).__name__}: {e}") from e
        code = ""
        if gm is not None:
            body = "\n".join("    " + line if line.strip() else "" for line in gm.code.strip("\n").splitlines())
            code = "\nIts forward, as torch.fx traced it:\n\n" + body.replace('"""', "'''").replace("\\", "\\\\") + "\n"
        text = _TEMPLATE.format(cls=type(model).__name__, pt=pt, code=code,
                                how="its forward traced by torch.fx (a pickled GraphModule)" if gm is not None else
                                f"the module pickled as it is (torch.fx could not trace it: {trace_error[:200]})",
                                inputs=_literal(specs), args=", ".join(_arg_names(gm, len(specs))))
        path = os.path.join(folder, name + ".py")
        with open(path, "w") as fh:
            fh.write(text)
        _check_written(model, inputs, os.path.join(folder, pt))
    finally:
        model.train(was_training)
    return ProblemFiles(path, os.path.join(folder, pt), specs, gm is not None, trace_error)


def _check_written(model, inputs, pt_path: str) -> None:
    """The pickled module, loaded back, computes what the module does on the example (a trace
    fixes Python values and branches it saw, which a forward may not mean to)."""
    import torch

    try:
        written = torch.load(pt_path, map_location="cpu", weights_only=False)
    except TypeError:
        written = torch.load(pt_path, map_location="cpu")
    dev = next((p.device for p in model.parameters()), None) or \
        next((x.device for x in inputs if isinstance(x, torch.Tensor)), torch.device("cpu"))
    written.to(dev).eval()
    with torch.no_grad():
        want, got = _flat(model(*inputs)), _flat(written(*inputs))
    if not all(isinstance(t, torch.Tensor) for t in want):
        raise UnsupportedError("the module's forward returns " + ", ".join(sorted({type(t).__name__ for t in want})) +
                               ": ksol.optimize takes modules that return a tensor or a tuple of tensors")
    for k, (w, g) in enumerate(zip(want, got)):
        same = w.shape == g.shape and w.dtype == g.dtype and (
            torch.allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True) if w.is_floating_point() else torch.equal(g, w))
        if not same or len(want) != len(got):
            raise UnsupportedError(f"the module written for ksol does not compute what {type(model).__name__} does on the example "
                                   f"(output {k}): its forward depends on something torch.fx's trace fixed, such as a Python "
                                   "value or a branch taken at trace time")
