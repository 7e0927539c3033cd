import torch
import torch.nn as nn


class Model(nn.Module):
    """A stride-2 transposed 3-D convolution, a clamp from below and a division. Under the
    vendor-call plan: cuDNN's transposed convolution channels-last without its bias, then one
    elementwise piece that reads the output through the permutation (shared-memory tiles)."""

    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.ConvTranspose3d(c_in, c_out, 3, stride=2, padding=1)

    def forward(self, x):
        return torch.clamp(self.conv(x), min=-0.2) / 2.0


def get_inputs():
    return [torch.randn(2, 8, 6, 10, 12)]


def get_init_inputs():
    return [8, 36]
