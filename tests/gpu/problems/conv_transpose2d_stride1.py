import torch
import torch.nn as nn


class Model(nn.Module):
    """A transposed 2-D convolution at stride 1 (asymmetric filter and padding) with a bias, then
    tanh: the stitched module's one conv piece, by the filter flipped into a convolution's (weight
    preparation), a TF32 mma kernel under the default precision."""

    def __init__(self, c_in, c_out):
        super().__init__()
        self.ct = nn.ConvTranspose2d(c_in, c_out, (3, 5), padding=(1, 1))

    def forward(self, x):
        return torch.tanh(self.ct(x))


def get_inputs():
    return [torch.randn(3, 16, 29, 37)]


def get_init_inputs():
    return [16, 40]
