import torch
import torch.nn as nn


class Model(nn.Module):
    """A 3x3 convolution with a bias, the minimum over its 48 channels, then tanh twice: one conv
    program whose epilogue reduces over the filters (the tensor cores' TF32 products under the
    default precision, the lanes' and warps' partials combined in the kernel), [N, 1, P, Q] out."""

    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3)

    def forward(self, x):
        y = torch.min(self.conv(x), dim=1, keepdim=True)[0]
        return torch.tanh(torch.tanh(y))


def get_inputs():
    return [torch.randn(3, 16, 37, 29)]


def get_init_inputs():
    return [16, 48]
