import torch
import torch.nn as nn


class Model(nn.Module):
    """A depthwise convolution (groups = channels): the DSL's conv has no groups, so it is refused."""

    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, groups=c)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(2, 4, 8, 8)]


def get_init_inputs():
    return [4]
