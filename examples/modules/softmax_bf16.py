# Row softmax, bf16 in and out, fp32 math (KernelBench format, written for ksol's row-operator comparisons): tasks/llm/softmax_bf16 (X, Y).
import torch
import torch.nn as nn

R, C = 8192, 8192


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x.float(), dim=1).to(torch.bfloat16)


def get_inputs():
    return [torch.randn(R, C).to(torch.bfloat16)]


def get_init_inputs():
    return []
