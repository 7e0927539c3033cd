import torch
import torch.nn as nn


class Model(nn.Module):
    """A transposed 2-D convolution of stride 2 (padding 1, output padding 1), a bias and tanh: a
    direct-family contraction whose image reads divide by the stride, 24 filters, 16 x 9 reduction
    positions."""

    def __init__(self, c_in, c_out):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(c_in, c_out, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        return torch.tanh(self.deconv(x))


def get_inputs():
    return [torch.randn(2, 16, 9, 11)]


def get_init_inputs():
    return [16, 24]
