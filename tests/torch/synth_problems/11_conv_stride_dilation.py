import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A convolution of stride (2, 1), dilation 2 and padding (1, 2), without a bias, then GELU: the
    output's spatial extents differ from the image's."""

    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, (3, 2), stride=(2, 1), padding=(1, 2), dilation=2, bias=False)

    def forward(self, x):
        return F.gelu(self.conv(x))


def get_inputs():
    return [torch.randn(2, 4, 11, 7)]


def get_init_inputs():
    return [4, 6]
