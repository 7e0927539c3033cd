import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """F.conv2d on the module's own filter (stride 2, no padding), then a per-channel shift of shape
    [K, 1, 1], a scale, tanh and a residual input of the output's shape: one epilogue expression."""

    def __init__(self, c_in, c_out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(c_out, c_in, 3, 3) * 0.2)
        self.shift = nn.Parameter(torch.randn(c_out, 1, 1))

    def forward(self, x, y):
        z = F.conv2d(x, self.weight, stride=2)
        return torch.tanh((z + self.shift) * 0.5) + y


def get_inputs():
    return [torch.randn(2, 3, 9, 9), torch.randn(2, 4, 4, 4)]


def get_init_inputs():
    return [3, 4]
