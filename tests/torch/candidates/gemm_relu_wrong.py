# Wrong by a relative 1e-3: the float64 check must catch it.
import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        w = self.fc.weight.detach().numpy()
        b = self.fc.bias.detach().numpy()
        y = np.maximum(x.detach().numpy() @ w.T + b, 0.0) * np.float32(1.001)
        return torch.from_numpy(y.astype(np.float32))
