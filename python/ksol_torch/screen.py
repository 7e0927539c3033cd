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


def screen(problem: Problem, model: torch.nn.Module, flops: float, max_flops: float = 2e10, draws: int = 3,
           seed: int = 1000, device: str = "cpu") -> Screen:
    """Runs a float64 copy of `model` on `draws` fresh draws of the problem's inputs."""
    if flops * draws > max_flops:
        return Screen("skipped", f"{flops / 1e9:.1f} GFLOP per call is too much for float64 screening on the CPU "
                                 f"(limit {max_flops / 1e9:.0f} GFLOP for {draws} draws)")
    m64 = copy.deepcopy(model).double().eval().to(device)
    results = []
    with torch.no_grad():
        for d in range(draws):
            results.append([t.cpu() for t in _flat(m64(*_draw(problem, seed + d, device)))])
    if not results[0]:
        return Screen("skipped", "the forward returns no tensor", draws)
    first = torch.cat(results[0])
    if not torch.isfinite(first).all():
        bad = int((~torch.isfinite(first)).sum())
        return Screen("nonfinite", f"{bad} of {first.numel()} outputs are NaN or Inf on the problem's own inputs", draws)
    allv = [torch.cat(r) for r in results]
    if all(bool((v == 0).all()) for v in allv):
        return Screen("zero", f"every output is 0 on {draws} draws of the inputs", draws)
    if first.numel() > 1 and all(float(v.max() - v.min()) <= 1e-12 * max(1.0, float(v.abs().max())) for v in allv):
        return Screen("constant_fill", f"all {first.numel()} outputs of a call are equal (a fill with one value passes)", draws)
    scale = max(1.0, max(float(v.abs().max()) for v in allv))
    if all(float((v - allv[0]).abs().max()) <= 1e-12 * scale for v in allv[1:]):
        return Screen("input_independent", f"the outputs are the same on {draws} different draws of the inputs", draws)
    return Screen("ok", f"outputs vary with the inputs ({first.numel()} values, {draws} draws)", draws)
