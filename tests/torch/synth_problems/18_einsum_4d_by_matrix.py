import torch
import torch.nn as nn


class Model(nn.Module):
    """An einsum of a 4-D tensor with a matrix over its last dim (KernelBench level 1's 4-D
    tensor-matrix product, small): one 2-D GEMM over the tensor's rows, merged."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.einsum("bijl,lk->bijk", a, b)


def get_inputs():
    return [torch.randn(2, 3, 4, 5), torch.randn(5, 6)]


def get_init_inputs():
    return []
