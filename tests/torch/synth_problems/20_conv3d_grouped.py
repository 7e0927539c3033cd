import torch
import torch.nn as nn


class Model(nn.Module):
    """A grouped, strided and dilated 3-D convolution with a bias, then a per-channel scale and tanh."""

    def __init__(self, c, k, groups):
        super().__init__()
        self.conv = nn.Conv3d(c, k, (3, 2, 3), stride=(1, 2, 1), padding=(1, 0, 2), dilation=(1, 1, 2), groups=groups)
        self.scale = nn.Parameter(torch.randn(k, 1, 1, 1))

    def forward(self, x):
        return torch.tanh(self.conv(x) * self.scale)


def get_inputs():
    return [torch.randn(2, 4, 5, 6, 7)]


def get_init_inputs():
    return [4, 32, 2]
