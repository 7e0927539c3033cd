import torch
import torch.nn as nn


class Model(nn.Module):
    """A 3-D tensor times a matrix (KernelBench level 1's 3-D tensor-matrix product, small): one
    2-D GEMM over the tensor's rows, its leading dims merged."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(2, 5, 6), torch.randn(6, 3)]


def get_init_inputs():
    return []
