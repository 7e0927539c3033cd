import torch
import torch.nn as nn


class Model(nn.Module):
    """A max pool over overlapping, padded and dilated windows (its padding is -inf), in ceil mode."""

    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(3, stride=2, padding=1, dilation=(1, 2), ceil_mode=True)

    def forward(self, x):
        return self.pool(x) * 2.0


def get_inputs():
    return [torch.randn(2, 3, 9, 10) - 3.0]


def get_init_inputs():
    return []
