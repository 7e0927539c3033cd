import torch
import torch.nn as nn


class Model(nn.Module):
    """A strided, dilated, padded 1-D convolution with a bias, a per-channel shift and an
    activation (KernelBench level 1's conv1d problems, small): the conv family's 2-D program over
    an image of height 1."""

    def __init__(self, c_in, c_out, k):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, k, stride=2, padding=2, dilation=2)
        self.shift = nn.Parameter(torch.randn(c_out, 1))

    def forward(self, x):
        return torch.tanh(self.conv(x) + self.shift)


def get_inputs():
    return [torch.randn(2, 3, 17)]


def get_init_inputs():
    return [3, 5, 3]
