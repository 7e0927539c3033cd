import torch
import torch.nn as nn


class Model(nn.Module):
    """Degenerate: ReLU of a value that is never positive (-(x*x))."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(-(x * x))


def get_inputs():
    return [torch.randn(32)]


def get_init_inputs():
    return []
