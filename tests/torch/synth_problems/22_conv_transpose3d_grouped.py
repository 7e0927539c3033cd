import torch
import torch.nn as nn


class Model(nn.Module):
    """A grouped transposed 3-D convolution without bias, then ReLU."""

    def __init__(self, c, k, groups):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(c, k, 3, stride=2, padding=1, groups=groups, bias=False)

    def forward(self, x):
        return torch.relu(self.conv_transpose(x))


def get_inputs():
    return [torch.randn(1, 4, 3, 4, 3)]


def get_init_inputs():
    return [4, 32, 2]
