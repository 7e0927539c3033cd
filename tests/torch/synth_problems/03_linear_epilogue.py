import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, plus a learned per-column shift, then SiLU and a residual of the GEMM: one GEMM
    program with its epilogue."""

    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)
        self.shift = nn.Parameter(torch.randn(n))

    def forward(self, x):
        h = self.fc(x)
        return torch.nn.functional.silu(h + self.shift) * 0.5 + h


def get_inputs():
    return [torch.randn(12, 24)]


def get_init_inputs():
    return [24, 20]
