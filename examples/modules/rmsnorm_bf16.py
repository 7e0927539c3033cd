# RMSNorm over the last dim, bf16 in and out, fp32 math, eps 1e-6 (KernelBench format, written for ksol's row-operator comparisons): tasks/llm/rmsnorm_bf16 (X, W, Y).
import torch
import torch.nn as nn

R, C = 8192, 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter((1 + 0.1 * torch.randn(C)).to(torch.bfloat16))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(dim=1, keepdim=True) + 1e-6) * self.weight.float()).to(torch.bfloat16)


def get_inputs():
    return [torch.randn(R, C).to(torch.bfloat16)]


def get_init_inputs():
    return []
