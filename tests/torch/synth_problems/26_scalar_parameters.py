import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench's 68_Matmul_Min_Subtract and 84's learnable scale (small): a GEMM whose epilogue
    reads a parameter of shape [] and one of shape [1], each one value broadcast to every element."""

    def __init__(self, in_features, out_features, constant):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.constant = nn.Parameter(torch.tensor(constant))
        self.scale = nn.Parameter(torch.ones(1) * 1.5)

    def forward(self, x):
        x = self.linear(x)
        x = torch.min(x, self.constant)
        return (x - self.constant) * self.scale


def get_inputs():
    return [torch.randn(24, 40)]


def get_init_inputs():
    return [40, 32, 0.25]
