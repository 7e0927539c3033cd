# Returns a tensor subclass (a lazy or lying tensor could hide behind one).
import numpy as np
import torch
import torch.nn as nn


class Lazy(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        w = self.fc.weight.detach().numpy().astype(np.float64)
        b = self.fc.bias.detach().numpy().astype(np.float64)
        y = torch.from_numpy(np.maximum(x.detach().numpy() @ w.T + b, 0.0).astype(np.float32))
        return torch.Tensor._make_subclass(Lazy, y)
