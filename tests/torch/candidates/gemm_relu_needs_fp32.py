# The honest NumPy candidate for problems/01_gemm_relu.py, which refuses to run where PyTorch may
# compute float32 convolutions or matmuls in TF32: the worker verifies and times candidates in
# strict float32 (a stitched candidate's kept calls would otherwise inherit TF32's errors).
import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        if torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32:
            raise RuntimeError("called with TF32 allowed")
        w = self.fc.weight.detach().numpy().astype(np.float64)
        b = self.fc.bias.detach().numpy().astype(np.float64)
        y = np.maximum(x.detach().numpy().astype(np.float64) @ w.T + b, 0.0)
        return torch.from_numpy(y.astype(np.float32))
