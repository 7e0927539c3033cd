import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """LayerNorm over the last three dims (KernelBench's 40_LayerNorm, small), its elementwise
    affine weight and bias drawn at random so that a wrong index into them shows, then a GELU:
    one row-wise program whose row is the normalized dims flattened."""

    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return F.gelu(self.ln(x + 1.0))


def get_inputs():
    return [torch.rand(3, 4, 5, 6)]


def get_init_inputs():
    return [(4, 5, 6)]
