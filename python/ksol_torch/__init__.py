"""ksol's PyTorch front end: reads KernelBench-format problems (a Python file defining
Model, get_inputs and get_init_inputs) and nn.Modules, traces them with torch.fx, estimates
their FLOPs and compulsory bytes for SOL, cuts the graph into pieces the ksol DSL can express,
and screens out degenerate problems. Python only because PyTorch demands it; the C++ `ksol
import kernelbench` command drives it (docs/TORCH.md)."""

__all__ = ["problem", "trace", "lower", "screen", "report"]
