"""Screening for degenerate problems: outputs that are zero, constant, independent of the
inputs, or not finite on the problem's own inputs. Such problems are reported apart: a kernel
that writes a constant would pass them."""
import copy
import dataclasses
from typing import List

import torch

from .problem import Problem, call


@dataclasses.dataclass
class Screen:
    verdict: str      # ok, zero, constant_fill, input_independent, nonfinite, skipped
    detail: str
    draws: int = 0


def _draw(problem: Problem, seed: int, device: str):
    torch.manual_seed(seed)
    xs = call(problem, "get_inputs")
    return [(x.double() if x.is_floating_point() else x).to(device) if isinstance(x, torch.Tensor) else x for x in xs]


def _flat(out) -> List[torch.Tensor]:
    outs = out if isinstance(out, (list, tuple)) else [out]
    return [o.detach().reshape(-1).double() for o in outs if isinstance(o, torch.Tensor)]


class Judge:
    """The screening criteria over the float64 outputs of several draws of the inputs, fed one
    draw at a time (the outputs stay where they were computed, a GPU's included; only the first
    draw's are held, for the input-independence test)."""

    def __init__(self):
        self.first = None      # the first draw's outputs, flattened float64
        self.draws = 0
        self.zero = True       # every output of every draw is 0
        self.constant = True   # every draw's outputs are all equal (to within 1e-12 of their scale)
        self.diff = 0.0        # largest difference from the first draw's outputs
        self.scale = 1.0       # max(1, largest |output|)
        self.nonfinite = 0     # NaN or Inf outputs in the first draw that has any
        self.nonfinite_draw = 0
        self.numel = 0

    def add(self, outs: List[torch.Tensor]):
        outs = [o.detach().reshape(-1).double() for o in outs]
        n = sum(o.numel() for o in outs)
        finite = [o[torch.isfinite(o)] for o in outs]
        amax = max([float(f.abs().max()) for f in finite if f.numel()], default=0.0)
        lo = min([float(o.min()) for o in outs if o.numel()], default=0.0)
        hi = max([float(o.max()) for o in outs if o.numel()], default=0.0)
        bad = sum(int((~torch.isfinite(o)).sum()) for o in outs)
        if self.first is None:
            self.first, self.numel = outs, n
        elif [o.numel() for o in outs] != [o.numel() for o in self.first]:
            self.diff = float("inf")  # the outputs' sizes depend on the inputs
        else:
            d = [float((o - f.to(o.device)).abs().max()) for o, f in zip(outs, self.first) if o.numel()]
            # A NaN difference (NaN in either draw) is no evidence of equal outputs.
            self.diff = max([self.diff] + [x if x == x else float("inf") for x in d])
        if bad and not self.nonfinite:
            self.nonfinite, self.nonfinite_draw = bad, self.draws
        self.zero = self.zero and all(bool((o == 0).all()) for o in outs)
        self.constant = self.constant and n > 1 and hi - lo <= 1e-12 * max(1.0, amax)
        self.scale = max(self.scale, amax)
        self.draws += 1

    def verdict(self) -> Screen:
        d = self.draws
        if self.first is None or not self.first:
            return Screen("skipped", "the forward returns no tensor", d)
        if self.numel == 0:
            return Screen("skipped", "the forward's outputs are empty", d)
        if self.nonfinite:
            return Screen("nonfinite", f"{self.nonfinite} of {self.numel} outputs are NaN or Inf on the problem's own inputs "
                                       f"(draw {self.nonfinite_draw + 1} of {d})", d)
        if self.zero:
            return Screen("zero", f"every output is 0 on {d} draws of the inputs", d)
        if self.constant:
            return Screen("constant_fill", f"all {self.numel} outputs of a call are equal (a fill with one value passes)", d)
        if d > 1 and self.diff <= 1e-12 * self.scale:
            return Screen("input_independent", f"the outputs are the same on {d} different draws of the inputs", d)
        return Screen("ok", f"outputs vary with the inputs ({self.numel} values, {d} draws)", d)


DEGENERATE = ("zero", "constant_fill", "input_independent", "nonfinite")


def screen(problem: Problem, model: torch.nn.Module, flops: float, max_flops: float = 2e10, draws: int = 3,
           seed: int = 1000, device: str = "cpu") -> Screen:
    """Runs a float64 copy of `model` on `draws` fresh draws of the problem's inputs."""
    if flops * draws > max_flops:
        return Screen("skipped", f"{flops / 1e9:.1f} GFLOP per call is too much for float64 screening on the CPU "
                                 f"(limit {max_flops / 1e9:.0f} GFLOP for {draws} draws)")
    m64 = copy.deepcopy(model).double().eval().to(device)
    judge = Judge()
    with torch.no_grad():
        for d in range(draws):
            judge.add(_flat(m64(*_draw(problem, seed + d, device))))
    return judge.verdict()
