import torch
import torch.nn as nn


class Model(nn.Module):
    """Control flow on tensor values: torch.fx cannot trace it."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return -x


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
