import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A chain of activations over two same-shaped inputs: one elementwise DSL statement."""

    def __init__(self):
        super().__init__()
        self.act = nn.LeakyReLU(0.2)

    def forward(self, x, y):
        a = self.act(x) * 0.5 - y / 3.0
        b = F.hardswish(a) + F.softplus(y) + F.elu(x, alpha=0.7)
        c = torch.clamp(F.gelu(b, approximate="tanh"), min=-2.0, max=4.0)
        return F.softsign(c) + torch.sigmoid(a) * torch.tanh(b) - F.mish(x) + F.relu6(y) + F.hardsigmoid(x)


def get_inputs():
    return [torch.randn(16, 40), torch.randn(16, 40)]


def get_init_inputs():
    return []
