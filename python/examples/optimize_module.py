"""ksol.optimize on a small module, then the returned module against the original (docs/PYTHON.md)."""
import logging
import sys

import torch

import ksol

logging.basicConfig(level=logging.INFO)  # ksol logs the command it runs and what the run returned
device = "cuda" if torch.cuda.is_available() else "cpu"
model = torch.nn.Sequential(torch.nn.LayerNorm(4096), torch.nn.ReLU()).to(device)
x = torch.randn(4096, 4096, device=device)
try:
    fast = ksol.optimize(model, [x], budget_seconds=30)
except ksol.NoGPUError as e:  # no GPU here: ksol checked the module, then stopped
    print(e, file=sys.stderr)
    sys.exit(e.exit_status)
kind = "ksol's kernels" if getattr(fast, "uses_ksol_kernels", False) else "PyTorch itself"
print(f"{kind}; largest difference from the original: {(fast(x) - model(x)).abs().max().item()}")
