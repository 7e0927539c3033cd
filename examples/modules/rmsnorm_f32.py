# RMSNorm over the last dim, fp32, eps 1e-6 (KernelBench format, written for ksol's row-operator comparisons): tasks/llm/rmsnorm_f32 (X, W, Y).
import torch
import torch.nn as nn

R, C = 8192, 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(C))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + 1e-6) * self.weight


def get_inputs():
    return [torch.randn(R, C).to(torch.float32)]


def get_init_inputs():
    return []
