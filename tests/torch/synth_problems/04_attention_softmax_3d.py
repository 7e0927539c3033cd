import torch
import torch.nn as nn


class Model(nn.Module):
    """Scaled softmax over the last dim of a [batch, heads*queries, keys] tensor, then LayerNorm
    of a residual: row-wise over the last dim, the leading dims merged into rows."""

    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        return self.ln(torch.softmax(x * 0.125, dim=2) + x)


def get_inputs():
    return [torch.randn(2, 6, 48)]


def get_init_inputs():
    return [48]
