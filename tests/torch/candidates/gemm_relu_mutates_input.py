# A candidate for problems/01_gemm_relu.py that computes the right answer and then writes into its
# input's last element: the correctness gate must call it input_mutated (an input the caller
# reuses would carry its mark).
import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        w = self.fc.weight.detach().numpy().astype(np.float64)
        b = self.fc.bias.detach().numpy().astype(np.float64)
        y = np.maximum(x.detach().numpy().astype(np.float64) @ w.T + b, 0.0)
        x.view(-1)[-1] = 12345.0
        return torch.from_numpy(y.astype(np.float32))
