import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench's 5_Matrix_scalar_multiplication (small): C = A * s, s a Python float that
    get_inputs gives the same in every draw, so the program reads it as a constant."""

    def forward(self, A, s):
        return A * s


def get_inputs():
    A = torch.rand(6, 10)
    s = 3.14
    return [A, s]


def get_init_inputs():
    return []
