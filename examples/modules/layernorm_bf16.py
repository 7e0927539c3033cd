# LayerNorm over the last dim, bf16 in and out, fp32 math, eps 1e-5 (KernelBench format, written for ksol's row-operator comparisons): tasks/llm/layernorm_bf16 (X, W, B, Y).
import torch
import torch.nn as nn

R, C = 8192, 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter((1 + 0.1 * torch.randn(C)).to(torch.bfloat16))
        self.bias = nn.Parameter((0.1 * torch.randn(C)).to(torch.bfloat16))

    def forward(self, x):
        y = nn.functional.layer_norm(x.float(), (C,), self.weight.float(), self.bias.float(), 1e-5)
        return y.to(torch.bfloat16)


def get_inputs():
    return [torch.randn(R, C).to(torch.bfloat16)]


def get_init_inputs():
    return []
